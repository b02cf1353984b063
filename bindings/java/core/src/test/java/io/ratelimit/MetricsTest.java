package io.ratelimit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.micrometer.core.instrument.FunctionTimer;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.ratelimit.micrometer.RateLimitMetrics;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** RateLimitClient.stats() and the Micrometer binder, against a real Redis. */
class MetricsTest extends RedisTestBase {

    private static void assertCounts(LimiterStats s, long allowed, long denied, long fallback, long errors) {
        assertNotNull(s);
        assertEquals(List.of(allowed, denied, fallback, errors), List.of(s.allowed(), s.denied(), s.fallback(), s.errors()),
                s.toString());
        long inBuckets = 0;
        for (long n : s.latencyBucketCounts()) {
            inBuckets += n;
        }
        assertEquals(s.total(), inBuckets);
    }

    @Test
    void countsAKnownSequence() throws Exception {
        try (RateLimitClient c = RateLimitClient.connect(redis.url())) {
            assertTrue(c.stats().isEmpty());
            Limiter lim = c.limiter("j-seq", Rate.parse("3/hour"), Algorithm.FIXED_WINDOW);
            for (int i = 0; i < 5; i++) {
                lim.acquire("u");
            }
            assertFalse(lim.peek("u").allowed()); // a decision too
            assertThrows(InvalidArgumentException.class, () -> lim.acquire("u", 0)); // never reaches Redis
            redis.command("RPUSH", lim.key("broken"), "x");
            assertThrows(RedisErrorException.class, () -> lim.acquire("broken")); // WRONGTYPE
            List<CompletableFuture<Result>> async = new ArrayList<>();
            Limiter other = c.limiter("j-async", Rate.parse("2/hour"), Algorithm.FIXED_WINDOW);
            for (int i = 0; i < 5; i++) {
                async.add(other.acquireAsync("u"));
            }
            CompletableFuture.allOf(async.toArray(new CompletableFuture[0])).get(30, TimeUnit.SECONDS);

            Map<String, LimiterStats> stats = c.stats();
            assertEquals(2, stats.size());
            LimiterStats s = stats.get("j-seq");
            assertCounts(s, 3, 3, 0, 1);
            assertTrue(s.latencySumMicros() > 0);
            assertEquals(s.latencyBucketBoundsMicros().length + 1, s.latencyBucketCounts().length);
            assertEquals(8, s.latencyBucketBoundsMicros()[0]);
            assertCounts(stats.get("j-async"), 2, 3, 0, 0);
        }
    }

    @Test
    void fallbackWhenRedisIsDown() throws Exception {
        String dead = "redis://127.0.0.1:" + RedisServer.freePort();
        ClientOptions options = ClientOptions.defaults().onRedisError(OnRedisError.DENY)
                .connectTimeout(Duration.ofMillis(200));
        try (RateLimitClient c = RateLimitClient.connect(dead, options)) {
            Limiter lim = c.limiter("j-down", Rate.parse("10/second"), Algorithm.GCRA);
            for (int i = 0; i < 3; i++) {
                assertTrue(lim.acquire("u").fallback());
            }
            assertCounts(c.stats().get("j-down"), 0, 0, 3, 0);
        }
    }

    @Test
    void closedClientThrows() {
        RateLimitClient c = RateLimitClient.connect(redis.url());
        c.close();
        assertThrows(RateLimitException.class, c::stats);
    }

    @Test
    void micrometerBinderShowsTheCoreCounters() throws Exception {
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        try (RateLimitClient c = RateLimitClient.connect(redis.url())) {
            Limiter lim = c.limiter("j-meter", Rate.parse("2/hour"), Algorithm.FIXED_WINDOW);
            lim.acquire("u");
            RateLimitMetrics metrics = new RateLimitMetrics(c);
            metrics.bindTo(registry);
            lim.acquire("u");
            lim.acquire("u");
            // a name first decided after binding gets its meters at the next read
            c.limiter("j-later", Rate.parse("1/hour"), Algorithm.GCRA).acquire("u");
            assertNull(registry.find("ratelimit.decisions").tag("limiter", "j-later").functionCounter());
            metrics.refresh();

            assertEquals(2.0, decisions(registry, "j-meter", "allowed"));
            assertEquals(1.0, decisions(registry, "j-meter", "denied"));
            assertEquals(0.0, decisions(registry, "j-meter", "fallback"));
            assertEquals(0.0, decisions(registry, "j-meter", "error"));
            assertEquals(1.0, decisions(registry, "j-later", "allowed"));
            assertEquals(2.0, registry.get("ratelimit.limiters").gauge().value());
            FunctionTimer timer = registry.get("ratelimit.decision").tag("limiter", "j-meter").functionTimer();
            assertEquals(3.0, timer.count());
            assertTrue(timer.totalTime(TimeUnit.MICROSECONDS) > 0);
            assertEquals(3.0, registry.get("ratelimit.decision.latency").tags("limiter", "j-meter", "le", "+Inf")
                    .functionCounter().count());
            // the histogram: every bound (8 us first), cumulative, all three at +Inf
            double previous = 0;
            var sorted = registry.get("ratelimit.decision.latency").tag("limiter", "j-meter").functionCounters()
                    .stream().sorted((a, b) -> Double.compare(le(a.getId().getTag("le")), le(b.getId().getTag("le"))))
                    .toList();
            assertEquals(22, sorted.size());
            assertEquals("0.000008", sorted.get(0).getId().getTag("le"));
            for (var counter : sorted) {
                assertTrue(counter.count() >= previous);
                previous = counter.count();
            }
            assertEquals(3.0, previous);
        }
        // closed: the meters keep their last values
        assertEquals(2.0, decisions(registry, "j-meter", "allowed"));
    }

    private static double le(String s) {
        return s.equals("+Inf") ? Double.POSITIVE_INFINITY : Double.parseDouble(s);
    }

    private static double decisions(SimpleMeterRegistry registry, String limiter, String outcome) {
        return registry.get("ratelimit.decisions").tags("limiter", limiter, "outcome", outcome).functionCounter().count();
    }
}
