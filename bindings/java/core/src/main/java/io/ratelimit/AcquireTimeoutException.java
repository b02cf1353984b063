package io.ratelimit;

/**
 * A semaphore permit or a lock was not acquired within the caller's timeout:
 * it stayed taken. Not a Redis timeout ({@link TimeoutException}): Redis
 * answered every attempt.
 */
public class AcquireTimeoutException extends NotAcquiredException {
    private static final long serialVersionUID = 1L;

    public AcquireTimeoutException(String message) {
        super(Status.ACQUIRE_TIMEOUT, message);
    }
}
