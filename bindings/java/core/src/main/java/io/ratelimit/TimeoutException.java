package io.ratelimit;

/** A connect or command timeout: Redis did not answer in time. A busy lock or semaphore is {@link AcquireTimeoutException}. */
public class TimeoutException extends RedisFailureException {
    private static final long serialVersionUID = 1L;

    public TimeoutException(String message) {
        super(Status.TIMEOUT, message);
    }
}
