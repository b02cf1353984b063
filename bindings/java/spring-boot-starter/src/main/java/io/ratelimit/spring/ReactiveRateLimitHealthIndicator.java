package io.ratelimit.spring;

import io.ratelimit.RateLimitClient;
import org.springframework.boot.actuate.health.AbstractReactiveHealthIndicator;
import org.springframework.boot.actuate.health.Health;
import reactor.core.publisher.Mono;

/** {@link RateLimitHealthIndicator} for WebFlux on Spring Boot 3: the peek is the core's asynchronous call. */
public class ReactiveRateLimitHealthIndicator extends AbstractReactiveHealthIndicator {
    private final RateLimitHealthProbe probe;

    public ReactiveRateLimitHealthIndicator(RateLimitClient client) {
        super("Rate limiting health check failed");
        this.probe = new RateLimitHealthProbe(client);
    }

    @Override
    protected Mono<Health> doHealthCheck(Health.Builder builder) {
        return Mono.fromFuture(probe::checkAsync)
                .map(error -> error.map(e -> builder.down().withDetail("error", e)).orElseGet(builder::up).build());
    }
}
