package io.ratelimit.spring;

import static io.ratelimit.spring.Http.header;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.ratelimit.RedisServer;
import java.net.http.HttpResponse;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * A Redis outage under on-redis-error=raise, over HTTP, for both stacks:
 * 503 (problem details here), one WARN per outage window and no stack trace,
 * health DOWN with the error; back to normal when Redis returns. Each app has
 * a Redis of its own, stopped and restarted on the same port.
 */
@ExtendWith(OutputCaptureExtension.class)
abstract class OutageContract {
    static RedisServer redis;
    static int redisPort;

    @DynamicPropertySource
    static void redisUrl(DynamicPropertyRegistry registry) throws Exception {
        redisPort = RedisServer.freePort();
        redis = RedisServer.start(redisPort);
        registry.add("ratelimit.url", redis::url);
    }

    @AfterAll
    static void stop() throws Exception {
        redis.close();
    }

    @Value("${local.server.port}")   // @LocalServerPort moved in Boot 4
    int port;

    private static final String WARNING = "Redis unreachable for rate limiting";

    @Test
    void outagesAnswer503WithOneWarningPerWindow(CapturedOutput output) throws Exception {
        Http http = new Http(port);
        HttpResponse<String> ok = http.get("/by-ip");
        assertEquals(200, ok.statusCode(), ok.body());
        HttpResponse<String> denied = http.get("/by-ip");
        assertEquals(429, denied.statusCode());
        assertEquals("application/problem+json", header(denied, "Content-Type"));
        assertProblem(denied.body(), 429, "Too Many Requests", "/by-ip");
        assertTrue(denied.body().contains("\"detail\":\"rate limit 'by-ip' exceeded; retry after 60 s\""),
                denied.body());

        for (int window = 1; window <= 2; window++) {
            redis.close();
            for (int i = 0; i < 5; i++) {
                HttpResponse<String> down = http.get("/sms", "X-User", "u" + i);
                assertEquals(503, down.statusCode(), down.body());
                assertEquals("application/problem+json", header(down, "Content-Type"));
                assertProblem(down.body(), 503, "Service Unavailable", "/sms");
            }
            HttpResponse<String> health = http.get("/actuator/health/rateLimit");
            assertEquals(503, health.statusCode(), health.body());
            assertTrue(health.body().contains("\"status\":\"DOWN\"") && health.body().contains("\"error\":\"io.ratelimit."),
                    health.body());
            // and the application's overall health with it (Boot 4's moved health API once left it UP)
            HttpResponse<String> overall = http.get("/actuator/health");
            assertEquals(503, overall.statusCode(), overall.body());
            assertTrue(overall.body().contains("\"rateLimit\":{"), overall.body());
            assertEquals(window, count(output.getOut() + output.getErr(), WARNING), output.toString());

            redis = RedisServer.start(redisPort);
            waitUntilAdmitted(http);
            assertEquals(200, http.get("/actuator/health/rateLimit").statusCode());
        }
        String warning = output.toString().lines().filter(l -> l.contains(WARNING)).findFirst().orElseThrow();
        assertTrue(warning.contains(" WARN ") && warning.contains("answering 503"), warning);
        assertTrue(!output.toString().contains("\tat io.ratelimit."), "no stack trace: " + output);
    }

    private static void waitUntilAdmitted(Http http) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        int status;
        while ((status = http.get("/sms", "X-User", "back").statusCode()) != 200) {
            assertTrue(System.nanoTime() < deadline, "still " + status + " after Redis came back");
            Thread.sleep(50);
        }
    }

    private static void assertProblem(String body, int status, String title, String instance) {
        assertTrue(body.startsWith("{\"type\":\"about:blank\",\"title\":\"" + title + "\",\"status\":" + status
                + ",\"detail\":\"") && body.endsWith(",\"instance\":\"" + instance + "\"}"), body);
    }

    private static int count(String text, String what) {
        Matcher m = Pattern.compile(Pattern.quote(what)).matcher(text);
        int n = 0;
        while (m.find()) {
            n++;
        }
        return n;
    }
}
