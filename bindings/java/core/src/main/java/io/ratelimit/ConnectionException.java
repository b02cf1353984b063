package io.ratelimit;

/** Redis cannot be reached, or the connection broke. */
public class ConnectionException extends RedisFailureException {
    private static final long serialVersionUID = 1L;

    public ConnectionException(String message) {
        super(Status.CONNECTION, message);
    }
}
