package io.ratelimit;

/**
 * Any failure reported by the library; {@link #status()} says which kind.
 * Being denied is not a failure: it is a {@link Result} with
 * {@code allowed() == false}, unless the caller asked for
 * {@link RateLimitExceededException}.
 */
public class RateLimitException extends RuntimeException {
    private static final long serialVersionUID = 1L;
    private final Status status;

    public RateLimitException(Status status, String message) {
        super(message);
        this.status = status;
    }

    public RateLimitException(Status status, String message, Throwable cause) {
        super(message, cause);
        this.status = status;
    }

    public Status status() {
        return status;
    }

    /** The exception type for a status, carrying the core's message. */
    static RateLimitException of(Status status, String message) {
        switch (status) {
            case INVALID:
                return new InvalidArgumentException(message);
            case CONNECTION:
                return new ConnectionException(message);
            case TIMEOUT:
                return new TimeoutException(message);
            case CANCELLED:
                return new CancelledException(message);
            default:
                return new RateLimitException(status, message);
        }
    }
}
