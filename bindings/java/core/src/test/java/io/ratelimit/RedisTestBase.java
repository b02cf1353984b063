package io.ratelimit;

import java.io.IOException;
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

    /** EVALSHA and EVAL calls Redis has run so far (INFO commandstats). */
    static long scriptCalls() throws IOException {
        long calls = 0;
        for (String line : ((String) redis.command("INFO", "commandstats")).split("\r?\n")) {
            if (line.startsWith("cmdstat_evalsha:") || line.startsWith("cmdstat_eval:")) {
                int at = line.indexOf("calls=") + 6;
                calls += Long.parseLong(line.substring(at, line.indexOf(',', at)));
            }
        }
        return calls;
    }
}

