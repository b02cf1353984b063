package io.ratelimit;

/** A semaphore permit or a lock was not acquired within the caller's timeout. */
public class AcquireTimeoutException extends TimeoutException {
    private static final long serialVersionUID = 1L;

    public AcquireTimeoutException(String message) {
        super(message);
    }
}
