package io.ratelimit;

import java.time.Duration;

/** One decision in a batch for {@link RateLimitClient#execute}. */
public final class Request {
    /** The core's rl_op; the order matches the C enum. */
    public enum Op {
        ACQUIRE,
        PEEK,
        RESERVE,
        /** {@link Limiter#acquireAtMost}: as many as available, 1..permits. */
        ACQUIRE_AT_MOST,
        /** {@link Limiter#refund}: permits given back. */
        REFUND
    }

    private final Limiter limiter;
    private final String id;
    private final long permits;
    private final Op op;
    private final long maxWaitMs;

    private Request(Limiter limiter, String id, long permits, Op op, long maxWaitMs) {
        this.limiter = Native.notNull("limiter", limiter);
        this.id = id;
        this.permits = permits;
        this.op = op;
        this.maxWaitMs = maxWaitMs;
    }

    public static Request acquire(Limiter limiter, String id, long permits) {
        return new Request(limiter, id, permits, Op.ACQUIRE, 0);
    }

    public static Request peek(Limiter limiter, String id, long permits) {
        return new Request(limiter, id, permits, Op.PEEK, 0);
    }

    public static Request acquireAtMost(Limiter limiter, String id, long permits) {
        return new Request(limiter, id, permits, Op.ACQUIRE_AT_MOST, 0);
    }

    public static Request refund(Limiter limiter, String id, long permits) {
        return new Request(limiter, id, permits, Op.REFUND, 0);
    }

    public static Request reserve(Limiter limiter, String id, long permits, Duration maxWait) {
        return new Request(limiter, id, permits, Op.RESERVE, Native.millis("maxWait", maxWait));
    }

    public Limiter limiter() {
        return limiter;
    }

    public String id() {
        return id;
    }

    public long permits() {
        return permits;
    }

    public Op op() {
        return op;
    }

    long maxWaitMs() {
        return maxWaitMs;
    }
}
