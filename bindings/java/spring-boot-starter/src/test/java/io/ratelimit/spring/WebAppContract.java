package io.ratelimit.spring;

import static io.ratelimit.spring.Http.header;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.micrometer.core.instrument.MeterRegistry;
import io.ratelimit.LimiterStats;
import io.ratelimit.RateLimitClient;
import io.ratelimit.RedisServer;
import io.ratelimit.micrometer.RateLimitMetrics;
import java.net.http.HttpResponse;
import java.util.List;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.context.ApplicationContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * What a real app on a random port answers over HTTP, the same for Spring MVC
 * ({@link MvcAppTest}) and WebFlux ({@link WebFluxAppTest}): both apps serve
 * the same paths with the same annotations. One redis-server for the JVM;
 * each app has its own key prefix.
 */
abstract class WebAppContract {
    static RedisServer redis;

    @DynamicPropertySource
    static void redisUrl(DynamicPropertyRegistry registry) throws Exception {
        registry.add("ratelimit.url", sharedRedis()::url);
    }

    /** The JVM's redis-server for Spring tests, started on first use, stopped at exit. */
    static synchronized RedisServer sharedRedis() throws Exception {
        if (redis == null) {
            redis = RedisServer.start();
            RedisServer r = redis;
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                try {
                    r.close();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }));
        }
        return redis;
    }

    @Value("${local.server.port}")   // @LocalServerPort moved in Boot 4
    int port;

    @Autowired
    RateLimitClient client;

    @Autowired
    ApplicationContext context;

    @Autowired
    RateLimitMetrics metrics;

    @Autowired
    MeterRegistry meters;

    Http http;

    @BeforeEach
    void http() {
        http = new Http(port);
    }

    /** This app's key prefix. */
    abstract String prefix();

    private void assertKey(String key) throws Exception {
        List<String> keys = redis.keys();
        assertTrue(keys.contains(prefix() + ":" + key), key + " not in " + keys);
    }

    @Test
    void deniesWith429AndTheHeaders() throws Exception {
        for (int i = 0; i < 3; i++) {
            HttpResponse<String> ok = http.get("/sms", "X-User", "alice");
            assertEquals(200, ok.statusCode(), ok.body());
            assertEquals("sent for alice", ok.body());
            assertEquals("\"sms\";q=3;w=60", header(ok, "RateLimit-Policy"));
            long reset = Long.parseLong(header(ok, "RateLimit-Reset"));
            assertTrue(reset >= 1 && reset <= 60, "RateLimit-Reset " + reset);
            assertEquals("\"sms\";r=" + (2 - i) + ";t=" + reset, header(ok, "RateLimit"));
            assertEquals("3", header(ok, "RateLimit-Limit"));
            assertEquals(String.valueOf(2 - i), header(ok, "RateLimit-Remaining"));
            assertFalse(ok.headers().firstValue("Retry-After").isPresent());
        }
        HttpResponse<String> denied = http.get("/sms", "X-User", "alice");
        assertEquals(429, denied.statusCode());
        List<String> retryAfter = denied.headers().allValues("Retry-After");
        assertEquals(1, retryAfter.size(), retryAfter.toString());
        long seconds = Long.parseLong(retryAfter.get(0));
        assertTrue(seconds >= 1 && seconds <= 60, "Retry-After " + seconds);
        assertEquals("0", header(denied, "RateLimit-Remaining"));
        assertEquals("Too Many Requests", denied.body());
        assertTrue(header(denied, "Content-Type").startsWith("text/plain"));
        // the key is per user: bob is not affected
        assertEquals(200, http.get("/sms", "X-User", "bob").statusCode());
        // the keys are the core's, under the configured prefix
        assertKey("{sms:alice}:fixed_window");
    }

    @Test
    void keysFromPathVariablesAndRemoteAddress() throws Exception {
        assertEquals(200, http.get("/items/acme").statusCode());
        assertEquals(200, http.get("/items/acme").statusCode());
        assertEquals(429, http.get("/items/acme").statusCode());
        assertEquals(200, http.get("/items/globex").statusCode());
        assertKey("{" + apiClass() + ".items:acme}:gcra");

        assertEquals(200, http.get("/by-ip").statusCode());
        HttpResponse<String> denied = http.get("/by-ip");
        assertEquals(429, denied.statusCode());
        assertEquals(List.of("60"), denied.headers().allValues("Retry-After"));
        assertKey("{by-ip:127.0.0.1}:sliding_log");
    }

    /** The simple name of the class holding /items (the default limiter name is Class.method). */
    abstract String apiClass();

    /** The bean that applies @RateLimited on this stack. */
    abstract Class<?> webGuard();

    /** This stack's health contributor on this Boot line. */
    abstract Class<?> healthIndicator();

    /**
     * Every part of the starter is on, on the Boot line the build says: a
     * class that moved in a new line turns a conditional part off silently
     * (Boot 4's health API left /actuator/health/rateLimit a 404).
     */
    @Test
    void everyPartOfTheStarterIsOnForThisBootLine() {
        assertEquals(BootLine.expected(), BootLine.MAJOR, "the Spring Boot on the classpath");
        assertEquals(healthIndicator(), context.getBean("rateLimitHealthIndicator").getClass());
        assertEquals(1, context.getBeanNamesForType(RateLimitMetrics.class).length);
        assertEquals(1, context.getBeanNamesForType(webGuard()).length);
    }

    @Test
    void keyFromThePrincipal() throws Exception {
        for (int i = 0; i < 2; i++) {
            HttpResponse<String> ok = http.get("/me", "X-Login", "carol");
            assertEquals(200, ok.statusCode(), ok.body());
            assertEquals("hello carol", ok.body());
        }
        assertEquals(429, http.get("/me", "X-Login", "carol").statusCode());
        assertEquals(200, http.get("/me", "X-Login", "dave").statusCode());
        assertKey("{me:carol}:gcra");
        // no principal: one shared "anonymous" budget
        assertEquals(200, http.get("/me").statusCode());
        assertKey("{me:anonymous}:gcra");
    }

    @Test
    void classAnnotationCoversEveryHandlerAndAMethodsOwnWins() throws Exception {
        assertEquals(200, http.get("/reports/daily", "X-User", "erin").statusCode());
        assertEquals(200, http.get("/reports/weekly", "X-User", "erin").statusCode());
        assertEquals(429, http.get("/reports/daily", "X-User", "erin").statusCode());
        assertEquals(429, http.get("/reports/weekly", "X-User", "erin").statusCode());
        HttpResponse<String> export = http.get("/reports/export", "X-User", "erin");
        assertEquals(200, export.statusCode());
        assertEquals("\"export\";q=1;w=3600", header(export, "RateLimit-Policy"));
        assertEquals(429, http.get("/reports/export", "X-User", "erin").statusCode());
        assertKey("{reports:erin}:gcra");
        assertKey("{export:erin}:gcra");
    }

    @Test
    void policyIsTheRateAndLimitTheCapacity() throws Exception {
        HttpResponse<String> ok = http.get("/burst");
        assertEquals(200, ok.statusCode());
        assertEquals("\"burst\";q=2;w=60", header(ok, "RateLimit-Policy"));
        assertEquals("5", header(ok, "RateLimit-Limit"));
        assertEquals("4", header(ok, "RateLimit-Remaining"));
    }

    @Test
    void handlerErrorsReachTheApplicationsExceptionHandler() throws Exception {
        HttpResponse<String> res = http.get("/boom");
        assertEquals(418, res.statusCode());
        assertEquals("handled boom", res.body());
        assertEquals("\"boom\";q=100;w=60", header(res, "RateLimit-Policy"));
    }

    @Test
    void unannotatedHandlersAreNotLimited() throws Exception {
        for (int i = 0; i < 10; i++) {
            HttpResponse<String> res = http.get("/open");
            assertEquals(200, res.statusCode());
            assertFalse(res.headers().firstValue("RateLimit-Policy").isPresent(), res.headers().toString());
        }
    }

    @Test
    void healthIsUpWhileRedisAnswers() throws Exception {
        HttpResponse<String> res = http.get("/actuator/health/rateLimit");
        assertEquals(200, res.statusCode(), res.body());
        assertTrue(res.body().contains("\"status\":\"UP\""), res.body());
        assertFalse(redis.keys().stream().anyMatch(k -> k.contains("__ratelimit_health__")), "the probe writes nothing");
        HttpResponse<String> overall = http.get("/actuator/health");
        assertEquals(200, overall.statusCode(), overall.body());
        assertTrue(overall.body().contains("\"rateLimit\":{"), overall.body());
    }

    @Test
    void decisionsAreMetered() throws Exception {
        assertEquals(200, http.get("/reports/export", "X-User", "metered").statusCode());
        assertEquals(429, http.get("/reports/export", "X-User", "metered").statusCode());
        metrics.refresh();   // a name's meters appear at the next read
        for (String outcome : new String[] {"allowed", "denied"}) {
            double n = meters.get("ratelimit.decisions").tags("limiter", "export", "outcome", outcome)
                    .functionCounter().count();
            assertTrue(n >= 1, outcome + " " + n);
        }
    }

    @Test
    void aLeasedHotKeyAdmitsExactlyTheLimitMostlyFromMemory() throws Exception {
        int ok = 0;
        int denied = 0;
        for (int i = 0; i < 30; i++) {
            HttpResponse<String> r = http.get("/hot");
            if (r.statusCode() == 200) {
                ok++;
            } else {
                assertEquals(429, r.statusCode(), r.body());
                assertTrue(header(r, "Retry-After") != null, r.headers().toString());
                denied++;
            }
        }
        assertEquals(20, ok);
        assertEquals(10, denied);
        LimiterStats s = client.stats().get("hot");
        assertTrue(s.localAllowed() >= 5 && s.localDenied() >= 1, s.toString()); // a denial is remembered
    }

    @Test
    void clientBeanUsesTheProperties() {
        assertEquals(prefix(), client.prefix());
    }
}
