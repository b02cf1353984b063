package io.ratelimit;

/** What a rate-limit decision does when Redis cannot be reached ({@code rl_on_error}). */
public enum OnRedisError {
    /** Throw {@link ConnectionException} / {@link TimeoutException}. */
    RAISE,
    /** Fail open: allowed, with {@link Result#fallback()} set. */
    ALLOW,
    /** Fail closed: denied, with {@link Result#fallback()} set. */
    DENY;

    /** The C value (RL_ON_ERROR_RAISE = 0, ALLOW = 1, DENY = 2). */
    int code() {
        return ordinal();
    }
}
