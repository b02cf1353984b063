package io.ratelimit.micrometer;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.FunctionTimer;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tag;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.binder.MeterBinder;
import io.ratelimit.LimiterStats;
import io.ratelimit.RateLimitClient;
import io.ratelimit.RateLimitException;
import java.math.BigDecimal;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

/**
 * Micrometer meters for the decisions of one {@link RateLimitClient}, read from
 * the core's own counters ({@link RateLimitClient#stats()}) when a registry
 * asks: nothing is added to a decision's path in Java. Per limiter name:
 *
 * <ul>
 *   <li>{@code ratelimit.decisions} (function counter), tags {@code limiter},
 *       {@code outcome} = allowed, denied, fallback (Redis unreachable, the
 *       {@code OnRedisError} policy decided) or error (the call threw);
 *   <li>{@code ratelimit.local.decisions} (function counter), tags
 *       {@code limiter}, {@code outcome} = allowed or denied: the part of
 *       those decisions made from a lease without a round trip;
 *   <li>{@code ratelimit.lease.calls} (function counter), tag {@code limiter}:
 *       script calls that took a block of permits for a lease or gave one back;
 *   <li>{@code ratelimit.decision} (function timer): count and total latency;
 *   <li>{@code ratelimit.decision.latency} (function counters), tags
 *       {@code limiter}, {@code le} (seconds, "+Inf" last): the latency
 *       histogram, cumulative as Prometheus buckets are;
 * </ul>
 * and {@code ratelimit.limiters}, a gauge of the names counted. Names past the
 * core's limit (1024 per client) share {@code limiter=""}.
 *
 * <p>A name decided for the first time gets its meters at the next read of any
 * of these meters (a scrape, an Actuator request) or {@link #refresh()}. Reads
 * within 100 ms of each other share one snapshot. After the client closes, the
 * meters keep their last values.
 *
 * <p>The Spring Boot starter registers one automatically when Micrometer is on
 * the classpath; elsewhere: {@code new RateLimitMetrics(client).bindTo(registry)}.
 */
public final class RateLimitMetrics implements MeterBinder {
    private static final String[] OUTCOMES = {"allowed", "denied", "fallback", "error"};
    private static final long MAX_AGE_NANOS = TimeUnit.MILLISECONDS.toNanos(100);

    private final RateLimitClient client;
    private final Tags tags;
    private final List<MeterRegistry> registries = new CopyOnWriteArrayList<>();
    private final Set<String> named = ConcurrentHashMap.newKeySet();
    private volatile Map<String, LimiterStats> last = Map.of();
    private volatile long readAt = System.nanoTime() - 2 * MAX_AGE_NANOS;

    public RateLimitMetrics(RateLimitClient client) {
        this(client, Tags.empty());
    }

    /** tags: added to every meter (e.g. which client, when an application has several). */
    public RateLimitMetrics(RateLimitClient client, Iterable<Tag> tags) {
        if (client == null) {
            throw new NullPointerException("client");
        }
        this.client = client;
        this.tags = Tags.of(tags);
    }

    @Override
    public void bindTo(MeterRegistry registry) {
        // the meters' functions hold this binder (and so the client) strongly
        Gauge.builder("ratelimit.limiters", client, c -> snapshot().size())
                .tags(tags)
                .description("Limiter names with counted decisions")
                .strongReference(true)
                .register(registry);
        synchronized (this) {
            registries.add(registry);
            for (String name : named) {
                register(registry, name);
            }
        }
        refresh();
    }

    /** Reads the core's counters now and gives every new name its meters. */
    public Map<String, LimiterStats> refresh() {
        Map<String, LimiterStats> now;
        try {
            now = client.stats();
        } catch (RateLimitException closed) {
            return last;
        }
        last = now;
        readAt = System.nanoTime();
        for (String name : now.keySet()) {
            if (!named.contains(name)) {
                synchronized (this) {
                    if (named.add(name)) {
                        for (MeterRegistry registry : registries) {
                            register(registry, name);
                        }
                    }
                }
            }
        }
        return now;
    }

    private Map<String, LimiterStats> snapshot() {
        return System.nanoTime() - readAt > MAX_AGE_NANOS ? refresh() : last;
    }

    private LimiterStats stats(String name) {
        return snapshot().get(name);
    }

    private double outcome(String name, int outcome) {
        LimiterStats s = stats(name);
        if (s == null) {
            return 0;
        }
        switch (outcome) {
            case 0:
                return s.allowed();
            case 1:
                return s.denied();
            case 2:
                return s.fallback();
            case 3:
                return s.errors();
            case 4:
                return s.localAllowed();
            case 5:
                return s.localDenied();
            default:
                return s.leaseCalls();
        }
    }

    /** Decisions at most bucket's bound (cumulative). */
    private double atMost(String name, int bucket) {
        LimiterStats s = stats(name);
        if (s == null) {
            return 0;
        }
        long[] counts = s.latencyBucketCounts();
        long sum = 0;
        for (int i = 0; i <= bucket && i < counts.length; i++) {
            sum += counts[i];
        }
        return sum;
    }

    private void register(MeterRegistry registry, String name) {
        Tags limiter = tags.and("limiter", name);
        for (int o = 0; o < OUTCOMES.length; o++) {
            int outcome = o;
            FunctionCounter.builder("ratelimit.decisions", client, c -> outcome(name, outcome))
                    .tags(limiter.and("outcome", OUTCOMES[o]))
                    .description("Rate-limit decisions by outcome")
                    .register(registry);
        }
        for (int o = 0; o < 2; o++) {
            int outcome = 4 + o;
            FunctionCounter.builder("ratelimit.local.decisions", client, c -> outcome(name, outcome))
                    .tags(limiter.and("outcome", OUTCOMES[o]))
                    .description("Rate-limit decisions made from a lease, without a round trip")
                    .register(registry);
        }
        FunctionCounter.builder("ratelimit.lease.calls", client, c -> outcome(name, 6))
                .tags(limiter)
                .description("Script calls that took or gave back a lease's block of permits")
                .register(registry);
        FunctionTimer.builder("ratelimit.decision", client,
                        c -> { LimiterStats s = stats(name); return s == null ? 0 : s.total(); },
                        c -> { LimiterStats s = stats(name); return s == null ? 0 : s.latencySumMicros(); },
                        TimeUnit.MICROSECONDS)
                .tags(limiter)
                .description("Latency of rate-limit decisions")
                .register(registry);
        LimiterStats s = last.get(name);
        long[] bounds = s != null ? s.latencyBucketBoundsMicros() : new long[0];
        for (int b = 0; b <= bounds.length; b++) {
            int bucket = b;
            String le = b < bounds.length ? BigDecimal.valueOf(bounds[b], 6).stripTrailingZeros().toPlainString() : "+Inf";
            FunctionCounter.builder("ratelimit.decision.latency", client, c -> atMost(name, bucket))
                    .tags(limiter.and("le", le))
                    .description("Rate-limit decisions by latency (cumulative buckets, seconds)")
                    .register(registry);
        }
    }
}
