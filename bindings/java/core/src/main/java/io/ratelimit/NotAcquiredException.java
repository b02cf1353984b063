package io.ratelimit;

/**
 * Redis answered, and the answer was no: a rate limit denied the request
 * ({@link RateLimitExceededException}, only where the caller asked to throw
 * on denial) or a semaphore permit or lock stayed taken for the whole wait
 * ({@link AcquireTimeoutException}). Never a Redis failure
 * ({@link RedisFailureException}).
 */
public class NotAcquiredException extends RateLimitException {
    private static final long serialVersionUID = 1L;

    public NotAcquiredException(Status status, String message) {
        super(status, message);
    }
}
