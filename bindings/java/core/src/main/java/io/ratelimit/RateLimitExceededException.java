package io.ratelimit;

import java.time.Duration;

/** Thrown only where the caller asked to throw on denial (e.g. {@link Limiter#acquireOrThrow}). */
public class RateLimitExceededException extends NotAcquiredException {
    private static final long serialVersionUID = 1L;
    private final transient Result result;
    private final Duration retryAfter;

    public RateLimitExceededException(String message, Duration retryAfter, Result result) {
        super(Status.DENIED, message);
        this.retryAfter = retryAfter;
        this.result = result;
    }

    /** When the request could pass. */
    public Duration retryAfter() {
        return retryAfter;
    }

    /** The denied decision, or null when there was none (e.g. a refused reservation). */
    public Result result() {
        return result;
    }
}
