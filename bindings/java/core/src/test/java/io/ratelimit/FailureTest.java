package io.ratelimit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.net.ServerSocket;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** Redis going away, and the on-redis-error policies. Each test owns its server. */
class FailureTest {

    @Test
    void connectToADeadPortFails() throws Exception {
        int port;
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            port = s.getLocalPort();
        }
        ConnectionException e = assertThrows(ConnectionException.class,
                () -> RateLimitClient.connect("redis://127.0.0.1:" + port));
        assertEquals(Status.CONNECTION, e.status());
        assertTrue(e.getMessage().contains(String.valueOf(port)), e.getMessage());
    }

    @Test
    void policiesDecideWhenRedisIsGone() throws Exception {
        RedisServer redis = RedisServer.start();
        ClientOptions fast = ClientOptions.defaults().timeout(Duration.ofMillis(300));
        RateLimitClient raise = RateLimitClient.connect(redis.url(), fast.onRedisError(OnRedisError.RAISE));
        RateLimitClient allow = RateLimitClient.connect(redis.url(), fast.onRedisError(OnRedisError.ALLOW));
        RateLimitClient deny = RateLimitClient.connect(redis.url(), fast.onRedisError(OnRedisError.DENY));
        try {
            Rate rate = Rate.parse("5/minute");
            assertFalse(allow.limiter("f", rate, Algorithm.GCRA).acquire("u").fallback());
            redis.close();

            RateLimitException e = assertThrows(RateLimitException.class,
                    () -> raise.limiter("f", rate, Algorithm.GCRA).acquire("u"));
            assertTrue(e instanceof ConnectionException || e instanceof TimeoutException, e.toString());
            assertTrue(e instanceof RedisFailureException, e.toString());

            Result open = allow.limiter("f", rate, Algorithm.GCRA).acquire("u");
            assertTrue(open.allowed() && open.fallback(), open.toString());

            Result closed = deny.limiter("f", rate, Algorithm.SLIDING_WINDOW).acquire("u");
            assertTrue(!closed.allowed() && closed.fallback(), closed.toString());
            assertTrue(closed.retryAfter().toMillis() > 0);

            // the policy covers decisions only: primitives still raise
            assertThrows(RedisFailureException.class, () -> allow.semaphore("s", 1, Duration.ofSeconds(1)).tryAcquire());
            assertThrows(RedisFailureException.class, () -> deny.delayQueue("q").size());
        } finally {
            raise.close();
            allow.close();
            deny.close();
            redis.close();
        }
    }

    @Test
    void clientReconnectsAfterARestart() throws Exception {
        try (RedisServer first = RedisServer.start()) {
            RateLimitClient c = RateLimitClient.connect(first.url());
            Limiter lim = c.limiter("r", "10/minute", Algorithm.FIXED_WINDOW);
            assertTrue(lim.acquire("u").allowed());
            // kill the server under the pool: the next call must fail cleanly, not crash
            first.close();
            assertThrows(RateLimitException.class, () -> lim.acquire("u"));
            c.close();
        }
    }
}
