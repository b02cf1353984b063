package io.ratelimit;

import java.lang.ref.Cleaner;
import java.lang.ref.Reference;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;

/**
 * A connection pool to one Redis, shared by any number of threads. Close it
 * when done (a Cleaner frees it if it is forgotten). Closing while other
 * threads are calling is safe: waits stop, later calls throw a
 * {@link RateLimitException} with {@link Status#CLOSED}.
 */
public final class RateLimitClient implements AutoCloseable {
    private static final Cleaner CLEANER = Cleaner.create();

    final ClientHandle handle;
    private final String prefix;
    private final String clientId;

    private RateLimitClient(ClientHandle handle) {
        this.handle = handle;
        CLEANER.register(this, handle);
        this.prefix = handle.call(Native::prefix);
        this.clientId = handle.call(Native::clientId);
    }

    /** Connects with the core's default options. */
    public static RateLimitClient connect(String url) {
        return connect(url, ClientOptions.defaults());
    }

    /**
     * Opens a client for one of the URL forms every binding accepts:
     * <ul>
     * <li>{@code redis://[[user]:password@]host[:port][/db]}</li>
     * <li>{@code rediss://[[user]:password@]host[:port][/db][?ssl_cert_reqs=required|none&ssl_ca_certs=/ca.pem
     * &ssl_certfile=/c.pem&ssl_keyfile=/k.pem]} (TLS, when {@link #hasTls()})</li>
     * <li>{@code unix:///path.sock[?db=N]}</li>
     * <li>{@code redis+sentinel://[[user]:password@]host:port[,host:port...]/service[/db][?sentinel_username=...&sentinel_password=...]}
     * ({@code rediss+sentinel://} for TLS)</li>
     * <li>{@code redis+cluster://[[user]:password@]host:port[,host:port...]} ({@code rediss+cluster://})</li>
     * </ul>
     * A malformed URL or option throws {@link InvalidArgumentException} at once.
     * With {@link OnRedisError#RAISE} (the default) the client connects now, so
     * a dead server, a bad password or a bad certificate fails here
     * ({@link ConnectionException}, {@link TimeoutException}...); with
     * {@link OnRedisError#ALLOW} or {@link OnRedisError#DENY} opening succeeds
     * while Redis is down and decisions follow the policy until it answers.
     */
    public static RateLimitClient connect(String url, ClientOptions options) {
        if (VirtualThreads.current()) {
            // connecting has no asynchronous form: a platform thread dials
            return VirtualThreads.offload(() -> connect(url, options));
        }
        Native.notNull("options", options);
        long ptr = Native.open(Native.name("url", url), Native.name("prefix", options.prefix()),
                options.connectTimeoutMs(), options.commandTimeoutMs(), options.poolSizeOrUnset(),
                options.onErrorOrUnset(), Native.name("TLS CA file", options.tlsCaFile()),
                Native.name("TLS certificate file", options.tlsCertFile()),
                Native.name("TLS key file", options.tlsKeyFile()), options.tlsVerifyOrUnset(),
                options.reconnectMaxMs(), options.configRefreshMs(), Native.name("clientId", options.clientId()),
                options.maxInFlightOrUnset(), options.maxBatchOrUnset());
        ClientHandle handle;
        try {
            handle = new ClientHandle(ptr);
        } catch (RuntimeException | Error e) {
            Native.close(ptr);
            throw e;
        }
        return new RateLimitClient(handle);
    }

    /** A limiter of one rate: {@code limiter(name, LimiterConfig.of(algorithm, rate))}. */
    public Limiter limiter(String name, Rate rate, Algorithm algorithm) {
        return limiter(name, LimiterConfig.of(algorithm, Native.notNull("rate", rate)));
    }

    /**
     * {@code "10/minute"}, or several rates enforced together,
     * {@code "10/second;1000/hour"}: {@code limiter(name, LimiterConfig.of(algorithm, rates))}.
     */
    public Limiter limiter(String name, String rates, Algorithm algorithm) {
        return limiter(name, LimiterConfig.of(algorithm, rates));
    }

    /** Several rates enforced together, all or nothing: {@code limiter(name, LimiterConfig.of(algorithm, rates))}. */
    public Limiter limiter(String name, List<Rate> rates, Algorithm algorithm) {
        return limiter(name, LimiterConfig.of(algorithm, rates));
    }

