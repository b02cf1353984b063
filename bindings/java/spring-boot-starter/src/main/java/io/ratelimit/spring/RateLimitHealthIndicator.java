package io.ratelimit.spring;

import io.ratelimit.Algorithm;
import io.ratelimit.Limiter;
import io.ratelimit.RateLimitClient;
import io.ratelimit.RateLimitException;
import io.ratelimit.Result;
import org.springframework.boot.actuate.health.AbstractHealthIndicator;
import org.springframework.boot.actuate.health.Health;

/**
 * Actuator health ({@code /actuator/health/rateLimit}): UP when Redis answers
 * a {@code peek} (which writes nothing), DOWN with the error when it does not:
 * under on-redis-error raise the exception is the detail; under allow / deny
 * an unreachable Redis gives a fallback result, not an exception, and is DOWN
 * too. Servlet and non-web applications; WebFlux ones get
 * {@link ReactiveRateLimitHealthIndicator}.
 */
public class RateLimitHealthIndicator extends AbstractHealthIndicator {
    /** A name no application limiter uses; peeking it creates no key. */
    static final String PROBE = "__ratelimit_health__";

    private final Limiter probe;

    public RateLimitHealthIndicator(RateLimitClient client) {
        super("Rate limiting health check failed");
        this.probe = probe(client);
    }

    static Limiter probe(RateLimitClient client) {
        return client.limiter(PROBE, "1/s", Algorithm.FIXED_WINDOW);
    }

    /** A failed peek (on-redis-error raise): DOWN with the error, without the stack trace Boot would log each time. */
    static Health down(Health.Builder builder, RateLimitException e) {
        return builder.down().withDetail("error", e.getClass().getName() + ": " + e.getMessage()).build();
    }

    static Health health(Health.Builder builder, Result peeked) {
        return peeked.fallback()
                ? builder.down().withDetail("error", "Redis unreachable: decisions follow on-redis-error").build()
                : builder.up().build();
    }

    @Override
    protected void doHealthCheck(Health.Builder builder) {
        try {
            health(builder, probe.peek("probe"));
        } catch (RateLimitException e) {
            down(builder, e);
        }
    }
}
