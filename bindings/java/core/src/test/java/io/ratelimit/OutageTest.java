package io.ratelimit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Booting while Redis is down: with ALLOW / DENY a client opens anyway and
 * decisions follow the policy, failing fast between reconnect attempts; with
 * RAISE opening fails.
 */
class OutageTest {

    /** A client of a loopback port nothing listens on. */
    private static RateLimitClient deadClient(OnRedisError policy) throws Exception {
        return RateLimitClient.connect("redis://127.0.0.1:" + RedisServer.freePort(),
                ClientOptions.defaults().onRedisError(policy));
    }

    @Test
    void allowOpensOnADeadPortAndFallsBackFast() throws Exception {
        try (RateLimitClient c = deadClient(OnRedisError.ALLOW)) {
            Limiter lim = c.limiter("outage", "5/minute", Algorithm.GCRA);
            long t0 = System.nanoTime();
            for (int i = 0; i < 10_000; i++) {
                Result r = lim.acquire("u");
                if (!r.allowed() || !r.fallback()) {
                    throw new AssertionError("call " + i + ": " + r);
                }
            }
            long ms = (System.nanoTime() - t0) / 1_000_000;
            assertTrue(ms < 1000, "10,000 fallback decisions took " + ms + " ms");
        }
    }

    @Test
    void denyOpensOnADeadPortAndDenies() throws Exception {
        try (RateLimitClient c = deadClient(OnRedisError.DENY)) {
            Limiter lim = c.limiter("outage", "5/minute", Algorithm.SLIDING_WINDOW);
            for (int i = 0; i < 1000; i++) {
                Result r = lim.acquire("u");
                assertTrue(!r.allowed() && r.fallback(), r.toString());
            }
            // batches too
            for (Result r : lim.acquireMany(List.of("a", "b", "c"), 1)) {
                assertTrue(!r.allowed() && r.fallback(), r.toString());
            }
            // the policy covers decisions only: primitives raise, fast
            long t0 = System.nanoTime();
            assertThrows(ConnectionException.class, () -> c.semaphore("s", 1, Duration.ofSeconds(1)).tryAcquire());
            assertTrue(System.nanoTime() - t0 < 1_500_000_000L);
        }
    }

    @Test
    void raiseFailsToOpenOnADeadPort() throws Exception {
        int port = RedisServer.freePort();
        ConnectionException e = assertThrows(ConnectionException.class, () -> RateLimitClient.connect(
                "redis://127.0.0.1:" + port, ClientOptions.defaults().onRedisError(OnRedisError.RAISE)));
        assertEquals(Status.CONNECTION, e.status());
        assertTrue(e.getMessage().contains(String.valueOf(port)), e.getMessage());
        // RAISE is the default
        assertThrows(ConnectionException.class, () -> RateLimitClient.connect("redis://127.0.0.1:" + port));
    }

    @ParameterizedTest
    @ValueSource(strings = {"redis+sentinel://127.0.0.1:%d,127.0.0.1:%d/mymaster", "redis+cluster://127.0.0.1:%d,127.0.0.1:%d"})
    void sentinelAndClusterBootDuringAnOutage(String form) throws Exception {
        String url = String.format(form, RedisServer.freePort(), RedisServer.freePort());
        try (RateLimitClient c = RateLimitClient.connect(url,
                ClientOptions.defaults().onRedisError(OnRedisError.ALLOW))) {
            Result r = c.limiter("outage", "1/minute", Algorithm.FIXED_WINDOW).acquire("u");
            assertTrue(r.allowed() && r.fallback(), r.toString());
        }
        assertThrows(ConnectionException.class, () -> RateLimitClient.connect(url));
    }

    @Test
    void resumesOnceRedisComesUpWithinTheReconnectPause() throws Exception {
        int port = RedisServer.freePort();
        try (RateLimitClient c = RateLimitClient.connect("redis://127.0.0.1:" + port, ClientOptions.defaults()
                .onRedisError(OnRedisError.ALLOW).reconnectMax(Duration.ofMillis(100)))) {
            Limiter lim = c.limiter("outage", "100/minute", Algorithm.FIXED_WINDOW);
            // long enough in the outage for the backoff to reach its cap
            long until = System.nanoTime() + 600_000_000L;
            while (System.nanoTime() < until) {
                assertTrue(lim.acquire("u").fallback());
                Thread.sleep(5);
            }
            try (RedisServer redis = RedisServer.start(port)) {
                long up = System.nanoTime();
                Result r;
                do {
                    r = lim.acquire("u");
                    Thread.sleep(5);
                } while (r.fallback() && System.nanoTime() - up < 5_000_000_000L);
                long ms = (System.nanoTime() - up) / 1_000_000;
                assertFalse(r.fallback(), "still falling back " + ms + " ms after Redis came up");
                assertTrue(r.allowed());
                assertTrue(ms < 750, "took " + ms + " ms to resume with reconnectMax 100 ms");
                assertEquals(1, redis.dbsize());
            }
        }
    }
}
