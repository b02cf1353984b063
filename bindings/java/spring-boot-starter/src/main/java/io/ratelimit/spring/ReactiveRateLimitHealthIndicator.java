package io.ratelimit.spring;

import io.ratelimit.Limiter;
import io.ratelimit.RateLimitClient;
import io.ratelimit.RateLimitException;
import org.springframework.boot.actuate.health.AbstractReactiveHealthIndicator;
import org.springframework.boot.actuate.health.Health;
import reactor.core.publisher.Mono;

/** {@link RateLimitHealthIndicator} for WebFlux: the peek is the core's asynchronous call. */
public class ReactiveRateLimitHealthIndicator extends AbstractReactiveHealthIndicator {
    private final Limiter probe;

    public ReactiveRateLimitHealthIndicator(RateLimitClient client) {
        super("Rate limiting health check failed");
        this.probe = RateLimitHealthIndicator.probe(client);
    }

    @Override
    protected Mono<Health> doHealthCheck(Health.Builder builder) {
        return Mono.fromFuture(() -> probe.peekAsync("probe")).map(r -> RateLimitHealthIndicator.health(builder, r))
                .onErrorResume(RateLimitException.class, e -> Mono.just(RateLimitHealthIndicator.down(builder, e)));
    }
}
