package io.ratelimit;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * What a limiter enforces (the core's {@code rl_spec}): an algorithm, one or
 * more rates held together (a call is admitted only if every rate admits it,
 * then each consumes: all or nothing), each with its own burst, the permits a
 * new entity starts with, and whether each client has its own quota. The same
 * value a {@link Limiter} is made from and a name's spec stored in Redis
 * ({@link RateLimitClient#configure}).
 *
 * <pre>{@code
 * LimiterConfig api = LimiterConfig.of(Algorithm.TOKEN_BUCKET, "10/second;1000/hour")
 *         .initialTokens(0)     // a new entity starts empty (Bucket4j's initial tokens)
 *         .perClient();         // one quota per client (ClientOptions.clientId)
 * }</pre>
 *
 * A {@link #lease} makes acquires take permits from Redis in blocks and
 * decide from this client's memory; it is this client's way of asking, not
 * part of the spec: {@link RateLimitClient#configure} does not store it.
 *
 * <p>Immutable and thread-safe; each step returns a copy, checked by the core
 * ({@link InvalidArgumentException} naming what is wrong). Equal when every
 * field is, as written (a burst of 0 and a burst equal to the limit mean the
 * same capacity but are not equal here; the core's stored-spec check treats
 * them as the same).
 */
public final class LimiterConfig {
    /** The core's RL_EMPTY: a new entity starts with no permits. */
    private static final long EMPTY = -1;
    private static final int SCOPE_OVERALL = 0;
    private static final int SCOPE_PER_CLIENT = 1;

    private final Algorithm algorithm;
    private final List<Rate> rates;
    /** The core's value: 0 full, EMPTY none, else that many. */
    private final long initialTokens;
    private final boolean perClient;
    /** rl_request.lease_ms: 0 none. */
    private final long leaseMs;
    /** {algorithm, initial_tokens, scope, limit, period_ms, burst, ...}: what Native takes. */
    private final long[] spec;

    private LimiterConfig(Algorithm algorithm, List<Rate> rates, long initialTokens, boolean perClient, long leaseMs) {
        this.algorithm = Native.notNull("algorithm", algorithm);
        Native.notNull("rates", rates);
        if (rates.isEmpty()) {
            throw new InvalidArgumentException("a limiter needs at least one rate");
        }
        List<Rate> copy = new ArrayList<>(rates.size());
        for (Rate r : rates) {
            copy.add(Native.notNull("rate", r));
        }
        this.rates = Collections.unmodifiableList(copy);
        this.initialTokens = initialTokens;
        this.perClient = perClient;
        this.leaseMs = leaseMs;
        this.spec = new long[3 + 3 * copy.size()];
        spec[0] = algorithm.code();
        spec[1] = initialTokens;
        spec[2] = perClient ? SCOPE_PER_CLIENT : SCOPE_OVERALL;
        for (int i = 0; i < copy.size(); i++) {
            spec[3 + 3 * i] = copy.get(i).limit();
            spec[4 + 3 * i] = copy.get(i).periodMs();
            spec[5 + 3 * i] = copy.get(i).burst();
        }
        Native.validateSpec(spec);
    }

    /** One or more rates ({@link Rate#withBurst} for a burst), enforced together. */
    public static LimiterConfig of(Algorithm algorithm, Rate... rates) {
        return of(algorithm, Arrays.asList(Native.notNull("rates", rates)));
    }

    /** One or more rates, enforced together; at most 8. */
    public static LimiterConfig of(Algorithm algorithm, List<Rate> rates) {
        return new LimiterConfig(algorithm, rates, 0, false, 0);
    }

    /** {@code "10/second;1000/hour"} ({@link Rate#parseAll}), enforced together. */
    public static LimiterConfig of(Algorithm algorithm, String rates) {
        return of(algorithm, Rate.parseAll(rates));
    }

    /**
     * The permits an entity Redis holds no state for (new, or expired once
     * full) starts with, as Bucket4j's initial tokens: {@code 0} starts it
     * empty; by default it starts full. token_bucket, gcra and leaky_bucket.
     */
    public LimiterConfig initialTokens(long tokens) {
        if (tokens < 0) {
            throw new InvalidArgumentException("initialTokens must be at least 0 (got " + tokens + ")");
        }
        return new LimiterConfig(algorithm, rates, tokens == 0 ? EMPTY : tokens, perClient, leaseMs);
    }

    /**
     * One quota per client instead of one shared by all: each
     * {@link RateLimitClient} (identified by {@link ClientOptions#clientId},
     * else a random id drawn when it opened) counts its own decisions.
     */
    public LimiterConfig perClient() {
        return new LimiterConfig(algorithm, rates, initialTokens, true, leaseMs);
    }

    /**
     * Hot keys: acquires ({@link Limiter#acquire}, {@link Limiter#acquireAtMost},
     * {@link Limiter#tryAcquire}, their asynchronous forms and batches) take
     * permits from Redis in blocks valid up to {@code validity}, and decide
     * from this client's memory until the block is used or its validity ends
     * ({@link Result#isLocal()}); unused permits go back to Redis when it ends,
     * on {@link Limiter#close()} and on {@link RateLimitClient#close()}. The
     * limit stays exact whatever mix of clients shares the key
     * (docs/semantics.md, "Leases"). Off by default. Whole milliseconds,
     * 1 ms to 1 hour (a fraction of a millisecond is dropped); anything else
     * throws {@link InvalidArgumentException}.
     */
    public LimiterConfig lease(Duration validity) {
        return new LimiterConfig(algorithm, rates, initialTokens, perClient, leaseMillis(validity));
    }

    /** A lease's validity as rl_request.lease_ms, checked as {@link #lease(Duration)} says. */
    static long leaseMillis(Duration validity) {
        Native.notNull("lease", validity);
        long ms;
        try {
            ms = validity.toMillis();
        } catch (ArithmeticException e) {
            ms = validity.isNegative() ? -1 : Long.MAX_VALUE;
        }
        if (validity.isNegative() || ms < 1 || ms > Native.MAX_LEASE_MS) {
            throw new InvalidArgumentException("lease must be between 1 ms and 1 hour (got " + validity + ")");
        }
        return ms;
    }

    /** The lease's validity ({@link #lease(Duration)}); empty when acquires ask Redis every time. */
    public Optional<Duration> lease() {
        return leaseMs == 0 ? Optional.empty() : Optional.of(Duration.ofMillis(leaseMs));
    }

    /** rl_request.lease_ms: 0 none. */
    long leaseMs() {
        return leaseMs;
    }

    public Algorithm algorithm() {
        return algorithm;
    }

    /** The rates, the first one first (a result's {@link Result#rateIndex()} counts from it). */
    public List<Rate> rates() {
        return rates;
    }

    /** The permits a new entity starts with; empty when it starts full (the default). */
    public OptionalLong initialTokens() {
        if (initialTokens == 0) {
            return OptionalLong.empty();
        }
        return OptionalLong.of(initialTokens == EMPTY ? 0 : initialTokens);
    }

    /** True when each client has its own quota ({@link #perClient()}). */
    public boolean isPerClient() {
        return perClient;
    }

    long[] toNative() {
        return spec;
    }

    /** A spec as the core gives it back (rl_config_get). */
    static LimiterConfig fromNative(long[] spec) {
        List<Rate> rates = new ArrayList<>();
        for (int i = 3; i + 2 < spec.length; i += 3) {
            rates.add(Rate.ofMillis(spec[i], spec[i + 1], spec[i + 2]));
        }
        return new LimiterConfig(Algorithm.values()[(int) spec[0]], rates, spec[1], spec[2] == SCOPE_PER_CLIENT, 0);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof LimiterConfig && Arrays.equals(((LimiterConfig) o).spec, spec)
                && ((LimiterConfig) o).leaseMs == leaseMs;
    }

    @Override
    public int hashCode() {
        return Arrays.hashCode(spec) * 31 + Long.hashCode(leaseMs);
    }

    /**
     * The core's form (rl_spec_format), e.g. {@code "token_bucket 10/second;1000/hour initial 0 per_client"},
     * then {@code " lease 50ms"} with a lease.
     */
    @Override
    public String toString() {
        return Native.specFormat(spec) + (leaseMs == 0 ? "" : " lease " + leaseMs + "ms");
    }
}
