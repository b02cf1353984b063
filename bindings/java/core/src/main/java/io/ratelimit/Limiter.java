package io.ratelimit;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.function.Function;

/**
 * A named rate limit; each id (user, IP...) has its own state in Redis.
 * Immutable and thread-safe; cheap to create (a check against the spec
 * stored for its name, cached per client: see {@link RateLimitClient#limiter(String, LimiterConfig)}).
 *
 * <p>It enforces a {@link LimiterConfig} (one or more rates, all or nothing),
 * or, made by {@link RateLimitClient#limiter(String)}, the spec stored in
 * Redis for its name ({@link RateLimitClient#configure}), read again at most
 * every {@link ClientOptions#configRefresh} so a change reaches every client.
 *
 * <h2>Leases</h2>
 * With {@link LimiterConfig#lease} acquires decide from this client's memory
 * most of the time ({@link Result#isLocal()}); {@link #close()} gives the
 * unused permits of this name back at once, and so does
 * {@link RateLimitClient#close()} for every name. The limiter stays usable
 * after {@code close()}: later acquires take new blocks.
 *
 * <h2>Asynchronous decisions</h2>
 * {@link #acquireAsync(String, long)}, {@link #peekAsync(String, long)},
 * {@link #reserveAsync(String, long, Duration)},
 * {@link #acquireOrThrowAsync(String, long)} and
 * {@link #tryAcquireAsync(String, long, Duration)} give the same answers as their
 * blocking twins without blocking the caller: the decision goes to the
 * client's I/O thread (one per client, named {@code ratelimit-io-N}, started
 * by the first asynchronous call), which sends the requests of all callers
 * together (automatic pipelining, one connection per server) and completes
 * each future when its reply comes.
 * <ul>
 * <li>They never throw: everything the blocking call would throw (the same
 * exception class with the same message: {@link InvalidArgumentException},
 * {@link ConnectionException}, {@link TimeoutException},
 * {@link RateLimitException} with {@link Status#CLOSED}...) completes the
 * future exceptionally instead, and {@link OnRedisError#ALLOW} /
 * {@link OnRedisError#DENY} give the same fallback results.</li>
 * <li><b>Threading</b>: the future is completed on the I/O thread, so
 * dependent stages added without an executor ({@code thenApply},
 * {@code whenComplete}...) run on it, as Lettuce's do on its event loop
 * (or, the JDK's rule, on a thread that is waiting in {@code get()} or
 * {@code join()} on that very future as it completes).
 * Keep them short and never block in them (no {@code join()} or
 * {@code get()}, no blocking {@link #acquire} call, no I/O): while they run
 * no other completion of this client is delivered. Pass your own executor
 * ({@code thenApplyAsync(fn, executor)}) for anything longer. A decision
 * made from a lease in hand ({@link LimiterConfig#lease}) needs no round trip: its
 * future is complete when the call returns, so stages added to it run at
 * once on the calling thread; one that waited for a block another call was
 * fetching completes on that call's thread (the I/O thread, or a blocking
 * caller's, before its own call returns).</li>
 * <li>Cancelling the future only stops waiting for it: the request may still
 * be decided by Redis (its permits count).</li>
 * <li>{@link RateLimitClient#close()} completes every decision still in
 * flight exceptionally with {@link Status#CLOSED} before it returns.</li>
 * </ul>
 */
public final class Limiter implements AutoCloseable {
    private final RateLimitClient client;
    private final String name;
    private final byte[] nameBytes;
    /** null: the spec stored in Redis for the name. */
    private final LimiterConfig config;
    /** config.toNative(), or null for the stored spec. */
    private final long[] spec;
    /** rl_request.lease_ms of every request: 0 none. */
    private final long leaseMs;

    /** config null: the stored spec, without a lease. */
    Limiter(RateLimitClient client, String name, LimiterConfig config) {
        this(client, name, config, 0);
    }

    /**
     * config null: the stored spec, with leaseMs (0: none); else the config's
     * lease. The caller has checked both (RateLimitClient.limiter).
     */
    Limiter(RateLimitClient client, String name, LimiterConfig config, long leaseMs) {
        this.client = client;
        this.name = name;
        this.nameBytes = Native.name("name", name);
        this.config = config;
        this.spec = config == null ? null : config.toNative();
        this.leaseMs = config == null ? leaseMs : config.leaseMs();
    }

    public Result acquire(String id) {
        return acquire(id, 1);
    }

    /** Takes {@code permits} if allowed; a denial is a result, not an exception. */
    public Result acquire(String id, long permits) {
        return decide(id, permits, Request.Op.ACQUIRE, 0);
    }

