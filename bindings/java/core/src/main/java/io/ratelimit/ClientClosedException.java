package io.ratelimit;

/** The client was closed before or while the call ran. */
public class ClientClosedException extends RedisFailureException {
    private static final long serialVersionUID = 1L;

    public ClientClosedException(String message, Throwable cause) {
        super(Status.CLOSED, message, cause);
    }
}