    /** Several rates enforced together, all or nothing: {@code limiter(name, LimiterConfig.of(algorithm, rates))}. */
    public Limiter limiter(String name, Algorithm algorithm, Rate... rates) {
        return limiter(name, LimiterConfig.of(algorithm, rates));
    }

    /**
     * A limiter enforcing {@code config} (rates, bursts, initial tokens,
     * scope). When a spec is stored in Redis for {@code name}
     * ({@link #configure}) and differs, this throws
     * {@link InvalidArgumentException} naming both, so a name never silently
     * becomes a second limiter (the core's rl_config_check: read at most once
     * per {@link ClientOptions#configRefresh} per name). While Redis is
     * unreachable that check is skipped under {@link OnRedisError#ALLOW} /
     * {@link OnRedisError#DENY}, and fails like any call under
     * {@link OnRedisError#RAISE}.
     */
    public Limiter limiter(String name, LimiterConfig config) {
        Native.notNull("config", config);
        byte[] nameBytes = Native.name("name", name);
        callOffCarrier(ptr -> {
            Native.configCheck(ptr, nameBytes, config.toNative());
            return null;
        });
        return new Limiter(this, name, config);
    }

    /**
     * A limiter whose decisions use the spec stored in Redis for {@code name}
     * ({@link #configure}, or any binding's {@code configure}), read again at
     * most every {@link ClientOptions#configRefresh}: a change reaches every
     * client within it. Throws {@link InvalidArgumentException} when nothing
     * is stored (and so does each call, until something is). While Redis is
     * unreachable under {@link OnRedisError#ALLOW} / {@link OnRedisError#DENY}
     * creation succeeds and decisions follow the policy.
     */
    public Limiter limiter(String name) {
        return stored(name, 0);
    }

    /**
     * {@link #limiter(String)} with a lease ({@link LimiterConfig#lease}):
     * acquires of the stored spec decide from blocks valid up to
     * {@code lease}; a change of the stored spec ends them within
     * {@link ClientOptions#configRefresh}.
     */
    public Limiter limiter(String name, Duration lease) {
        return stored(name, LimiterConfig.leaseMillis(lease));
    }

    private Limiter stored(String name, long leaseMs) {
        byte[] nameBytes = Native.name("name", name);
        // the core's check: its cache, and no failure in an outage under allow / deny
        callOffCarrier(ptr -> {
            Native.configCheck(ptr, nameBytes, null);
            return null;
        });
        return new Limiter(this, name, null, leaseMs);
    }

    /** The stored spec; InvalidArgumentException when none is. */
    LimiterConfig storedConfig(String name) {
        return getConfig(name).orElseThrow(() -> new InvalidArgumentException("no configuration is stored for limiter '"
                + name + "' (store one first: RateLimitClient.configure)"));
    }

    // ---- specs stored in Redis ------------------------------------------------------------

    /**
     * Stores {@code config} as the spec of {@code name} in Redis (Redisson's
     * setRate), replacing any, without expiry: every limiter made with
     * {@link #limiter(String)}, in any client and any language, follows it
     * within its client's {@link ClientOptions#configRefresh}. Entities keep
     * their state across a change (docs/semantics.md).
     */
    public void configure(String name, LimiterConfig config) {
        store(name, config, false);
    }

    /**
     * Stores {@code config} only when nothing is stored for {@code name}
     * (Redisson's trySetRate); true when it was stored, false when another
     * spec stays.
     */
    public boolean configureIfAbsent(String name, LimiterConfig config) {
        return store(name, config, true);
    }

    private boolean store(String name, LimiterConfig config, boolean ifAbsent) {
        Native.notNull("config", config);
        byte[] nameBytes = Native.name("name", name);
        return callOffCarrier(ptr -> Native.configSet(ptr, nameBytes, config.toNative(), ifAbsent));
    }

    /** The spec stored for {@code name}, read from Redis now (not the cache); empty when none is. */
    public Optional<LimiterConfig> getConfig(String name) {
        byte[] nameBytes = Native.name("name", name);
        long[] spec = callOffCarrier(ptr -> Native.configGet(ptr, nameBytes));
        return spec == null ? Optional.empty() : Optional.of(LimiterConfig.fromNative(spec));
    }

