package io.ratelimit;

import java.time.Duration;
import java.util.Arrays;

/**
 * The decisions one client made under one limiter name, as the core counts
 * them (see {@link RateLimitClient#stats()}): each decision has exactly one
 * outcome, and its latency is in the histogram.
 */
public final class LimiterStats {
    private final String name;
    private final long allowed;
    private final long denied;
    private final long fallback;
    private final long errors;
    private final long localAllowed;
    private final long localDenied;
    private final long leaseCalls;
    private final long latencySumMicros;
    private final long[] boundsMicros;
    private final long[] bucketCounts;

    LimiterStats(String name, long[] counters, int offset, long[] boundsMicros) {
        this.name = name;
        this.allowed = counters[offset];
        this.denied = counters[offset + 1];
        this.fallback = counters[offset + 2];
        this.errors = counters[offset + 3];
        this.localAllowed = counters[offset + 4];
        this.localDenied = counters[offset + 5];
        this.leaseCalls = counters[offset + 6];
        this.latencySumMicros = counters[offset + 7];
        this.boundsMicros = boundsMicros;
        this.bucketCounts = Arrays.copyOfRange(counters, offset + 8, offset + 9 + boundsMicros.length);
    }

    /** The limiter name; {@code ""} for the names past the core's limit (1024 per client), counted together. */
    public String name() {
        return name;
    }

    /** Admitted: by Redis, or from a lease ({@link #localAllowed()} of them). */
    public long allowed() {
        return allowed;
    }

    /** Denied: by Redis, or from a lease or a remembered denial ({@link #localDenied()} of them). */
    public long denied() {
        return denied;
    }

    /** Of {@link #allowed()}: decided from a lease ({@link LimiterConfig#lease}) without a round trip. */
    public long localAllowed() {
        return localAllowed;
    }

    /** Of {@link #denied()}: decided from a lease or a remembered denial without a round trip. */
    public long localDenied() {
        return localDenied;
    }

    /** Script calls that took a block of permits for a lease or gave one back (not decisions themselves). */
    public long leaseCalls() {
        return leaseCalls;
    }

    /** Redis could not be reached and the client's {@link OnRedisError} policy decided. */
    public long fallback() {
        return fallback;
    }

    /** The call failed (threw, or its future failed); invalid arguments are not counted. */
    public long errors() {
        return errors;
    }

    /** All four outcomes. */
    public long total() {
        return allowed + denied + fallback + errors;
    }

    /** The latencies of all decisions added up. */
    public Duration latencySum() {
        return Duration.ofNanos(latencySumMicros * 1000);
    }

    /** The same in microseconds. */
    public long latencySumMicros() {
        return latencySumMicros;
    }

    /**
     * The histogram's upper bounds in microseconds (8, 16, 32 ... powers of
     * two); one fewer than {@link #latencyBucketCounts()}: the last bucket has
     * no bound.
     */
    public long[] latencyBucketBoundsMicros() {
        return boundsMicros.clone();
    }

    /**
     * Decisions per latency bucket, not cumulative: bucket i counts those
     * above bound i-1 and at most bound i; the last, those above every bound.
     */
    public long[] latencyBucketCounts() {
        return bucketCounts.clone();
    }

    @Override
    public String toString() {
        return "LimiterStats[" + name + ": allowed=" + allowed + ", denied=" + denied + ", fallback=" + fallback
                + ", errors=" + errors + ", localAllowed=" + localAllowed + ", localDenied=" + localDenied
                + ", leaseCalls=" + leaseCalls + ", latencySum=" + latencySumMicros + "us]";
    }
}
