package io.ratelimit;

/** A bad argument; nothing was sent to Redis. */
public class InvalidArgumentException extends RateLimitException {
    private static final long serialVersionUID = 1L;

    public InvalidArgumentException(String message) {
        super(Status.INVALID, message);
    }
}
