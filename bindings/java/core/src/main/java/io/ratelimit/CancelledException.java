package io.ratelimit;

/** A blocking wait stopped because the calling thread was interrupted. The thread keeps its interrupt flag. */
public class CancelledException extends RateLimitException {
    private static final long serialVersionUID = 1L;

    public CancelledException(String message) {
        super(Status.CANCELLED, message);
    }
}
