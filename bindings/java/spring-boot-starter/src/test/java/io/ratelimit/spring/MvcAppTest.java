package io.ratelimit.spring;

import io.ratelimit.RedisServer;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.ratelimit.RateLimitClient;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/** A real Spring Boot app on a random port, a real Redis, driven over HTTP. */
@SpringBootTest(classes = TestApp.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = {"ratelimit.prefix=webtest", "ratelimit.timeout=500ms", "ratelimit.on-redis-error=raise",
            "ratelimit.pool-size=4"})
class RateLimitedWebTest {
    static RedisServer redis;

    @DynamicPropertySource
    static void redisUrl(DynamicPropertyRegistry registry) throws Exception {
        if (redis == null) {
            redis = RedisServer.start();
        }
        registry.add("ratelimit.url", redis::url);
    }

    @AfterAll
    static void stop() throws Exception {
        if (redis != null) {
            redis.close();
        }
    }

    @LocalServerPort
    int port;

    @Autowired
    RateLimitClient client;

    private final HttpClient http = HttpClient.newHttpClient();

    private HttpResponse<String> get(String path, String user) throws Exception {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path));
        if (user != null) {
            b.header("X-User", user);
        }
        return http.send(b.build(), HttpResponse.BodyHandlers.ofString());
    }

    @Test
    void deniesWith429AndRetryAfter() throws Exception {
        for (int i = 0; i < 3; i++) {
            HttpResponse<String> ok = get("/sms", "alice");
            assertEquals(200, ok.statusCode(), ok.body());
            assertEquals("sent for alice", ok.body());
            assertEquals(String.valueOf(2 - i), ok.headers().firstValue("X-RateLimit-Remaining").orElseThrow());
        }
        HttpResponse<String> denied = get("/sms", "alice");
        assertEquals(429, denied.statusCode());
        long retryAfter = Long.parseLong(denied.headers().firstValue("Retry-After").orElseThrow());
        assertTrue(retryAfter >= 1 && retryAfter <= 60, "Retry-After " + retryAfter);
        // the key is per user: bob is not affected
        assertEquals(200, get("/sms", "bob").statusCode());
        // the keys are the core's, under the configured prefix
        assertTrue(redis.keys().contains("webtest:{sms:alice}:fixed_window"), redis.keys().toString());
    }

    @Test
    void keysFromPathVariablesAndRemoteAddress() throws Exception {
        assertEquals(200, get("/items/acme", null).statusCode());
        assertEquals(200, get("/items/acme", null).statusCode());
        assertEquals(429, get("/items/acme", null).statusCode());
        assertEquals(200, get("/items/globex", null).statusCode());
        assertTrue(redis.keys().contains("webtest:{Api.items:acme}:gcra"), redis.keys().toString());

        assertEquals(200, get("/by-ip", null).statusCode());
        HttpResponse<String> denied = get("/by-ip", null);
        assertEquals(429, denied.statusCode());
        assertEquals(List.of("60"), denied.headers().allValues("Retry-After"));
        assertTrue(redis.keys().contains("webtest:{by-ip:127.0.0.1}:sliding_log"), redis.keys().toString());
    }

    @Test
    void unannotatedHandlersAreNotLimited() throws Exception {
        for (int i = 0; i < 10; i++) {
            assertEquals(200, get("/open", null).statusCode());
        }
    }

    @Test
    void clientBeanUsesTheProperties() {
        assertEquals("webtest", client.prefix());
    }
}
