package io.ratelimit.spring;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.ratelimit.Algorithm;
import io.ratelimit.RateLimitClient;
import io.ratelimit.Result;
import io.ratelimit.spring.mvc.MvcApp;
import io.ratelimit.spring.test.WithoutRedis;
import java.net.http.HttpResponse;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;

/** {@link WithoutRedis}: the app boots with no Redis anywhere and fails open. */
@SpringBootTest(classes = MvcApp.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = "management.endpoint.health.show-details=always")
@WithoutRedis
class OutageBootTest {
    @Value("${local.server.port}")   // @LocalServerPort moved in Boot 4
    int port;

    @Autowired
    RateLimitClient client;

    @Test
    void startsAndFailsOpen() throws Exception {
        Result r = client.limiter("boot", "1/minute", Algorithm.GCRA).acquire("u");
        assertTrue(r.allowed() && r.fallback(), r.toString());
        Http http = new Http(port);
        for (int i = 0; i < 5; i++) {   // 3/minute when Redis answers: every request passes now
            HttpResponse<String> res = http.get("/sms", "X-User", "alice");
            assertEquals(200, res.statusCode(), res.body());
            assertFalse(res.headers().firstValue("RateLimit-Remaining").isPresent(), "the policy's numbers are no limit's");
        }
        HttpResponse<String> health = http.get("/actuator/health/rateLimit");
        assertEquals(503, health.statusCode(), health.body());
        assertTrue(health.body().contains("\"status\":\"DOWN\"") && health.body().contains("on-redis-error"),
                health.body());
    }
}
