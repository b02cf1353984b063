package io.ratelimit.spring;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.ratelimit.spring.webflux.FluxApp;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.context.SpringBootTest;
import reactor.core.publisher.Mono;
import reactor.netty.resources.LoopResources;

/**
 * A real WebFlux app (Netty, one event-loop thread) on a random port, a real
 * Redis, driven over HTTP: the same contract as MVC, plus the threading.
 */
@SpringBootTest(classes = FluxApp.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = {"spring.main.web-application-type=reactive", "ratelimit.prefix=flux",
            "ratelimit.timeout=5s", "ratelimit.on-redis-error=raise", "ratelimit.limits.hot.lease=10s"})
class WebFluxAppTest extends WebAppContract {
    @Override
    String prefix() {
        return "flux";
    }

    @Override
    String apiClass() {
        return "FluxApi";
    }

    @Override
    Class<?> webGuard() {
        return RateLimitHandlerAdapter.class;
    }

    @Override
    Class<?> healthIndicator() {
        return BootLine.reactiveHealthIndicator();
    }

    @Test
    void handlersRunOffTheClientsIoThread() throws Exception {
        HttpResponse<String> res = http.get("/thread");
        assertEquals(200, res.statusCode());
        assertFalse(res.body().startsWith("ratelimit-io"), res.body());
        // its connection's event loop, as an unlimited handler's (WebFluxKeepAliveTest says why)
        assertTrue(res.body().startsWith("reactor-http"), res.body());
    }

    /** The health check goes on off the client's I/O thread too (Boot's code, its response). */
    @Test
    void healthChecksRunOffTheClientsIoThread() throws Exception {
        Object indicator = context.getBean(healthIndicator());
        for (int i = 0; i < 5; i++) {
            Mono<?> health = (Mono<?>) indicator.getClass().getMethod("health").invoke(indicator);
            String thread = health.map(h -> Thread.currentThread().getName()).block(Duration.ofSeconds(10));
            assertFalse(thread.startsWith("ratelimit-io"), thread);
        }
    }

    /**
     * While Redis is paused (CLIENT PAUSE), a limited request waits for its
     * decision; the only event-loop thread must still serve other requests.
     */
    @Test
    void aSlowRedisNeverBlocksTheEventLoop() throws Exception {
        // one event-loop thread (the POM sets it for the test JVM): a blocked one would stall every request
        assertEquals(1, LoopResources.DEFAULT_IO_WORKER_COUNT);
        assertEquals(200, http.get("/thread").statusCode());   // connected and warm
        Process pause = new ProcessBuilder("redis-cli", "-p", String.valueOf(redisPort()),
                "CLIENT", "PAUSE", "4000", "ALL").redirectErrorStream(true).start();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (answersPing()) {   // until the pause has started
            assertTrue(System.nanoTime() < deadline, "CLIENT PAUSE did not start");
            Thread.sleep(20);
        }
        CompletableFuture<HttpResponse<String>> limited = http.send("/thread");
        Thread.sleep(1000);   // it reached the app and waits for Redis (a blocking call would hold the loop now)
        HttpResponse<String> open = http.get("/open");
        assertEquals(200, open.statusCode());
        assertFalse(answersPing(), "Redis is paused no more: the open request waited for it (a blocked event loop)");
        assertFalse(limited.isDone(), "the limited request waits for Redis");
        assertEquals(200, limited.get(10, TimeUnit.SECONDS).statusCode());
        assertTrue(pause.waitFor(10, TimeUnit.SECONDS));
    }

    /** True when Redis answers PING within 200 ms. */
    private static boolean answersPing() throws Exception {
        try (Socket s = new Socket("127.0.0.1", redisPort())) {
            s.setSoTimeout(200);
            s.getOutputStream().write("PING\r\n".getBytes(StandardCharsets.US_ASCII));
            return s.getInputStream().read() == '+';
        } catch (SocketTimeoutException e) {
            return false;
        }
    }

    private static int redisPort() {
        return Integer.parseInt(redis.url().substring(redis.url().lastIndexOf(':') + 1));
    }
}
