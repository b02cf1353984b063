package io.ratelimit;

import java.time.Duration;
import java.util.Objects;

/**
 * A rate: {@code limit} permits per {@code period}, optionally with a burst
 * (token_bucket and gcra capacity; 0 = the limit). Checked by the core when
 * used, so an invalid rate fails the first call with InvalidArgumentException.
 */
public final class Rate {
    private final long limit;
    private final long periodMs;
    private final long burst;

    private Rate(long limit, long periodMs, long burst) {
        this.limit = limit;
        this.periodMs = periodMs;
        this.burst = burst;
    }

    /** "10/s", "100/minute", "5 per 30 seconds", "3/500ms" (the core's rl_parse_rate). */
    public static Rate parse(String text) {
        long[] parsed = Native.parseRate(Native.name("rate", text));
        return new Rate(parsed[0], parsed[1], 0);
    }

    /** {@code limit} permits per {@code period} (whole milliseconds, rounded up). */
    public static Rate of(long limit, Duration period) {
        return new Rate(limit, Native.millis("period", period), 0);
    }

    /** The same rate with a burst capacity (token_bucket and gcra only). */
    public Rate withBurst(long burst) {
        return new Rate(limit, periodMs, burst);
    }

    public long limit() {
        return limit;
    }

    public Duration period() {
        return Duration.ofMillis(periodMs);
    }

    long periodMs() {
        return periodMs;
    }

    /** 0 when unset (the capacity is then the limit). */
    public long burst() {
        return burst;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Rate && ((Rate) o).limit == limit && ((Rate) o).periodMs == periodMs
                && ((Rate) o).burst == burst;
    }

    @Override
    public int hashCode() {
        return Objects.hash(limit, periodMs, burst);
    }

    @Override
    public String toString() {
        return limit + "/" + periodMs + "ms" + (burst != 0 ? " burst " + burst : "");
    }
}