    /** Deletes the spec stored for {@code name}; true when there was one. Entities' state stays. */
    public boolean deleteConfig(String name) {
        byte[] nameBytes = Native.name("name", name);
        return callOffCarrier(ptr -> Native.configDelete(ptr, nameBytes));
    }

    /** A fair counting semaphore of {@code permits} whose leases expire after {@code lease} unless refreshed. */
    public Semaphore semaphore(String name, long permits, Duration lease) {
        return new Semaphore(this, name, permits, lease);
    }

    /** A mutual-exclusion lock with fencing tokens; the lease expires unless extended. */
    public DistributedLock lock(String name, Duration lease) {
        return new DistributedLock(this, name, lease);
    }

    public DelayQueue delayQueue(String name) {
        return new DelayQueue(this, name);
    }

    /**
     * Any mix of decisions, pipelined in one round trip; all validated before
     * anything is sent. When a request fails (its key holds another type, a
     * timeout or a lost connection part-way, a cluster node down), the first
     * failure is thrown, its message naming the request, carrying every
     * request's outcome ({@link RateLimitException#outcomes()}): the decisions
     * Redis made are never lost. {@link #executeEach} returns them instead.
     */
    public List<Result> execute(List<Request> requests) {
        List<Outcome> outcomes = executeEach(requests);
        List<Result> results = new ArrayList<>(outcomes.size());
        for (int i = 0; i < outcomes.size(); i++) {
            Outcome o = outcomes.get(i);
            if (!o.ok()) {
                RateLimitException e = o.error();
                String message = outcomes.size() > 1 ? "request " + i + ": " + e.getMessage() : e.getMessage();
                throw RateLimitException.of(e.status(), message).withOutcomes(outcomes);
            }
            results.add(o.result());
        }
        return results;
    }

    /**
     * {@link #execute} with one {@link Outcome} per request, in order: the
     * decision Redis made (or the {@link OnRedisError} policy's, for a request
     * Redis could not be asked or did not answer in time), or that request's
     * own error. Throws only for an invalid batch, of which nothing is sent.
     */
    public List<Outcome> executeEach(List<Request> requests) {
        Native.notNull("requests", requests);
        int n = requests.size();
        byte[][] names = new byte[n][];
        byte[][] ids = new byte[n][];
        long[][] specs = new long[n][];
        long[] permits = new long[n];
        int[] ops = new int[n];
        long[] maxWaits = new long[n];
        long[] leases = new long[n];
        for (int i = 0; i < n; i++) {
            Request r = Native.notNull("request", requests.get(i));
            Limiter l = r.limiter();
            if (l.client() != this) {
                throw new InvalidArgumentException("request " + i + ": its limiter belongs to another client");
            }
            names[i] = l.nameBytes();
            ids[i] = Native.name("id", r.id());
            specs[i] = l.spec();
            permits[i] = r.permits();
            ops[i] = r.op().ordinal();
            maxWaits[i] = r.maxWaitMs();
            leases[i] = l.leaseMs();
        }
        Object[] each = callOffCarrier(ptr -> Native.execute(ptr, names, ids, specs, permits, ops, maxWaits, leases));
        List<Outcome> outcomes = new ArrayList<>(n);
        for (Object o : each) {
            outcomes.add(o instanceof Result ? Outcome.of((Result) o) : Outcome.failed((RateLimitException) o));
        }
        return outcomes;
    }

