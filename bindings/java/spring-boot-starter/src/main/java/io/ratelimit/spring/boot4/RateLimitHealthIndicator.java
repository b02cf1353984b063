package io.ratelimit.spring.boot4;

import io.ratelimit.RateLimitClient;
import io.ratelimit.spring.RateLimitHealthProbe;
import org.springframework.boot.health.contributor.AbstractHealthIndicator;
import org.springframework.boot.health.contributor.Health;

/**
 * Actuator health ({@code /actuator/health/rateLimit}) on Spring Boot 4: the
 * same probe and answers as Spring Boot 3's
 * {@link io.ratelimit.spring.RateLimitHealthIndicator}. Servlet and non-web
 * applications; WebFlux ones get {@link ReactiveRateLimitHealthIndicator}.
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
