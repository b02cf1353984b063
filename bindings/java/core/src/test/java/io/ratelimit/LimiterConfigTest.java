package io.ratelimit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.OptionalLong;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Several rates in one all-or-nothing decision, per-rate bursts, initial
 * tokens, per-client quotas, acquireAtMost and refund (issue 13), blocking and
 * asynchronous, against a real Redis.
 */
class LimiterConfigTest extends RedisTestBase {
    private static final Duration DAY = Duration.ofDays(1);

    @Test
    void severalRatesParseAndFormatAsTheCoreDoes() {
        assertEquals(List.of(Rate.of(10, Duration.ofSeconds(1)), Rate.of(1000, Duration.ofHours(1))),
                Rate.parseAll("10/second;1000/hour"));
        assertEquals(3, Rate.parseAll("1/s,2/minute|3/day").size());
        LimiterConfig c = LimiterConfig.of(Algorithm.GCRA, Rate.of(10, Duration.ofSeconds(1)).withBurst(20),
                Rate.parse("1000/hour")).initialTokens(5).perClient();
        assertEquals("gcra 10/second burst 20;1000/hour initial 5 per_client", c.toString());
        assertEquals("token_bucket 5/minute initial 0",
                LimiterConfig.of(Algorithm.TOKEN_BUCKET, "5/minute").initialTokens(0).toString());
        assertEquals(OptionalLong.of(0), LimiterConfig.of(Algorithm.GCRA, "1/s").initialTokens(0).initialTokens());
        assertEquals(OptionalLong.empty(), LimiterConfig.of(Algorithm.GCRA, "1/s").initialTokens());
        assertTrue(c.isPerClient());
        assertEquals(c, LimiterConfig.of(Algorithm.GCRA, Rate.of(10, Duration.ofSeconds(1)).withBurst(20),
                Rate.parse("1000/hour")).initialTokens(5).perClient());
        assertNotEquals(c, LimiterConfig.of(Algorithm.GCRA, Rate.of(10, Duration.ofSeconds(1)).withBurst(20),
                Rate.parse("1000/hour")).initialTokens(5));
    }

