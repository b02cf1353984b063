package io.ratelimit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import org.junit.jupiter.api.Test;

/**
 * Limiter specs stored in Redis (Redisson's setRate / trySetRate / getConfig):
 * configure, read, delete, limiters that follow the stored spec, the check
 * that an explicit spec agrees, and a change reaching another client within
 * its configRefresh (timed asynchronous acquires included, mid-wait). Each test uses names of its own: a client caches stored
 * specs (and their absence) across the FLUSHALL between tests.
 */
class StoredConfigTest extends RedisTestBase {
    private static final LimiterConfig FIVE_A_MINUTE = LimiterConfig.of(Algorithm.GCRA, "5/minute");

    @Test
    void configureReadAndDelete() throws Exception {
        assertEquals(Optional.empty(), client.getConfig("crud"));
        LimiterConfig full = LimiterConfig.of(Algorithm.TOKEN_BUCKET, Rate.of(10, Duration.ofSeconds(1)).withBurst(20),
                Rate.parse("1000/hour")).initialTokens(5).perClient();
        assertTrue(client.configureIfAbsent("crud", full));
        assertEquals(Optional.of(full), client.getConfig("crud"), "every field survives the round trip");
        assertFalse(client.configureIfAbsent("crud", FIVE_A_MINUTE), "trySetRate keeps what is stored");
        assertEquals(Optional.of(full), client.getConfig("crud"));
        client.configure("crud", FIVE_A_MINUTE);
        assertEquals(Optional.of(FIVE_A_MINUTE), client.getConfig("crud"));
        assertEquals(-1L, redis.command("PTTL", "rl:config:crud"), "a stored spec lasts until deleted");
        assertTrue(client.deleteConfig("crud"));
        assertFalse(client.deleteConfig("crud"));
        assertEquals(Optional.empty(), client.getConfig("crud"));
        assertThrows(InvalidArgumentException.class, () -> client.configure("crud", null));
        assertThrows(InvalidArgumentException.class, () -> client.configure("", FIVE_A_MINUTE));
    }

    @Test
    void aLimiterWithoutRatesFollowsTheStoredSpec() {
        client.configure("stored", FIVE_A_MINUTE);
        Limiter lim = client.limiter("stored");
        assertTrue(lim.isStored());
        assertEquals(Optional.empty(), lim.config());
        for (int i = 0; i < 5; i++) {
            assertTrue(lim.acquire("u").allowed(), "call " + i);
        }
        Result r = lim.acquire("u");
        assertFalse(r.allowed());
        assertEquals(5, r.limit());
        // the same state as the explicit limiter of that spec
        assertFalse(client.limiter("stored", FIVE_A_MINUTE).peek("u", 1).allowed());
        assertEquals("rl:{stored:u}:gcra", lim.key("u"));
        lim.reset("u");
        assertTrue(lim.acquireAtMost("u", 9).granted() == 5);
        assertEquals(2, lim.refund("u", 2).granted());
    }

