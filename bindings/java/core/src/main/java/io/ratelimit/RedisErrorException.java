package io.ratelimit;

/** Redis returned an error reply (a script error, ACL, OOM, a wrong password...). */
public class RedisErrorException extends RedisFailureException {
    private static final long serialVersionUID = 1L;

    public RedisErrorException(String message) {
        super(Status.REDIS, message);
    }
}
