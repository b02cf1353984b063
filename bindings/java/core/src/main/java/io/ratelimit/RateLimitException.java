package io.ratelimit;

import java.util.List;

/**
 * The root of every exception the library throws; {@link #status()} says
 * which kind. Being denied is not a failure: it is a {@link Result} with
 * {@code allowed() == false}, unless the caller asked for
 * {@link RateLimitExceededException}. The tree (docs/errors.md):
 * <pre>
 * RateLimitException
 *   RedisFailureException      Redis failed: catch this for outages
 *     ConnectionException, TimeoutException (command), ProtocolException,
 *     RedisErrorException, ClientClosedException, BacklogException (not sent)
 *   NotAcquiredException       Redis answered no
 *     RateLimitExceededException, AcquireTimeoutException (busy lock / semaphore)
 *   InvalidArgumentException   nothing was sent
 *   CancelledException         the waiting thread was interrupted
 * </pre>
 */
public class RateLimitException extends RuntimeException {
    private static final long serialVersionUID = 1L;
    private final Status status;
    private transient List<Outcome> outcomes = List.of();

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

    /**
     * Thrown by a batch ({@link RateLimitClient#execute}, {@link Limiter#acquireMany}):
     * every request's outcome, in order, the decisions Redis made included;
     * else empty.
     */
    public List<Outcome> outcomes() {
        return outcomes == null ? List.of() : outcomes;
    }

    RateLimitException withOutcomes(List<Outcome> outcomes) {
        this.outcomes = List.copyOf(outcomes);
        return this;
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
            case PROTOCOL:
                return new ProtocolException(message);
            case REDIS:
                return new RedisErrorException(message);
            case CLOSED:
                return new ClientClosedException(message, null);
            case CANCELLED:
                return new CancelledException(message);
            case BACKLOG:
                return new BacklogException(message);
            default:
                return new RateLimitException(status, message);
        }
    }
}
