package io.ratelimit;

/** Redis answered something the library cannot decode. */
public class ProtocolException extends RedisFailureException {
    private static final long serialVersionUID = 1L;

    public ProtocolException(String message) {
        super(Status.PROTOCOL, message);
    }
}
