package io.ratelimit;

/** The C core's status codes ({@code rl_status}), one per failure kind. */
public enum Status {
    INVALID(-1),
    CONNECTION(-2),
    TIMEOUT(-3),
    PROTOCOL(-4),
    REDIS(-5),
    NOMEM(-6),
    CLOSED(-7),
    CANCELLED(-8),
    /** Not sent: the server is behind ({@link BacklogException}). */
    BACKLOG(-9),
    /** Not a C code: a denial the caller asked to throw ({@link RateLimitExceededException}). */
    DENIED(1),
    /** Not a C code: a semaphore permit or lock not acquired in time ({@link AcquireTimeoutException}). */
    ACQUIRE_TIMEOUT(2),
    /** A code this binding does not know (a newer core). */
    UNKNOWN(Integer.MIN_VALUE);

    private final int code;

    Status(int code) {
        this.code = code;
    }

    /** The C value, e.g. -1 for {@code RL_ERR_INVALID}. */
    public int code() {
        return code;
    }

    public static Status fromCode(int code) {
        for (Status s : values()) {
            if (s.code == code) {
                return s;
            }
        }
        return UNKNOWN;
    }
}