    /** Like {@link #acquire(String, long)} but throws {@link RateLimitExceededException} when denied. */
    public Result acquireOrThrow(String id, long permits) {
        return admittedOrThrow(id, acquire(id, permits));
    }

    private Result admittedOrThrow(String id, Result r) {
        if (!r.allowed()) {
            throw new RateLimitExceededException("rate limit '" + name + "' exceeded for '" + id + "'; retry after "
                    + r.retryAfter().toMillis() + " ms", r.retryAfter(), r);
        }
        return r;
    }

    /**
     * Acquires, sleeping between attempts, for up to {@code timeout}; returns
     * the last (denied) result if it runs out. If the thread is interrupted
     * the wait stops within ~100 ms with {@link CancelledException} and the
     * interrupt flag stays set.
     */
    public Result tryAcquire(String id, long permits, Duration timeout) {
        if (VirtualThreads.current()) {
            // the core's timed acquire on its I/O thread, parked on
            CompletableFuture<Result> f = tryAcquireAsync(id, permits, timeout);
            return VirtualThreads.awaitWait(f, () -> client.handle.withdraw(f));
        }
        byte[] idBytes = Native.name("id", id);
        long timeoutMs = Native.millis("timeout", timeout);
        ClientHandle h = client.handle;
        return client.call(ptr -> Native.acquireWait(ptr, h, nameBytes, idBytes, spec, permits, timeoutMs,
                leaseMs));
    }

    public Result peek(String id) {
        return peek(id, 1);
    }

    /** The answer acquire would give, consuming nothing. */
    public Result peek(String id, long permits) {
        return decide(id, permits, Request.Op.PEEK, 0);
    }

    /**
     * Takes as many of {@code permits} as are available now, at least 1 (the
     * core's acquire up to n: redis_rate's AllowAtMost, Bucket4j's
     * tryConsumeAsMuchAsPossible): {@link Result#granted()} says how many;
     * denied (granted 0) only when not even one is available. With several
     * rates, the most every rate admits.
     */
    public Result acquireAtMost(String id, long permits) {
        return decide(id, permits, Request.Op.ACQUIRE_AT_MOST, 0);
    }

    /**
     * Gives {@code permits} back to {@code id} (Bucket4j's addTokens), e.g.
     * for work that was admitted but not done; never above full capacity.
     * {@link Result#granted()} says how many were returned.
     */
    public Result refund(String id, long permits) {
        return decide(id, permits, Request.Op.REFUND, 0);
    }

    /** Deletes the state of {@code id} (every rate): it starts again as a new entity. */
    public void reset(String id) {
        byte[] idBytes = Native.name("id", id);
        if (VirtualThreads.current()) {
            resetParked(idBytes);
            return;
        }
        client.call(ptr -> {
            Native.reset(ptr, nameBytes, idBytes, spec);
            return null;
        });
    }

    /** {@link #reset} on a virtual thread: rl_submit_reset, parked on. */
    private void resetParked(byte[] idBytes) {
        long[] known = spec != null ? spec : cachedStoredSpec();
        if (known == null) {
            // rl_submit_reset would read the stored spec on this thread: a platform thread does
            client.callOffCarrier(ptr -> {
                Native.reset(ptr, nameBytes, idBytes, null);
                return null;
            });
            return;
        }
        VirtualThreads.await(client.submitOp(new AsyncOp<>(client, false, d -> null, d -> {}),
                (ptr, context, tag) -> Native.resetAsync(ptr, context, tag, nameBytes, idBytes, known)));
    }

    /** The stored spec when this client's copy is fresh (no round trip), else null. */
    private long[] cachedStoredSpec() {
        return client.call(ptr -> Native.configCached(ptr, nameBytes));
    }

    /**
     * One acquire per id, pipelined in a single round trip; results in the
     * same order. A request that fails throws as {@link RateLimitClient#execute}
     * does, carrying every request's outcome.
     */
    public List<Result> acquireMany(List<String> ids, long permits) {
        return client.execute(acquires(ids, permits));
    }

    /** {@link #acquireMany} with one {@link Outcome} per id (see {@link RateLimitClient#executeEach}). */
    public List<Outcome> acquireManyEach(List<String> ids, long permits) {
        return client.executeEach(acquires(ids, permits));
    }

    private List<Request> acquires(List<String> ids, long permits) {
        Native.notNull("ids", ids);
        List<Request> requests = new ArrayList<>(ids.size());
        for (String id : ids) {
            requests.add(Request.acquire(this, id, permits));
        }
        return requests;
    }

