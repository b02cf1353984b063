package io.ratelimit;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
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

    /** "10/s", "100/minute", "5 per 30 seconds", "3/500ms" (the core's rl_rate_parse). */
    public static Rate parse(String text) {
        long[] parsed = Native.parseRate(Native.name("rate", text));
        return new Rate(parsed[0], parsed[1], 0);
    }

    /**
     * Several rates, {@code "10/second;1000/hour"} (';', ',' or '|' between
     * them, as the limits library writes them; the core's rl_rates_parse), at
     * most 8; for a limiter that enforces them all together
     * ({@link LimiterConfig}).
     */
    public static List<Rate> parseAll(String text) {
        long[] parsed = Native.parseRates(Native.name("rates", text));
        List<Rate> out = new ArrayList<>(parsed.length / 2);
        for (int i = 0; i + 1 < parsed.length; i += 2) {
            out.add(new Rate(parsed[i], parsed[i + 1], 0));
        }
        return Collections.unmodifiableList(out);
    }

    /** As the core has it (a stored spec read back). */
    static Rate ofMillis(long limit, long periodMs, long burst) {
        return new Rate(limit, periodMs, burst);
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