    @Test
    void nothingStoredIsAClearErrorAtCreationAndUse() throws Exception {
        InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> client.limiter("unset"));
        assertTrue(e.getMessage().contains("no configuration is stored for limiter 'unset'"), e.getMessage());
        try (RateLimitClient other = RateLimitClient.connect(redis.url(),
                ClientOptions.defaults().configRefresh(Duration.ofMillis(50)))) {
            other.configure("gone", FIVE_A_MINUTE);
            Limiter lim = other.limiter("gone");
            assertTrue(lim.acquire("u").allowed());
            client.deleteConfig("gone"); // by another client: this one learns within 50 ms
            Thread.sleep(150);
            e = assertThrows(InvalidArgumentException.class, () -> lim.acquire("u"));
            assertTrue(e.getMessage().contains("no configuration is stored for limiter 'gone'"), e.getMessage());
            CompletionException async = assertThrows(CompletionException.class, () -> lim.acquireAsync("u").join());
            assertTrue(async.getCause() instanceof InvalidArgumentException, async.toString());
        }
    }

    @Test
    void anExplicitSpecMustAgreeWithTheStoredOne() {
        client.configure("agree", LimiterConfig.of(Algorithm.GCRA, Rate.parse("10/second")));
        InvalidArgumentException e = assertThrows(InvalidArgumentException.class,
                () -> client.limiter("agree", "5/second", Algorithm.GCRA));
        assertTrue(e.getMessage().contains("gcra 10/second") && e.getMessage().contains("gcra 5/second"),
                e.getMessage());
        assertThrows(InvalidArgumentException.class,
                () -> client.limiter("agree", LimiterConfig.of(Algorithm.GCRA, "10/second").perClient()));
        // the same spec, however its defaults are spelled
        client.limiter("agree", "10/second", Algorithm.GCRA);
        client.limiter("agree", Rate.parse("10/second").withBurst(10), Algorithm.GCRA);
    }

    @Test
    void aChangeByOneClientReachesAnotherWithinConfigRefresh() throws Exception {
        long refreshMs = 300;
        try (RateLimitClient follower = RateLimitClient.connect(redis.url(),
                ClientOptions.defaults().configRefresh(Duration.ofMillis(refreshMs)))) {
            client.configure("live", LimiterConfig.of(Algorithm.FIXED_WINDOW, "2/day"));
            Limiter lim = follower.limiter("live");
            assertTrue(lim.acquire("u").allowed());
            assertTrue(lim.acquire("u").allowed());
            assertFalse(lim.acquire("u").allowed());
            long changed = System.nanoTime();
            client.configure("live", LimiterConfig.of(Algorithm.FIXED_WINDOW, "10/day"));
            Result r;
            do {
                r = lim.acquire("u");
            } while (!r.allowed() && System.nanoTime() - changed < Duration.ofSeconds(3).toNanos());
            long tookMs = (System.nanoTime() - changed) / 1_000_000;
            assertTrue(r.allowed(), "the new rate never reached the other client");
            assertEquals(10, r.limit());
            assertTrue(tookMs <= refreshMs + 200, "took " + tookMs + " ms, configRefresh is " + refreshMs);
            assertEquals(7, r.remaining(), "the window kept its count across the change");
            // the asynchronous path follows the stored spec as well
            assertEquals(10, lim.acquireAsync("u").get().limit());
        }
    }

    @Test
    void timedAsyncAcquiresFollowAStoredSpecLoweredMidWait() throws Exception {
        // issue 41: every retry of tryAcquireAsync uses the spec as the
        // client's cache has it then, as tryAcquire does, not the one it was
        // submitted with (under which 19 of these waiters were admitted)
        try (RateLimitClient follower = RateLimitClient.connect(redis.url(),
                ClientOptions.defaults().configRefresh(Duration.ofMillis(100)))) {
            client.configure("lowered", LimiterConfig.of(Algorithm.GCRA, "5/second"));
            Limiter lim = follower.limiter("lowered");
            for (int i = 0; i < 5; i++) {
                assertTrue(lim.acquire("u").allowed(), "call " + i);
            }
            List<CompletableFuture<Result>> waiters = new ArrayList<>();
            for (int i = 0; i < 20; i++) {
                waiters.add(lim.tryAcquireAsync("u", 1, Duration.ofSeconds(6)));
            }
            client.configure("lowered", LimiterConfig.of(Algorithm.GCRA, "1/minute")); // before their retries, 200 ms on
            long changed = System.nanoTime();
            int admitted = 0;
            for (CompletableFuture<Result> w : waiters) {
                admitted += w.get().allowed() ? 1 : 0;
            }
            long tookMs = (System.nanoTime() - changed) / 1_000_000;
            // the TAT the old rate left lets one through under the new one
            assertTrue(admitted <= 1, admitted + " admitted after the rate was lowered to 1/minute");
            assertTrue(tookMs < 3000, "the others gave up after " + tookMs + " ms, not at once under the new rate");
        }
    }

    @Test
    void anOutageNeverFailsCreationUnderAllowOrDeny() throws Exception {
        int port = RedisServer.freePort();
        String url = "redis://127.0.0.1:" + port;
        for (OnRedisError policy : new OnRedisError[] {OnRedisError.ALLOW, OnRedisError.DENY}) {
            ClientOptions options = ClientOptions.defaults().onRedisError(policy).timeout(Duration.ofMillis(200));
            try (RateLimitClient down = RateLimitClient.connect(url, options)) {
                Limiter stored = down.limiter("down");
                Result r = stored.acquire("u");
                assertTrue(r.fallback());
                assertEquals(policy == OnRedisError.ALLOW, r.allowed());
                Limiter explicit = down.limiter("down2", FIVE_A_MINUTE);
                assertTrue(explicit.acquire("u").fallback());
                assertTrue(explicit.acquireAsync("u").get().fallback());
            }
        }
        // under raise, a stored limiter made during an outage fails like any call
        RedisServer dying = RedisServer.start();
        try (RateLimitClient raise = RateLimitClient.connect(dying.url(),
                ClientOptions.defaults().timeout(Duration.ofMillis(200)))) {
            dying.close();
            RateLimitException e = assertThrows(RateLimitException.class, () -> raise.limiter("down"));
            assertTrue(e.status() == Status.CONNECTION || e.status() == Status.TIMEOUT, e.toString());
        }
    }

    @Test
    void storedSpecsServeBatchesAndAsyncCalls() throws Exception {
        client.configure("mixed", LimiterConfig.of(Algorithm.SLIDING_WINDOW, "3/day;2/day"));
        Limiter lim = client.limiter("mixed");
        CompletableFuture<Result> f = lim.acquireAsync("u", 2);
        assertTrue(f.get().allowed());
        Result r = client.execute(java.util.List.of(Request.acquire(lim, "u", 1))).get(0);
        assertFalse(r.allowed());
        assertEquals(1, r.rateIndex());
    }
}
