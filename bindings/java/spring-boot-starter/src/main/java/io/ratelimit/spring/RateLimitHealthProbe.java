package io.ratelimit.spring;

import io.ratelimit.Algorithm;
import io.ratelimit.Limiter;
import io.ratelimit.RateLimitClient;
import io.ratelimit.RateLimitException;
import io.ratelimit.Result;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;

/**
 * What the {@code rateLimit} health contributor says, apart from any Spring
 * Boot type: Spring Boot 3 and 4 keep their health API in different packages
 * ({@code org.springframework.boot.actuate.health},
 * {@code org.springframework.boot.health.contributor}), so each line has its
 * own thin indicator over this one probe. Redis is healthy when it answers a
 * {@code peek} (which writes nothing); otherwise the error is the detail:
 * under on-redis-error raise the exception, under allow / deny the fallback
 * result an unreachable Redis gives.
 */
public final class RateLimitHealthProbe {
    /** A name no application limiter uses; peeking it creates no key. */
    static final String PROBE = "__ratelimit_health__";

    private final Limiter limiter;

    public RateLimitHealthProbe(RateLimitClient client) {
        this.limiter = client.limiter(PROBE, "1/s", Algorithm.FIXED_WINDOW);
    }

    /** Empty when Redis answered, else the {@code error} detail. Never throws a RateLimitException. */
    public Optional<String> check() {
        try {
            return errorOf(limiter.peek("probe"));
        } catch (RateLimitException e) {
            return Optional.of(describe(e));
        }
    }

    /** {@link #check()} on the core's asynchronous call: no thread waits for Redis. */
    public CompletableFuture<Optional<String>> checkAsync() {
        return limiter.peekAsync("probe").handle((peeked, failure) -> {
            Throwable cause = failure instanceof CompletionException && failure.getCause() != null
                    ? failure.getCause() : failure;
            if (cause == null) {
                return errorOf(peeked);
            }
            if (cause instanceof RateLimitException) {
                return Optional.of(describe((RateLimitException) cause));
            }
            // not Redis's failure: Boot reports it as it reports any failing indicator
            throw new CompletionException(cause);
        });
    }

    private static Optional<String> errorOf(Result peeked) {
        return peeked.fallback() ? Optional.of("Redis unreachable: decisions follow on-redis-error") : Optional.empty();
    }

    /** The class and message only: Boot would log the stack trace at every check. */
    private static String describe(RateLimitException e) {
        return e.getClass().getName() + ": " + e.getMessage();
    }
}