    @Test
    void badConfigsFailWhereTheyAreMade() {
        InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
                () -> Rate.parseAll("1/s;2/s;3/s;4/s;5/s;6/s;7/s;8/s;9/s"));
        assertTrue(e.getMessage().contains("at most 8 rates"), e.getMessage());
        e = assertThrows(InvalidArgumentException.class, () -> LimiterConfig.of(Algorithm.GCRA, List.of()));
        assertTrue(e.getMessage().contains("at least one rate"), e.getMessage());
        e = assertThrows(InvalidArgumentException.class,
                () -> LimiterConfig.of(Algorithm.FIXED_WINDOW, "5/minute").initialTokens(2));
        assertTrue(e.getMessage().contains("initial tokens apply to token_bucket, gcra and leaky_bucket"),
                e.getMessage());
        e = assertThrows(InvalidArgumentException.class, () -> LimiterConfig.of(Algorithm.GCRA, "5/minute")
                .initialTokens(-3));
        assertTrue(e.getMessage().startsWith("initialTokens must be at least 0"), e.getMessage());
        e = assertThrows(InvalidArgumentException.class, () -> client.limiter("b", Algorithm.SLIDING_WINDOW,
                Rate.of(5, DAY), Rate.of(50, DAY).withBurst(7)));
        assertTrue(e.getMessage().startsWith("rate 2: burst applies to token_bucket and gcra only"), e.getMessage());
        assertThrows(InvalidArgumentException.class, () -> client.limiter("b", "10/fortnight", Algorithm.GCRA));
    }

    @Test
    void aCallPassesOnlyIfEveryRateAdmitsIt() throws Exception {
        // 5 a day and 3 a week: the second binds first
        Limiter lim = client.limiter("multi", Algorithm.FIXED_WINDOW, Rate.of(5, DAY), Rate.of(3, Duration.ofDays(7)));
        assertEquals(2, lim.config().get().rates().size());
        Result r = lim.acquire("u", 2);
        assertTrue(r.allowed());
        assertEquals(1, r.remaining());
        assertEquals(1, r.rateIndex(), "the weekly rate has the least left");
        assertEquals(2, r.granted());
        r = lim.acquire("u", 2);
        assertFalse(r.allowed());
        assertEquals(1, r.rateIndex(), "the weekly rate denies");
        assertEquals(0, r.granted());
        assertTrue(r.retryAfter().compareTo(Duration.ofDays(6)) > 0, r.toString());
        // all or nothing: the denied call took nothing from the daily rate either
        Limiter daily = client.limiter("multi", Rate.of(5, DAY), Algorithm.FIXED_WINDOW);
        assertEquals(3, daily.peek("u", 1).remaining());
        assertTrue(lim.acquire("u", 1).allowed());
        assertEquals(2, daily.peek("u", 1).remaining());
        assertFalse(lim.acquire("u", 1).allowed());
        // every rate has its own key; reset deletes them all
        assertEquals(2, keysOf("multi").size(), keysOf("multi").toString());
        lim.reset("u");
        assertEquals(0, keysOf("multi").size());
        assertTrue(lim.acquire("u", 3).allowed());
    }

    @Test
    void stringRatesAndListsMakeTheSameLimiter() {
        Limiter a = client.limiter("s", "2/minute;3/hour", Algorithm.SLIDING_WINDOW);
        Limiter b = client.limiter("s", List.of(Rate.parse("2/minute"), Rate.parse("3/hour")),
                Algorithm.SLIDING_WINDOW);
        assertEquals(a.config(), b.config());
        assertTrue(a.acquire("u", 2).allowed());
        assertFalse(b.acquire("u", 1).allowed(), "b shares a's state");
        assertEquals(0, b.peek("u", 1).rateIndex(), "the minute rate denies");
    }

    @Test
    void eachRateHasItsOwnBurst() {
        // 1 a second with bursts of 4, and 100 an hour
        Limiter lim = client.limiter("burst", Algorithm.TOKEN_BUCKET, Rate.of(1, Duration.ofSeconds(1)).withBurst(4),
                Rate.of(100, Duration.ofHours(1)));
        for (int i = 0; i < 4; i++) {
            assertTrue(lim.acquire("u").allowed(), "call " + i);
        }
        Result r = lim.acquire("u");
        assertFalse(r.allowed());
        assertEquals(0, r.rateIndex());
        assertEquals(4, r.limit(), "the binding rate's capacity");
    }

    @Test
    void initialTokensGiveANewEntityThatMany() {
        Limiter empty = client.limiter("init0", LimiterConfig.of(Algorithm.TOKEN_BUCKET, "10/minute").initialTokens(0));
        Result r = empty.acquire("u");
        assertFalse(r.allowed(), "starts empty");
        assertTrue(r.retryAfter().toMillis() > 0 && r.retryAfter().toMillis() <= 6000, r.toString());
        Limiter three = client.limiter("init3", LimiterConfig.of(Algorithm.GCRA, "10/minute").initialTokens(3));
        for (int i = 0; i < 3; i++) {
            assertTrue(three.acquire("u").allowed(), "call " + i);
        }
        assertFalse(three.acquire("u").allowed());
        Limiter full = client.limiter("initfull", LimiterConfig.of(Algorithm.LEAKY_BUCKET, "10/minute"));
        assertEquals(10, full.acquireAtMost("u", 50).granted());
    }

    @Test
    void acquireAtMostTakesWhatIsLeft() {
        Limiter lim = client.limiter("most", Rate.of(5, DAY), Algorithm.GCRA);
        Result r = lim.acquireAtMost("u", 3);
        assertTrue(r.allowed());
        assertEquals(3, r.granted());
        r = lim.acquireAtMost("u", 10);
        assertTrue(r.allowed());
        assertEquals(2, r.granted());
        assertEquals(0, r.remaining());
        r = lim.acquireAtMost("u", 10);
        assertFalse(r.allowed());
        assertEquals(0, r.granted());
        // with several rates: the most every rate admits
        Limiter two = client.limiter("most2", "10/day;4/day", Algorithm.FIXED_WINDOW);
        assertEquals(4, two.acquireAtMost("u", 7).granted());
        assertEquals(6, client.limiter("most2", "10/day", Algorithm.FIXED_WINDOW).peek("u", 1).remaining());
    }

    @Test
    void refundGivesPermitsBackNeverAboveFull() {
        Limiter lim = client.limiter("refund", Rate.of(5, DAY), Algorithm.TOKEN_BUCKET);
        assertTrue(lim.acquire("u", 5).allowed());
        assertFalse(lim.acquire("u", 1).allowed());
        Result r = lim.refund("u", 2);
        assertTrue(r.allowed());
        assertEquals(2, r.granted());
        assertEquals(2, r.remaining());
        assertTrue(lim.acquire("u", 2).allowed());
        assertFalse(lim.acquire("u", 1).allowed());
        assertEquals(3, lim.refund("u", 3).remaining());
        r = lim.refund("u", 5);
        assertEquals(5, r.remaining(), "never above full");
        InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> lim.refund("u", 6));
        assertTrue(e.getMessage().contains("exceed what the token_bucket limiter can hold (5)"), e.getMessage());
        assertTrue(lim.acquire("u", 5).allowed());
        assertFalse(lim.acquire("u", 1).allowed());
    }

    @Test
    void perClientQuotasAreIsolatedPerClientId() throws Exception {
        try (RateLimitClient a = RateLimitClient.connect(redis.url(), ClientOptions.defaults().clientId("pod-a"));
                RateLimitClient b = RateLimitClient.connect(redis.url(), ClientOptions.defaults().clientId("pod-b"));
                RateLimitClient a2 = RateLimitClient.connect(redis.url(),
                        ClientOptions.defaults().clientId("pod-a"))) {
            assertEquals("pod-a", a.clientId());
            LimiterConfig each = LimiterConfig.of(Algorithm.SLIDING_LOG, "3/day").perClient();
            Limiter la = a.limiter("pc", each);
            Limiter lb = b.limiter("pc", each);
            assertTrue(la.acquire("u", 3).allowed());
            assertFalse(la.acquire("u", 1).allowed());
            assertTrue(lb.acquire("u", 3).allowed(), "b has a quota of its own");
            assertFalse(lb.acquire("u", 1).allowed());
            // the same client id (a restart) finds its quota used
            assertFalse(a2.limiter("pc", each).acquire("u", 1).allowed());
            List<String> keys = keysOf("pc");
            assertEquals(2, keys.size(), keys.toString());
            assertTrue(keys.stream().anyMatch(k -> k.contains("pod-a")) && keys.stream().anyMatch(k -> k.contains("pod-b")),
                    keys.toString());
            // the overall scope is one quota for every client
            LimiterConfig shared = LimiterConfig.of(Algorithm.SLIDING_LOG, "3/day");
            assertTrue(a.limiter("ov", shared).acquire("u", 3).allowed());
            assertFalse(b.limiter("ov", shared).acquire("u", 1).allowed());
        }
    }

    @Test
    void perClientKeyIsTheKeyThisClientWrites() throws Exception {
        try (RateLimitClient a = RateLimitClient.connect(redis.url(), ClientOptions.defaults().clientId("pod-a"))) {
            Limiter la = a.limiter("pc-key", LimiterConfig.of(Algorithm.GCRA, "3/day").perClient());
            assertTrue(la.acquire("u").allowed());
            assertEquals("rl:{pc-key:u%Ppod-a}:gcra", la.key("u"));
            assertEquals(List.of(la.key("u")), keysOf("pc-key"));
            a.configure("pc-key-stored", LimiterConfig.of(Algorithm.GCRA, "3/day").perClient());
            assertEquals("rl:{pc-key-stored:u%Ppod-a}:gcra", a.limiter("pc-key-stored").key("u"));
        }
    }

    @Test
    void clientIdsAreCheckedAndDefaultToARandomOne() throws Exception {
        assertTrue(client.clientId().matches("[0-9a-f]{32}"), client.clientId());
        try (RateLimitClient other = RateLimitClient.connect(redis.url())) {
            assertNotEquals(client.clientId(), other.clientId());
        }
        assertThrows(InvalidArgumentException.class,
                () -> RateLimitClient.connect(redis.url(), ClientOptions.defaults().clientId("no:colons")));
        assertThrows(InvalidArgumentException.class,
                () -> RateLimitClient.connect(redis.url(), ClientOptions.defaults().clientId("x".repeat(65))));
        assertThrows(InvalidArgumentException.class,
                () -> RateLimitClient.connect(redis.url(), ClientOptions.defaults().configRefresh(Duration.ZERO)));
    }

    /** Many threads, mixed permits, two rates: never more than either admits, and each consumes the same. */
    @ParameterizedTest
    @EnumSource(Algorithm.class)
    void manyThreadsNeverPassAnyRate(Algorithm algorithm) throws Exception {
        Limiter lim = client.limiter("hot-" + algorithm, algorithm, Rate.of(40, DAY), Rate.of(25, Duration.ofDays(2)));
        AtomicLong admitted = new AtomicLong();
        AtomicLong calls = new AtomicLong();
        ConcurrencyTest.runThreads(ConcurrencyTest.THREADS, i -> {
            for (int n = 0; n < 6; n++) {
                long permits = 1 + ThreadLocalRandom.current().nextInt(3);
                Result r = lim.acquire("one-key", permits);
                calls.incrementAndGet();
                if (r.allowed()) {
                    admitted.addAndGet(permits);
                    assertEquals(permits, r.granted());
                } else {
                    assertEquals(1, r.rateIndex(), "only the tighter rate can deny");
                }
            }
        });
        assertTrue(admitted.get() <= 25 && admitted.get() >= 23, algorithm + ": admitted " + admitted);
        // the denied calls took nothing from the looser rate
        Limiter first = client.limiter("hot-" + algorithm, Rate.of(40, DAY), algorithm);
        assertEquals(40 - admitted.get(), first.peek("one-key", 1).remaining(), algorithm.toString());
        assertEquals(25 - admitted.get(), lim.peek("one-key", 1).remaining());
    }

    @Test
    void asynchronousCallsKeepAllOrNothing() throws Exception {
        Limiter lim = client.limiter("async", Algorithm.GCRA, Rate.of(50, DAY), Rate.of(30, Duration.ofDays(3)));
        List<CompletableFuture<Result>> futures = new ArrayList<>();
        for (int i = 0; i < 200; i++) {
            futures.add(lim.acquireAsync("k"));
        }
        long allowed = 0;
        for (CompletableFuture<Result> f : futures) {
            Result r = f.get();
            if (r.allowed()) {
                allowed++;
            } else {
                assertEquals(1, r.rateIndex());
            }
        }
        assertEquals(30, allowed);
        assertEquals(20, client.limiter("async", Rate.of(50, DAY), Algorithm.GCRA).peek("k", 1).remaining());
        Result refunded = lim.refundAsync("k", 4).get();
        assertEquals(4, refunded.granted());
        Result most = lim.acquireAtMostAsync("k", 10).get();
        assertTrue(most.allowed());
        assertEquals(4, most.granted());
        assertFalse(lim.acquireAtMostAsync("k", 10).get().allowed());
        // the core's refusal fails the future with the blocking call's exception
        CompletableFuture<Result> bad = lim.refundAsync("k", 0);
        Exception e = assertThrows(Exception.class, bad::join);
        assertTrue(e.getCause() instanceof InvalidArgumentException, e.toString());
    }

    @Test
    void batchesMixLimitersAndOperations() {
        Limiter multi = client.limiter("batch", "3/day;2/day", Algorithm.SLIDING_LOG);
        Limiter single = client.limiter("batch1", "5/day", Algorithm.TOKEN_BUCKET);
        List<Result> rs = client.execute(Arrays.asList(Request.acquireAtMost(multi, "u", 5),
                Request.acquire(single, "u", 4), Request.refund(single, "u", 1), Request.acquire(multi, "u", 1)));
        assertEquals(2, rs.get(0).granted());
        assertTrue(rs.get(1).allowed());
        assertEquals(2, rs.get(2).remaining());
        assertFalse(rs.get(3).allowed());
        assertEquals(1, rs.get(3).rateIndex());
    }

    private static List<String> keysOf(String name) throws Exception {
        List<String> out = new ArrayList<>();
        for (String k : redis.keys()) {
            if (k.contains("{" + name + ":")) {
                out.add(k);
            }
        }
        return out;
    }
}
