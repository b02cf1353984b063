package io.ratelimit;

import java.lang.ref.Cleaner;
import java.lang.ref.Reference;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
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
    private final Cleaner.Cleanable cleanable;
    private final String prefix;

    private RateLimitClient(ClientHandle handle) {
        this.handle = handle;
        this.cleanable = CLEANER.register(this, handle);
        this.prefix = handle.call(Native::prefix);
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
     * <li>{@code redis+sentinel://[[user]:password@]host:port[,host:port...]/service[/db][?sentinel_password=...]}
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
        Native.notNull("options", options);
        long ptr = Native.open(Native.name("url", url), Native.name("prefix", options.prefix()),
                options.connectTimeoutMs(), options.commandTimeoutMs(), options.poolSizeOrUnset(),
                options.onErrorOrUnset(), Native.name("TLS CA file", options.tlsCaFile()),
                Native.name("TLS certificate file", options.tlsCertFile()),
                Native.name("TLS key file", options.tlsKeyFile()), options.tlsVerifyOrUnset(),
                options.reconnectMaxMs());
        ClientHandle handle;
        try {
            handle = new ClientHandle(ptr);
        } catch (RuntimeException | Error e) {
            Native.close(ptr);
            throw e;
        }
        return new RateLimitClient(handle);
    }

    public Limiter limiter(String name, Rate rate, Algorithm algorithm) {
        return new Limiter(this, name, Native.notNull("rate", rate), Native.notNull("algorithm", algorithm));
    }

    /** Shorthand for {@code limiter(name, Rate.parse(rate), algorithm)}. */
    public Limiter limiter(String name, String rate, Algorithm algorithm) {
        return limiter(name, Rate.parse(rate), algorithm);
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

    /** Any mix of decisions, pipelined in one round trip; all validated before anything is sent. */
    public List<Result> execute(List<Request> requests) {
        Native.notNull("requests", requests);
        int n = requests.size();
        byte[][] names = new byte[n][];
        byte[][] ids = new byte[n][];
        int[] algorithms = new int[n];
        long[] limits = new long[n];
        long[] periods = new long[n];
        long[] bursts = new long[n];
        long[] permits = new long[n];
        int[] ops = new int[n];
        long[] maxWaits = new long[n];
        for (int i = 0; i < n; i++) {
            Request r = Native.notNull("request", requests.get(i));
            Limiter l = r.limiter();
            if (l.client() != this) {
                throw new InvalidArgumentException("request " + i + ": its limiter belongs to another client");
            }
            names[i] = l.nameBytes();
            ids[i] = Native.name("id", r.id());
            algorithms[i] = l.algorithm().code();
            limits[i] = l.rate().limit();
            periods[i] = l.rate().periodMs();
            bursts[i] = l.rate().burst();
            permits[i] = r.permits();
            ops[i] = r.op().ordinal();
            maxWaits[i] = r.maxWaitMs();
        }
        Result[] results = call(ptr -> Native.execute(ptr, names, ids, algorithms, limits, periods, bursts,
                permits, ops, maxWaits));
        return new ArrayList<>(Arrays.asList(results));
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
    CompletableFuture<Result> submit(ClientHandle.Decision decision) {
        try {
            return handle.submit(this, decision);
        } finally {
            Reference.reachabilityFence(this);
        }
    }

    /** Asynchronous decisions of this client still in flight (for tests and metrics). */
    int asyncInFlight() {
        return handle.async.inFlight();
    }

    /** The key prefix in use. */
    public String prefix() {
        return prefix;
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
     * Frees the client, once; waits for calls in flight (blocking waits stop
     * promptly). Every asynchronous decision still in flight completes
     * exceptionally with a {@link RateLimitException} of status
     * {@link Status#CLOSED} before this returns. Called from a dependent stage
     * running on this client's I/O thread, the close goes on in a new thread
     * and this returns at once (the I/O thread cannot wait for itself).
     */
    @Override
    public void close() {
        cleanable.clean();
    }
}
