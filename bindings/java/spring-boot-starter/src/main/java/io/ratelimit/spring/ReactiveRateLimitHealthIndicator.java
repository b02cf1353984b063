package io.ratelimit.spring;

import io.ratelimit.RateLimitClient;
import org.springframework.boot.actuate.health.AbstractReactiveHealthIndicator;
import org.springframework.boot.actuate.health.Health;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/** {@link RateLimitHealthIndicator} for WebFlux on Spring Boot 3: the peek is the core's asynchronous call. */
public class ReactiveRateLimitHealthIndicator extends AbstractReactiveHealthIndicator {
    private final RateLimitHealthProbe probe;

    public ReactiveRateLimitHealthIndicator(RateLimitClient client) {
        super("Rate limiting health check failed");
        this.probe = new RateLimitHealthProbe(client);
    }

    @Override
    protected Mono<Health> doHealthCheck(Health.Builder builder) {
        // Boot's aggregation and the response never on the client's I/O
        // thread, which completes the peek; never answered within Netty's
        // dispatch either (RateLimitHandlerAdapter: a buffered request
        // answered at once stops Reactor Netty reading its connection)
        return Mono.fromFuture(probe::checkAsync)
                .publishOn(Schedulers.parallel())
                .map(error -> error.map(e -> builder.down().withDetail("error", e)).orElseGet(builder::up).build());
    }
}