    /**
     * Books the next slot (token_bucket, leaky_bucket, gcra) and returns how
     * long to wait before acting (zero if now). Throws
     * {@link RateLimitExceededException} when the slot would be more than
     * {@code maxWait} away; nothing is booked then.
     */
    public Duration reserve(String id, long permits, Duration maxWait) {
        return bookedOrThrow(id, maxWait, decide(id, permits, Request.Op.RESERVE, Native.millis("maxWait", maxWait)));
    }

    private Duration bookedOrThrow(String id, Duration maxWait, Result r) {
        if (!r.allowed()) {
            throw new RateLimitExceededException("rate limit '" + name + "': no slot for '" + id + "' within "
                    + maxWait.toMillis() + " ms", r.retryAfter(), r);
        }
        return r.waitTime();
    }

    // ---- asynchronous decisions (see the class comment) ----------------------------

    /** {@link #acquireAsync(String, long)} of one permit. */
    public CompletableFuture<Result> acquireAsync(String id) {
        return acquireAsync(id, 1);
    }

    /**
     * {@link #acquire(String, long)} without blocking: the future completes on
     * the client's I/O thread with the decision (a denial is a result), or
     * exceptionally with what {@code acquire} would throw.
     */
    public CompletableFuture<Result> acquireAsync(String id, long permits) {
        return submit(id, permits, Request.Op.ACQUIRE, null, 0, 0);
    }

    /**
     * {@link #acquireOrThrow(String, long)} without blocking: a denial
     * completes the future exceptionally with {@link RateLimitExceededException}.
     */
    public CompletableFuture<Result> acquireOrThrowAsync(String id, long permits) {
        return then(acquireAsync(id, permits), r -> admittedOrThrow(id, r));
    }

