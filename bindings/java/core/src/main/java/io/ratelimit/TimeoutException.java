package io.ratelimit;

/** A connect or command timeout (or, for {@link AcquireTimeoutException}, a wait that ran out). */
public class TimeoutException extends RateLimitException {
    private static final long serialVersionUID = 1L;

    public TimeoutException(String message) {
        super(Status.TIMEOUT, message);
    }
}
