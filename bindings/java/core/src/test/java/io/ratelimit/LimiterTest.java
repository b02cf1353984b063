package io.ratelimit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

class LimiterTest extends RedisTestBase {

    @ParameterizedTest
    @EnumSource(Algorithm.class)
    void admitsTheLimitThenDenies(Algorithm algorithm) throws Exception {
        Limiter lim = client.limiter("api", Rate.parse("5/hour"), algorithm);
        for (int i = 0; i < 5; i++) {
            Result r = lim.acquire("user-1");
            assertTrue(r.allowed(), algorithm + " attempt " + i + ": " + r);
            assertEquals(5, r.limit());
            assertEquals(4 - i, r.remaining(), r.toString());
            assertEquals(Duration.ZERO, r.retryAfter());
            assertFalse(r.fallback());
        }
        Result denied = lim.acquire("user-1");
        assertFalse(denied.allowed(), denied.toString());
        assertEquals(0, denied.remaining());
        assertTrue(denied.retryAfter().compareTo(Duration.ZERO) > 0, denied.toString());
        // sliding_window may wait out the rest of this window and part of the next
        Duration longest = algorithm == Algorithm.SLIDING_WINDOW ? Duration.ofHours(2) : Duration.ofHours(1);
        assertTrue(denied.retryAfter().compareTo(longest) <= 0, denied.toString());
        assertTrue(denied.resetAfter().compareTo(Duration.ZERO) > 0, denied.toString());

        // another id has its own state; the key is the core's
        assertTrue(lim.acquire("user-2").allowed());
        String key = lim.key("user-1");
        assertEquals("rl:{api:user-1}:" + algorithm.wireName(), key);
        assertTrue(redis.keys().contains(key), redis.keys().toString());

        lim.reset("user-1");
        assertFalse(redis.keys().contains(key));
        assertTrue(lim.acquire("user-1").allowed());
    }

    @ParameterizedTest
    @EnumSource(Algorithm.class)
    void peekConsumesNothing(Algorithm algorithm) throws Exception {
        Limiter lim = client.limiter("peek", Rate.of(2, Duration.ofMinutes(10)), algorithm);
        for (int i = 0; i < 3; i++) {
            Result p = lim.peek("u");
            assertTrue(p.allowed());
            assertEquals(2, p.remaining());
        }
        assertEquals(0, redis.dbsize());
        assertTrue(lim.acquire("u", 2).allowed());
        Result p = lim.peek("u");
        assertFalse(p.allowed());
        assertTrue(p.retryAfter().toMillis() > 0);
    }

    @Test
    void acquireOrThrowCarriesRetryAfter() {
        Limiter lim = client.limiter("throw", "1/minute", Algorithm.GCRA);
        assertTrue(lim.acquireOrThrow("u", 1).allowed());
        RateLimitExceededException e = assertThrows(RateLimitExceededException.class,
                () -> lim.acquireOrThrow("u", 1));
        assertEquals(Status.DENIED, e.status());
        assertTrue(e.retryAfter().toMillis() > 50_000, e.retryAfter().toString());
        assertFalse(e.result().allowed());
    }

    @Test
    void burstLetsTokenBucketAndGcraTakeMoreAtOnce() {
        for (Algorithm a : new Algorithm[] {Algorithm.TOKEN_BUCKET, Algorithm.GCRA}) {
            Limiter lim = client.limiter("burst-" + a, Rate.of(1, Duration.ofMinutes(1)).withBurst(3), a);
            assertTrue(lim.acquire("u", 3).allowed(), a.toString());
            assertFalse(lim.acquire("u").allowed(), a.toString());
        }
    }

