package io.ratelimit.spring;

import io.ratelimit.RateLimitClient;
import org.springframework.boot.actuate.health.AbstractHealthIndicator;
import org.springframework.boot.actuate.health.Health;

/**
 * Actuator health ({@code /actuator/health/rateLimit}) on Spring Boot 3: UP
 * when Redis answers, DOWN with the error when it does not
 * ({@link RateLimitHealthProbe}). Servlet and non-web applications; WebFlux
 * ones get {@link ReactiveRateLimitHealthIndicator}. Spring Boot 4's twin is
 * {@link io.ratelimit.spring.boot4.RateLimitHealthIndicator}.
 */
public class RateLimitHealthIndicator extends AbstractHealthIndicator {
    private final RateLimitHealthProbe probe;

    public RateLimitHealthIndicator(RateLimitClient client) {
        super("Rate limiting health check failed");
        this.probe = new RateLimitHealthProbe(client);
    }

    @Override
    protected void doHealthCheck(Health.Builder builder) {
        probe.check().ifPresentOrElse(error -> builder.down().withDetail("error", error), builder::up);
    }
}
