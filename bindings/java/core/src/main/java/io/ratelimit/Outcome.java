package io.ratelimit;

import java.util.Objects;

/**
 * One request's outcome in a batch ({@link RateLimitClient#executeEach},
 * {@link Limiter#acquireManyEach}): the decision Redis made for it (or the
 * {@link OnRedisError} policy's, {@link Result#fallback()}), or that request's
 * own error. What Redis decided for one request is reported whatever happens
 * to the others.
 */
public final class Outcome {
    private final Result result;
    private final RateLimitException error;

    private Outcome(Result result, RateLimitException error) {
        this.result = result;
        this.error = error;
    }

    static Outcome of(Result result) {
        return new Outcome(Objects.requireNonNull(result), null);
    }

    static Outcome failed(RateLimitException error) {
        return new Outcome(null, Objects.requireNonNull(error));
    }

    /** True when {@link #result()} holds the decision. */
    public boolean ok() {
        return result != null;
    }

    /** The decision, or null when the request failed. */
    public Result result() {
        return result;
    }

    /** The request's error, or null when it was decided. */
    public RateLimitException error() {
        return error;
    }

    /** The decision, or the request's error thrown. */
    public Result get() {
        if (error != null) {
            throw error;
        }
        return result;
    }

    @Override
    public String toString() {
        return ok() ? "Outcome[" + result + "]" : "Outcome[" + error + "]";
    }
}