    @Test
    void acquireManyIsOneBatch() throws Exception {
        Limiter lim = client.limiter("many", "2/minute", Algorithm.SLIDING_LOG);
        List<Result> results = lim.acquireMany(List.of("a", "b", "a", "a"), 1);
        assertEquals(4, results.size());
        assertTrue(results.get(0).allowed());
        assertTrue(results.get(1).allowed());
        assertTrue(results.get(2).allowed());
        assertFalse(results.get(3).allowed());
        assertEquals(2, redis.dbsize());

        // mixed limiters and operations through the client
        Limiter other = client.limiter("other", "10/second", Algorithm.TOKEN_BUCKET);
        List<Result> mixed = client.execute(List.of(Request.peek(lim, "b", 1), Request.acquire(other, "x", 4),
                Request.reserve(other, "x", 6, Duration.ZERO)));
        assertEquals(1, mixed.get(0).remaining());
        assertEquals(6, mixed.get(1).remaining());
        assertTrue(mixed.get(2).allowed());
        assertTrue(client.execute(List.of()).isEmpty());
    }

    @Test
    void aBatchReportsEachOutcome() throws Exception {
        // victim's key holds another type: Redis refuses that request alone,
        // and what it decided for the others (consumed) is reported
        Limiter lim = client.limiter("each", "5/minute", Algorithm.FIXED_WINDOW);
        redis.command("LPUSH", lim.key("victim"), "x");
        List<Outcome> each = client.executeEach(List.of(Request.acquire(lim, "alice", 2),
                Request.acquire(lim, "victim", 1), Request.acquire(lim, "carol", 5)));
        assertTrue(each.get(0).ok());
        assertTrue(each.get(0).result().allowed());
        assertEquals(3, each.get(0).result().remaining());
        assertFalse(each.get(0).result().fallback());
        assertFalse(each.get(1).ok());
        assertTrue(each.get(1).error() instanceof RedisErrorException, each.get(1).toString());
        assertTrue(each.get(1).error().getMessage().contains("WRONGTYPE"));
        assertEquals(0, each.get(1).error().outcomes().size());
        assertThrows(RedisErrorException.class, () -> each.get(1).get());
        assertEquals(0, each.get(2).get().remaining());
        assertEquals("2", redis.command("HGET", lim.key("alice"), "count"));

        // execute / acquireMany: the first failure thrown, naming its request, with every outcome
        RedisErrorException e = assertThrows(RedisErrorException.class,
                () -> lim.acquireMany(List.of("alice", "victim", "dave"), 1));
        assertTrue(e.getMessage().startsWith("request 1: ") && e.getMessage().contains("WRONGTYPE"), e.getMessage());
        assertEquals(3, e.outcomes().size());
        assertEquals(2, e.outcomes().get(0).result().remaining());
        assertTrue(e.outcomes().get(1).error() instanceof RedisErrorException);
        assertTrue(e.outcomes().get(2).result().allowed());
        assertEquals("3", redis.command("HGET", lim.key("alice"), "count"));

        // the policy never decides for Redis's own errors
        try (RateLimitClient open = RateLimitClient.connect(redis.url(),
                ClientOptions.defaults().onRedisError(OnRedisError.ALLOW))) {
            List<Outcome> loose = open.limiter("each", "5/minute", Algorithm.FIXED_WINDOW)
                    .acquireManyEach(List.of("erin", "victim"), 1);
            assertTrue(loose.get(0).result().allowed() && !loose.get(0).result().fallback());
            assertTrue(loose.get(1).error() instanceof RedisErrorException);
        }
        // an invalid request: thrown, nothing sent
        InvalidArgumentException bad = assertThrows(InvalidArgumentException.class,
                () -> client.executeEach(List.of(Request.acquire(lim, "frank", 1), Request.acquire(lim, "gina", 0))));
        assertTrue(bad.getMessage().startsWith("request 1: "), bad.getMessage());
        assertEquals(0L, redis.command("EXISTS", lim.key("frank")));
        // all fine: the results, as always
        redis.command("DEL", lim.key("victim"));
        List<Outcome> fine = lim.acquireManyEach(List.of("victim", "frank"), 1);
        assertEquals(4, fine.get(0).get().remaining());
        assertEquals(4, fine.get(1).get().remaining());
        assertEquals(2, lim.acquireMany(List.of("victim", "frank"), 1).size());
    }

