package io.ratelimit;

import java.time.Duration;

/** One rate-limit decision (the core's rl_result). */
public final class Result {
    private final boolean allowed;
    private final long limit;
    private final long remaining;
    private final long retryAfterMs;
    private final long resetAfterMs;
    private final long waitMs;
    private final boolean fallback;
    private final long granted;
    private final int rateIndex;
    private final boolean local;

    // built by the JNI layer
    Result(boolean allowed, long limit, long remaining, long retryAfterMs, long resetAfterMs, long waitMs,
            boolean fallback, long granted, int rateIndex, boolean local) {
        this.allowed = allowed;
        this.limit = limit;
        this.remaining = remaining;
        this.retryAfterMs = retryAfterMs;
        this.resetAfterMs = resetAfterMs;
        this.waitMs = waitMs;
        this.fallback = fallback;
        this.granted = granted;
        this.rateIndex = rateIndex;
        this.local = local;
    }

    /** Admitted (or, for a reservation, booked). */
    public boolean allowed() {
        return allowed;
    }

    /** The most the limiter can hold. */
    public long limit() {
        return limit;
    }

    /** Permits still available right now. */
    public long remaining() {
        return remaining;
    }

    /** When a denied request could pass; zero when allowed. */
    public Duration retryAfter() {
        return Duration.ofMillis(Math.max(0, retryAfterMs));
    }

    /** Time until the limiter is back to full. */
    public Duration resetAfter() {
        return Duration.ofMillis(Math.max(0, resetAfterMs));
    }

    /** For a reservation: how long to wait before acting; else zero. */
    public Duration waitTime() {
        return Duration.ofMillis(Math.max(0, waitMs));
    }

    /** Redis was unreachable and the client's {@link OnRedisError} policy decided. */
    public boolean fallback() {
        return fallback;
    }

    /**
     * The permits this call consumed ({@link Limiter#acquireAtMost}: 1..permits;
     * an admitted acquire: all of them), gave back ({@link Limiter#refund}), or
     * would consume ({@link Limiter#peek}); 0 when denied.
     */
    public long granted() {
        return granted;
    }

    /**
     * Which of the limiter's rates binds, 0 for the first
     * ({@link LimiterConfig#rates()} order): when allowed, the one with the
     * least remaining; when denied, the one that denied (the longest retry-after).
     */
    public int rateIndex() {
        return rateIndex;
    }

    /**
     * Decided from this client's lease ({@link LimiterConfig#lease}), or a
     * denial it remembers, without a round trip to Redis. {@link #remaining()}
     * and {@link #resetAfter()} are then the client's best knowledge (what
     * Redis said when the block was taken, less what this client used since),
     * not Redis's current state.
     */
    public boolean isLocal() {
        return local;
    }

    // raw values of the core's rl_result (retry_after_ms is -1 when allowed),
    // for the conformance vectors
    long retryAfterMs() {
        return retryAfterMs;
    }

    long resetAfterMs() {
        return resetAfterMs;
    }

    long waitMs() {
        return waitMs;
    }

    @Override
    public String toString() {
        return "Result{allowed=" + allowed + ", limit=" + limit + ", remaining=" + remaining + ", retryAfterMs="
                + retryAfterMs + ", resetAfterMs=" + resetAfterMs + ", waitMs=" + waitMs
                + ", granted=" + granted + ", rateIndex=" + rateIndex + (fallback ? ", fallback" : "")
                + (local ? ", local" : "") + "}";
    }
}
