package io.ratelimit.spring;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.ratelimit.Algorithm;
import io.ratelimit.RateLimitClient;
import io.ratelimit.RedisServer;
import io.ratelimit.Result;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/** The app boots while Redis is down when the policy is allow, and fails open. */
@SpringBootTest(classes = TestApp.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = {"ratelimit.on-redis-error=allow", "ratelimit.reconnect-max=200ms", "ratelimit.timeout=300ms"})
class OutageBootTest {

    @DynamicPropertySource
    static void deadRedis(DynamicPropertyRegistry registry) throws Exception {
        int port = RedisServer.freePort();
        registry.add("ratelimit.url", () -> "redis://127.0.0.1:" + port);
    }

    @LocalServerPort
    int port;

    @Autowired
    RateLimitClient client;

    @Test
    void startsAndFailsOpen() throws Exception {
        Result r = client.limiter("boot", "1/minute", Algorithm.GCRA).acquire("u");
        assertTrue(r.allowed() && r.fallback(), r.toString());
        HttpClient http = HttpClient.newHttpClient();
        for (int i = 0; i < 5; i++) {   // 3/minute when Redis answers: every request passes now
            HttpResponse<String> res = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/sms"))
                    .header("X-User", "alice").build(), HttpResponse.BodyHandlers.ofString());
            assertEquals(200, res.statusCode(), res.body());
        }
    }
}