    @Test
    void reserveReturnsTheWaitAndRefusesPastMaxWait() {
        for (Algorithm a : new Algorithm[] {Algorithm.GCRA, Algorithm.TOKEN_BUCKET, Algorithm.LEAKY_BUCKET}) {
            Limiter lim = client.limiter("reserve-" + a, Rate.of(10, Duration.ofSeconds(1)), a);
            // gcra and token_bucket book past a full limiter; leaky_bucket queues
            // behind the water in a bucket that is not full (a full one refuses)
            int fill = a == Algorithm.LEAKY_BUCKET ? 5 : 10;
            for (int i = 0; i < fill; i++) {
                assertTrue(lim.acquire("u").allowed());
            }
            Duration wait = lim.reserve("u", 1, Duration.ofSeconds(5));
            assertTrue(wait.toMillis() > 0 && wait.toMillis() <= 1000, a + " waited " + wait);
            RateLimitExceededException e = assertThrows(RateLimitExceededException.class,
                    () -> lim.reserve("u", 1, Duration.ZERO), a.toString());
            assertTrue(e.retryAfter().toMillis() > 0, a + ": " + e.retryAfter());
        }
        Limiter fixed = client.limiter("reserve-fw", "10/second", Algorithm.FIXED_WINDOW);
        assertThrows(InvalidArgumentException.class, () -> fixed.reserve("u", 1, Duration.ofSeconds(1)));
    }

    @Test
    void tryAcquireWaitsForTheNextSlot() {
        Limiter lim = client.limiter("wait", Rate.of(1, Duration.ofMillis(300)), Algorithm.FIXED_WINDOW);
        assertTrue(lim.acquire("u").allowed());
        long start = System.nanoTime();
        Result r = lim.tryAcquire("u", 1, Duration.ofSeconds(3));
        long ms = (System.nanoTime() - start) / 1_000_000;
        assertTrue(r.allowed(), r.toString());
        assertTrue(ms >= 150 && ms < 2000, "waited " + ms + " ms");

        // a timeout shorter than the wait returns the denial without sleeping through it
        Limiter slow = client.limiter("wait-slow", "1/hour", Algorithm.GCRA);
        assertTrue(slow.acquire("u").allowed());
        start = System.nanoTime();
        Result denied = slow.tryAcquire("u", 1, Duration.ofMillis(500));
        assertFalse(denied.allowed());
        assertTrue((System.nanoTime() - start) / 1_000_000 < 400);
    }

