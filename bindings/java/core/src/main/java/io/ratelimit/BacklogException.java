package io.ratelimit;

/**
 * Not sent, so nothing consumed: the server is behind (its oldest owed reply
 * is older than the command timeout) and {@link ClientOptions#maxInFlight}
 * requests are in flight on its connection; or, blocking, a call is already in
 * flight to it. The {@link OnRedisError} policy decides a rate limit, as for a
 * timeout.
 */
public class BacklogException extends RedisFailureException {
    private static final long serialVersionUID = 1L;

    public BacklogException(String message) {
        super(Status.BACKLOG, message);
    }
}