    /**
     * {@link #tryAcquire(String, long, Duration)} without blocking: acquires,
     * trying again after each denial's retry-after (on the I/O thread's
     * timer, the core's rl_submit_acquire_wait: no thread is held while
     * waiting), never past {@code timeout}; completes with the last denied
     * result if it runs out, or at once when the next chance is past the
     * deadline. Cancelling the future stops the retries; a close fails it with
     * {@link Status#CLOSED}.
     */
    public CompletableFuture<Result> tryAcquireAsync(String id, long permits, Duration timeout) {
        try {
            return submit(id, permits, Request.Op.ACQUIRE, null, 0, Native.millis("timeout", timeout));
        } catch (RateLimitException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    /** {@link #acquireAtMost(String, long)} without blocking (see {@link #acquireAsync(String, long)}). */
    public CompletableFuture<Result> acquireAtMostAsync(String id, long permits) {
        return submit(id, permits, Request.Op.ACQUIRE_AT_MOST, null, 0, 0);
    }

    /** {@link #refund(String, long)} without blocking (see {@link #acquireAsync(String, long)}). */
    public CompletableFuture<Result> refundAsync(String id, long permits) {
        return submit(id, permits, Request.Op.REFUND, null, 0, 0);
    }

    /** {@link #peekAsync(String, long)} of one permit. */
    public CompletableFuture<Result> peekAsync(String id) {
        return peekAsync(id, 1);
    }

    /** {@link #peek(String, long)} without blocking: the answer acquire would give, consuming nothing. */
    public CompletableFuture<Result> peekAsync(String id, long permits) {
        return submit(id, permits, Request.Op.PEEK, null, 0, 0);
    }

    /**
     * {@link #reserve(String, long, Duration)} without blocking: the future
     * gives how long to wait before acting, or fails with
     * {@link RateLimitExceededException} when no slot is free within
     * {@code maxWait} (nothing is booked then).
     */
    public CompletableFuture<Duration> reserveAsync(String id, long permits, Duration maxWait) {
        return then(submit(id, permits, Request.Op.RESERVE, maxWait, 0, 0), r -> bookedOrThrow(id, maxWait, r));
    }

    /**
     * A decision for the I/O thread (an acquire with {@code timeoutMs} other
     * than 0: a timed one); argument errors give a failed future, as the core's do.
     */
    private CompletableFuture<Result> submit(String id, long permits, Request.Op op, Duration maxWait, long nowMs,
            long timeoutMs) {
        long maxWaitMs;
        try {
            maxWaitMs = op == Request.Op.RESERVE ? Native.millis("maxWait", maxWait) : 0;
        } catch (RateLimitException e) {
            return CompletableFuture.failedFuture(e);
        }
        return submit(id, permits, op, maxWaitMs, nowMs, timeoutMs);
    }

    private CompletableFuture<Result> submit(String id, long permits, Request.Op op, long maxWaitMs, long nowMs,
            long timeoutMs) {
        ClientHandle.Decision d = new ClientHandle.Decision();
        try {
            d.id = Native.name("id", id);
        } catch (RateLimitException e) {
            return CompletableFuture.failedFuture(e);
        }
        d.name = nameBytes;
        d.spec = spec;
        d.maxWaitMs = maxWaitMs;
        d.permits = permits;
        d.op = op.ordinal();
        d.nowMs = nowMs;
        d.leaseMs = leaseMs;
        d.timeoutMs = timeoutMs;
        if (spec == null && VirtualThreads.current()) {
            // rl_submit reads a stored spec it has no fresh copy of on the
            // submitting thread: with the fresh copy the request is the one it
            // would make; without, a platform thread submits (and reads)
            long[] cached;
            try {
                cached = cachedStoredSpec();
            } catch (RateLimitException e) {
                return CompletableFuture.failedFuture(e);
            }
            if (cached == null) {
                return VirtualThreads.offload(() -> client.submit(d));
            }
            d.spec = cached;
        }
        return client.submit(d);
    }

    /**
     * {@code fn} applied to the result; what it throws, and any failure of
     * {@code f}, completes the returned future exceptionally as it is (not
     * wrapped in a CompletionException as thenApply would).
     */
    private static <T> CompletableFuture<T> then(CompletableFuture<Result> f, Function<Result, T> fn) {
        CompletableFuture<T> out = new CompletableFuture<>();
        f.whenComplete((r, e) -> {
            if (e != null) {
                out.completeExceptionally(e);
                return;
            }
            T value;
            try {
                value = fn.apply(r);
            } catch (Throwable t) {
                out.completeExceptionally(t);
                return;
            }
            out.complete(value);
        });
        return out;
    }

    /**
     * The Redis key holding the state of {@code id} for the first rate (with
     * several rates, the others add ":2", ":3"...), as the core names it: a
     * per-client limiter's key names this client. For a stored spec, its
     * algorithm and scope are read from Redis.
     */
    public String key(String id) {
        byte[] idBytes = Native.name("id", id);
        LimiterConfig c = config != null ? config : client.storedConfig(name);
        int scope = c.isPerClient() ? 1 : 0; // the core's rl_scope
        return Native.string(client.call(ptr -> Native.key(ptr, nameBytes, idBytes, c.algorithm().code(), scope)));
    }

    private Result decide(String id, long permits, Request.Op op, long maxWaitMs) {
        return decide(id, permits, op, maxWaitMs, 0);
    }

    private Result decide(String id, long permits, Request.Op op, long maxWaitMs, long nowMs) {
        if (VirtualThreads.current()) {
            // one round trip through the I/O thread (pipelined with every other caller's), parked on
            return VirtualThreads.await(submit(id, permits, op, maxWaitMs, nowMs, 0));
        }
        byte[] idBytes = Native.name("id", id);
        return client.call(ptr -> Native.decide(ptr, nameBytes, idBytes, spec, permits, op.ordinal(), maxWaitMs,
                nowMs, leaseMs));
    }

    /**
     * Ends this client's leases on this limiter's name now (the core's
     * rl_leases_give_back): their unused permits go back to Redis, so other
     * clients can use them at once; one round trip per server, bounded by the
     * command timeout. While Redis is unreachable the give-back is dropped
     * (the permits stay counted until the block's validity ends: safe) and
     * this does not throw. Does nothing without a lease. The limiter stays usable
     * (later acquires take new blocks); limiters of the same name in this
     * client share the leases, so this ends theirs too. After the client
     * closed (which gave everything back) it does nothing.
     */
    @Override
    public void close() {
        if (leaseMs == 0 || client.isClosed()) {
            return;
        }
        try {
            client.callOffCarrier(ptr -> {
                Native.leasesGiveBack(ptr, nameBytes);
                return null;
            });
        } catch (ClientClosedException e) {
            // closed meanwhile: rl_client_close gave every lease back
        }
    }

    /**
     * <b>For tests and conformance runs only.</b> A view of this limiter whose
     * decisions use {@code nowMs} (Unix epoch milliseconds) as the current
     * time instead of the Redis server's clock (the core's
     * {@code rl_request.now_ms}). {@code 0} means the Redis clock, as usual;
     * the core rejects negative or out-of-range values with
     * {@link InvalidArgumentException} when a decision is made. Production
     * code should never need it: mixing clocks on one key gives meaningless
     * answers.
     */
    public AtTime at(long nowMs) {
        return new AtTime(nowMs);
    }

    /**
     * This limiter at a fixed, explicit time; see {@link Limiter#at(long)}.
     * For tests and conformance runs only. Immutable and thread-safe.
     */
    public final class AtTime {
        private final long nowMs;

        private AtTime(long nowMs) {
            this.nowMs = nowMs;
        }

        /** {@link Limiter#acquire(String, long)} at {@link #nowMs()}. */
        public Result acquire(String id, long permits) {
            return decide(id, permits, Request.Op.ACQUIRE, 0, nowMs);
        }

        /** {@link Limiter#peek(String, long)} at {@link #nowMs()}. */
        public Result peek(String id, long permits) {
            return decide(id, permits, Request.Op.PEEK, 0, nowMs);
        }

        /**
         * A reservation at {@link #nowMs()}. Unlike {@link Limiter#reserve} it
         * returns the raw decision and does not throw when no slot is free
         * within {@code maxWait} ({@code allowed() == false} then).
         */
        public Result reserve(String id, long permits, Duration maxWait) {
            return decide(id, permits, Request.Op.RESERVE, Native.millis("maxWait", maxWait), nowMs);
        }

        /** {@link Limiter#acquireAtMost(String, long)} at {@link #nowMs()}. */
        public Result acquireAtMost(String id, long permits) {
            return decide(id, permits, Request.Op.ACQUIRE_AT_MOST, 0, nowMs);
        }

        /** {@link Limiter#refund(String, long)} at {@link #nowMs()}. */
        public Result refund(String id, long permits) {
            return decide(id, permits, Request.Op.REFUND, 0, nowMs);
        }

        /** {@link #acquire(String, long)} without blocking; see {@link Limiter#acquireAsync(String, long)}. */
        public CompletableFuture<Result> acquireAsync(String id, long permits) {
            return submit(id, permits, Request.Op.ACQUIRE, null, nowMs, 0);
        }

        /** {@link #peek(String, long)} without blocking. */
        public CompletableFuture<Result> peekAsync(String id, long permits) {
            return submit(id, permits, Request.Op.PEEK, null, nowMs, 0);
        }

        /**
         * {@link #reserve(String, long, Duration)} without blocking: the raw
         * decision ({@code allowed() == false} when no slot is free within
         * {@code maxWait}), no exception for a denial.
         */
        public CompletableFuture<Result> reserveAsync(String id, long permits, Duration maxWait) {
            return submit(id, permits, Request.Op.RESERVE, maxWait, nowMs, 0);
        }

        /** The explicit clock, epoch milliseconds (0 = the Redis clock). */
        public long nowMs() {
            return nowMs;
        }

        /** The limiter this is a view of. */
        public Limiter limiter() {
            return Limiter.this;
        }

        @Override
        public String toString() {
            return Limiter.this + " at " + nowMs + " ms";
        }
    }

    public String name() {
        return name;
    }

    /** The first rate; null for a limiter that uses the stored spec ({@link #isStored()}). */
    public Rate rate() {
        return config == null ? null : config.rates().get(0);
    }

    /** null for a limiter that uses the stored spec ({@link #isStored()}). */
    public Algorithm algorithm() {
        return config == null ? null : config.algorithm();
    }

    /** The lease of its decisions ({@link LimiterConfig#lease}); empty when it asks Redis every time. */
    public Optional<Duration> lease() {
        return leaseMs == 0 ? Optional.empty() : Optional.of(Duration.ofMillis(leaseMs));
    }

    /** What this limiter enforces; empty when it uses the spec stored in Redis ({@link #isStored()}). */
    public Optional<LimiterConfig> config() {
        return Optional.ofNullable(config);
    }

    /**
     * True when made by {@link RateLimitClient#limiter(String)}: each decision
     * uses the spec stored in Redis for the name (read
     * {@link RateLimitClient#getConfig(String)} for it).
     */
    public boolean isStored() {
        return config == null;
    }

    /** The spec as Native takes it; null for the stored spec. */
    long[] spec() {
        return spec;
    }

    long leaseMs() {
        return leaseMs;
    }

    RateLimitClient client() {
        return client;
    }

    byte[] nameBytes() {
        return nameBytes;
    }

    @Override
    public String toString() {
        return "Limiter{" + name + ", " + (config != null ? config.toString()
                : "stored spec" + (leaseMs == 0 ? "" : " lease " + leaseMs + "ms")) + "}";
    }
}