    @Test
    void ratesParseThroughTheCore() {
        Rate r = Rate.parse("10/minute");
        assertEquals(10, r.limit());
        assertEquals(Duration.ofMinutes(1), r.period());
        assertEquals(Duration.ofSeconds(30), Rate.parse("5 per 30 seconds").period());
        assertEquals(Duration.ofMillis(500), Rate.parse("3/500ms").period());
        assertEquals(Rate.of(3, Duration.ofMillis(500)), Rate.parse("3/500ms"));
        InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> Rate.parse("10/fortnight"));
        assertTrue(e.getMessage().contains("fortnight"), e.getMessage());
        assertEquals(Status.INVALID, e.status());
    }

    @Test
    void algorithmNamesComeFromTheCore() {
        assertEquals("sliding_window", Algorithm.SLIDING_WINDOW.wireName());
        for (Algorithm a : Algorithm.values()) {
            assertEquals(a, Algorithm.fromName(a.wireName()));
        }
        assertThrows(InvalidArgumentException.class, () -> Algorithm.fromName("bogus"));
    }

    @Test
    void scriptsAreTheEmbeddedLuaFiles() throws Exception {
        List<String[]> scripts = RateLimitClient.scripts();
        // limit (every algorithm), config, semaphore, delay_queue
        assertEquals(4, scripts.size());
        java.nio.file.Path lua = java.nio.file.Paths.get("../../../lua").toAbsolutePath().normalize();
        for (String[] s : scripts) {
            java.nio.file.Path file = lua.resolve(s[0] + ".lua");
            assertTrue(java.nio.file.Files.exists(file), file.toString());
            // the text the build embeds: "--@include path" lines replaced by those files
            String text = java.nio.file.Files.readString(file);
            java.util.regex.Matcher m = java.util.regex.Pattern.compile("--@include (\\S+)\n").matcher(text);
            StringBuilder expanded = new StringBuilder();
            while (m.find()) {
                m.appendReplacement(expanded, java.util.regex.Matcher.quoteReplacement(
                        java.nio.file.Files.readString(lua.resolve(m.group(1)))));
            }
            m.appendTail(expanded);
            byte[] digest = java.security.MessageDigest.getInstance("SHA-1")
                    .digest(expanded.toString().getBytes(java.nio.charset.StandardCharsets.UTF_8));
            assertEquals(java.util.HexFormat.of().formatHex(digest), s[1], s[0]);
        }
        // and EVALSHA on them works: the script cache has what the core sent
        client.limiter("sha", "1/s", Algorithm.GCRA).acquire("u");
        String limit = scripts.stream().filter(s -> s[0].equals("limit")).findFirst().orElseThrow()[1];
        assertEquals(List.of(1L), redis.command("SCRIPT", "EXISTS", limit));
    }

    @Test
    void unicodeIdsAreUtf8Keys() throws Exception {
        Limiter lim = client.limiter("uni", "1/minute", Algorithm.FIXED_WINDOW);
        assertTrue(lim.acquire("用户-😀").allowed());
        assertEquals(List.of("rl:{uni:用户-😀}:fixed_window"), redis.keys());
        assertFalse(lim.acquire("用户-😀").allowed());
    }

    @Test
    void prefixOptionIsUsed() throws Exception {
        try (RateLimitClient c = RateLimitClient.connect(redis.url(),
                ClientOptions.defaults().prefix("myapp").timeout(Duration.ofMillis(500)).poolSize(2)
                        .onRedisError(OnRedisError.RAISE))) {
            assertEquals("myapp", c.prefix());
            c.limiter("p", "1/second", Algorithm.GCRA).acquire("u");
            assertEquals(List.of("myapp:{p:u}:gcra"), redis.keys());
        }
    }

    @Test
    void explicitClockForTests() {
        Limiter lim = client.limiter("clock", Rate.of(1, Duration.ofSeconds(1)), Algorithm.FIXED_WINDOW);
        long t = 1_700_000_000_000L;
        Result first = lim.at(t).acquire("u", 1);
        assertTrue(first.allowed(), first.toString());
        assertEquals(-1, first.retryAfterMs());
        Result denied = lim.at(t + 10).acquire("u", 1);
        assertFalse(denied.allowed(), denied.toString());
        assertEquals(990, denied.retryAfterMs(), denied.toString());
        assertFalse(lim.at(t + 999).peek("u", 1).allowed());
        assertTrue(lim.at(t + 1000).peek("u", 1).allowed());
        assertEquals(t, lim.at(t).nowMs());
        // the core validates the clock
        assertThrows(InvalidArgumentException.class, () -> lim.at(-1).acquire("u", 1));
        assertThrows(InvalidArgumentException.class, () -> lim.at(Long.MAX_VALUE).peek("u", 1));
        // a refused reservation is a result here, not an exception
        Limiter tb = client.limiter("clock", Rate.of(1, Duration.ofSeconds(1)), Algorithm.TOKEN_BUCKET);
        assertTrue(tb.at(t).reserve("u", 1, Duration.ZERO).allowed());
        Result r = tb.at(t).reserve("u", 1, Duration.ofMillis(100));
        assertFalse(r.allowed(), r.toString());
        Result booked = tb.at(t).reserve("u", 1, Duration.ofSeconds(2));
        assertTrue(booked.allowed(), booked.toString());
        assertEquals(1000, booked.waitMs(), booked.toString());
    }
}