    /**
     * Runs a native call under the handle's lock. The fence keeps this client
     * reachable until the call returns, so the Cleaner cannot close it under a
     * caller that only holds a Limiter or Semaphore.
     */
    <T> T call(ClientHandle.Call<T> call) {
        try {
            return handle.call(call);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /**
     * Submits one decision to the client's I/O thread; the future completes
     * there. The pending future keeps this client reachable until then.
     */
    /**
     * A call the core makes only blocking (stored specs, batches, a lease
     * give-back): on a virtual thread it runs on a platform thread while the
     * virtual thread parks, so it never holds a carrier.
     */
    <T> T callOffCarrier(ClientHandle.Call<T> call) {
        if (VirtualThreads.current()) {
            return VirtualThreads.offload(() -> call(call));
        }
        return call(call);
    }

    CompletableFuture<Result> submit(ClientHandle.Decision decision) {
        try {
            return handle.submit(this, decision);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /**
     * Submits one semaphore, lock or queue call to the client's I/O thread;
     * the future completes there. The op keeps this client reachable until then.
     */
    <T> CompletableFuture<T> submitOp(AsyncOp<T> op, ClientHandle.Submit submit) {
        try {
            return handle.submitOp(op, submit);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** Asynchronous calls of this client still in flight (for tests and metrics). */
    int asyncInFlight() {
        return handle.async.inFlight();
    }

    /**
     * The decisions this client made, per limiter name, as the core counts
     * them (docs/metrics.md): no lock and no round trip, so cheap enough for
     * every scrape. For Micrometer, see
     * {@code io.ratelimit.micrometer.RateLimitMetrics}.
     */
    public Map<String, LimiterStats> stats() {
        Object[] raw = handle.call(Native::stats);
        byte[][] names = (byte[][]) raw[0];
        long[] counters = (long[]) raw[1];
        long[] bounds = (long[]) raw[2];
        int stride = names.length == 0 ? 0 : counters.length / names.length;
        Map<String, LimiterStats> out = new LinkedHashMap<>();
        for (int i = 0; i < names.length; i++) {
            String name = new String(names[i], StandardCharsets.UTF_8);
            out.put(name, new LimiterStats(name, counters, i * stride, bounds));
        }
        return out;
    }

    /** The key prefix in use. */
    public String prefix() {
        return prefix;
    }

    /**
     * This client's identity for per-client quotas ({@link LimiterConfig#perClient()}):
     * {@link ClientOptions#clientId}, else 32 random hex digits drawn when it opened.
     */
    public String clientId() {
        return clientId;
    }

    public boolean isClosed() {
        return handle.isClosed();
    }

    /** The version of the C core in use (e.g. 100 for 0.1.0). */
    public static int coreVersion() {
        return Native.version();
    }

    /**
     * True when the native library speaks TLS ({@code rediss://}): it was built
     * with hiredis_ssl. Without it a {@code rediss://} URL is an
     * {@link InvalidArgumentException}.
     */
    public static boolean hasTls() {
        return Native.hasTls();
    }

    /**
     * {@code url} as a log may show it, as the core's own messages quote URLs:
     * the password and secret-looking options ({@code sentinel_password}...)
     * masked as {@code ***}.
     */
    public static String redactUrl(String url) {
        return new String(Native.redactUrl(url.getBytes(StandardCharsets.UTF_8)), StandardCharsets.UTF_8);
    }

    /**
     * The OpenSSL this build runs with ({@code "OpenSSL 3.0.20 7 Apr 2026"}), to
     * tell whether an OpenSSL advisory concerns it; null without TLS.
     */
    public static String tlsVersion() {
        return Native.tlsVersion();
    }

    /** The Lua scripts embedded in the core, each as {name, SHA1 hex} (what EVALSHA sends). */
    public static List<String[]> scripts() {
        String[] flat = Native.scripts();
        List<String[]> out = new ArrayList<>(flat.length / 2);
        for (int i = 0; i + 1 < flat.length; i += 2) {
            out.add(new String[] {flat[i], flat[i + 1]});
        }
        return out;
    }

    /**
     * Closes the client, once, without waiting: later calls throw
     * {@link ClientClosedException}, blocking waits in flight stop promptly
     * with it. When the last call in flight has returned (at once when none
     * is) every lease ({@link LimiterConfig#lease}) gives its unused permits
     * back to Redis, every asynchronous call still in flight completes
     * exceptionally with status {@link Status#CLOSED} and the connections
     * close (the core's rl_client_shutdown); with none in flight, before this
     * returns. The native memory goes with this object (a Cleaner). An
     * application that does not close its client (no Spring context, no
     * try-with-resources) leaves the leases to expire with their validity
     * instead; nothing is over-admitted either way. Safe from any thread,
     * a dependent stage on the client's I/O thread among them.
     */
    @Override
    public void close() {
        try {
            if (VirtualThreads.current()) {
                // the shutdown may give leases back (a round trip)
                VirtualThreads.offload(() -> {
                    handle.shutdown();
                    return null;
                });
                return;
            }
            handle.shutdown();
        } finally {
            Reference.reachabilityFence(this);
        }
    }
}
