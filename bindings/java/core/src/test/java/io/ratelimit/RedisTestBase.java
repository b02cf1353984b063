package io.ratelimit;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;

/** One redis-server per test class, emptied before each test; one shared client. */
abstract class RedisTestBase {
    static RedisServer redis;
    static RateLimitClient client;

    @BeforeAll
    static void startRedis() throws Exception {
        redis = RedisServer.start();
        client = RateLimitClient.connect(redis.url());
    }

    @AfterAll
    static void stopRedis() throws Exception {
        if (client != null) {
            client.close();
        }
        if (redis != null) {
            redis.close();
        }
    }

    @BeforeEach
    void flush() throws Exception {
        redis.flushAll();
    }
}
