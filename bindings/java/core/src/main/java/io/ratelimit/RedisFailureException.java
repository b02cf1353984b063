package io.ratelimit;

/**
 * The call got no answer it could use from Redis: it could not connect
 * ({@link ConnectionException}), ran past the command timeout
 * ({@link TimeoutException}), got a reply it cannot decode
 * ({@link ProtocolException}) or an error reply ({@link RedisErrorException}),
 * or the client was closed ({@link ClientClosedException}). Catch this for
 * "Redis failed"; a denial or a busy lock is a {@link NotAcquiredException}
 * instead, never one of these.
 */
public class RedisFailureException extends RateLimitException {
    private static final long serialVersionUID = 1L;

    public RedisFailureException(Status status, String message) {
        super(status, message);
    }

    public RedisFailureException(Status status, String message, Throwable cause) {
        super(status, message, cause);
    }
}
