package io.ratelimit;

import java.nio.charset.StandardCharsets;
import java.time.Duration;

/**
 * The JNI entry points (bound by RegisterNatives in JNI_OnLoad) and the
 * conversions at the boundary: strings go down as UTF-8 bytes, durations as
 * milliseconds. Validation, keys and defaults stay in the C core.
 */
final class Native {
    /** RL_VERSION_NUMBER of the core this Java code was written against. */
    static final int CORE_VERSION = 100;

    /** Options left at Long.MIN_VALUE / Integer.MIN_VALUE keep the core's default. */
    static final long UNSET = Long.MIN_VALUE;

    static {
        NativeLoader.load();
        int v = version();
        if (v / 100 != CORE_VERSION / 100) {
            throw new UnsatisfiedLinkError("ratelimit: native core version " + v + " does not match the Java API ("
                    + CORE_VERSION + "); loaded from " + NativeLoader.loadedFrom());
        }
    }

    private Native() {}

    private static final long[] LIMITS = limits();
    /** The core's longest lease (rl_request.lease_ms). */
    static final long MAX_LEASE_MS = LIMITS[1];

    /** Forces loading (and the version check) now. */
    static void init() {}

    // ---- called from C -------------------------------------------------

    static RuntimeException exception(int status, byte[] message) {
        return RateLimitException.of(Status.fromCode(status), new String(message, StandardCharsets.UTF_8));
    }

    // ---- conversions ------------------------------------------------------

    /** UTF-8 bytes of a name or id; null stays null (the core reports it). */
    static byte[] name(String what, String value) {
        if (value == null) {
            return null;
        }
        if (value.indexOf('\0') >= 0) {
            // C strings end at NUL: a truncated name would be another entity's key
            throw new InvalidArgumentException(what + " must not contain NUL characters");
        }
        return value.getBytes(StandardCharsets.UTF_8);
    }

    /** UTF-8 bytes of a payload (may hold NUL). */
    static byte[] bytes(String value) {
        return value == null ? null : value.getBytes(StandardCharsets.UTF_8);
    }

    static String string(byte[] bytes) {
        return new String(bytes, StandardCharsets.UTF_8);
    }

    /** Milliseconds, rounded up so a tiny positive wait never becomes "do not wait". */
    static long millis(String what, Duration d) {
        if (d == null) {
            throw new InvalidArgumentException(what + " must not be null");
        }
        try {
            long ms = d.toMillis();
            if (!d.isNegative() && d.compareTo(Duration.ofMillis(ms)) > 0) {
                ms++;
            }
            return ms;
        } catch (ArithmeticException e) {
            // far out of any accepted range: let the core reject it with its message
            return d.isNegative() ? -1 : Long.MAX_VALUE;
        }
    }

    static <T> T notNull(String what, T value) {
        if (value == null) {
            throw new InvalidArgumentException(what + " must not be null");
        }
        return value;
    }

    // ---- natives ------------------------------------------------------------

    static native int version();

    static native String strerror(int status);

    static native long[] parseRate(byte[] text);

    // A limiter's spec crosses as one long[] (LimiterConfig.toNative()):
    // {algorithm, initial_tokens, scope, limit_1, period_ms_1, burst_1, limit_2, ...}
    // in the core's values; null = the spec stored in Redis for the name.

    /** Throws InvalidArgumentException naming what is wrong with the spec. */
    static native void validateSpec(long[] spec);

    /** rl_rates_parse: "10/second;1000/hour" as {limit_1, period_ms_1, limit_2, ...}. */
    static native long[] parseRates(byte[] text);

    /** rl_spec_format: "gcra 10/second;1000/hour burst 20 initial 5 per_client". */
    static native String specFormat(long[] spec);

    static native String algorithmName(int algorithm);

    static native int algorithmParse(byte[] name);

    /** {name0, sha1_0, name1, sha1_1, ...} */
    static native String[] scripts();

    static native boolean hasTls();

    static native String tlsVersion();

    /** Each option at UNSET / Integer.MIN_VALUE / null keeps the core's default. */
    static native long open(byte[] url, byte[] prefix, long connectTimeoutMs, long commandTimeoutMs, int poolSize,
            int onError, byte[] tlsCaFile, byte[] tlsCertFile, byte[] tlsKeyFile, int tlsVerify,
            long reconnectMaxMs, long configRefreshMs, byte[] clientId, int maxInFlight,
            int maxBatch);

    /** rl_client_close: frees the client; only once no thread can hold it. */
    static native void close(long client);

    /** rl_client_shutdown with the waits stopped: the memory stays until {@link #close}. */
    static native void shutdown(long client);

    static native String prefix(long client);

    static native String clientId(long client);

    /** rl_key_build of the first rate; scope: the core's rl_scope. */
    static native byte[] key(long client, byte[] name, byte[] id, int algorithm, int scope);

    /** {RL_MAX_PERIOD_MS, RL_LEASE_MAX_MS} */
    private static native long[] limits();

    /** rl_url_redact: the URL with its password and secret options masked, UTF-8. */
    static native byte[] redactUrl(byte[] url);

    // leaseMs: the request's rl_request.lease_ms (LimiterConfig.lease; 0 = none).

    /** nowMs: 0 = Redis TIME; > 0 = explicit clock ({@link Limiter#at}); the core range-checks it. */
    static native Result decide(long client, byte[] name, byte[] id, long[] spec, long permits, int op,
            long maxWaitMs, long nowMs, long leaseMs);

    static native Result acquireWait(long client, ClientHandle cancel, byte[] name, byte[] id, long[] spec,
            long permits, long timeoutMs, long leaseMs);

    /** Deletes the state of every rate of the spec. */
    static native void reset(long client, byte[] name, byte[] id, long[] spec);

    /** Per request its Result or its exception (not thrown); an invalid batch throws. */
    static native Object[] execute(long client, byte[][] names, byte[][] ids, long[][] specs, long[] permits,
            int[] ops, long[] maxWaits, long[] leases);

    /** rl_leases_give_back: this client's leases on name (null: every name) end now, unused permits returned. */
    static native void leasesGiveBack(long client, byte[] name);

    // ---- stored specs (rl_config_*) -------------------------------------------------

    /** rl_config_set, or rl_config_set_if_absent: false when a spec was stored already. */
    static native boolean configSet(long client, byte[] name, long[] spec, boolean ifAbsent);

    /** The stored spec, or null when none is stored (reads Redis). */
    static native long[] configGet(long client, byte[] name);

    static native boolean configDelete(long client, byte[] name);

    /** Throws InvalidArgumentException naming both when a different spec is stored for name. */
    static native void configCheck(long client, byte[] name, long[] spec);

    /**
     * rl_config_cached: the stored spec when this client's cached copy is
     * fresh (a decision with it is the stored spec's), else null; never a round trip.
     */
    static native long[] configCached(long client, byte[] name);

    static native NativePermit semAcquire(long client, ClientHandle cancel, boolean lock, byte[] name, long max,
            long leaseMs, long timeoutMs);

    static native boolean semRelease(long client, boolean lock, byte[] name, byte[] id);

    static native boolean semRefresh(long client, boolean lock, byte[] name, byte[] id, long leaseMs);

    static native long semAvailable(long client, byte[] name, long max);

    static native long semHolders(long client, byte[] name);

    static native boolean queuePush(long client, byte[] queue, byte[] message, long delayMs);

    /** cancel == null: pop what is due now; else wait up to timeoutMs. */
    static native byte[][] queuePop(long client, ClientHandle cancel, byte[] queue, long max, long timeoutMs);

    static native long queueSize(long client, byte[] queue);

    static native boolean queueRemove(long client, byte[] queue, byte[] message);

    // ---- asynchronous decisions (see AsyncCalls) --------------------------------------

    /** A JNI global reference to {@code calls}, the context of the client's completion callback. */
    static native long asyncContext(AsyncCalls calls);

    /** Deletes it; only once rl_client_close has returned. */
    static native void asyncContextFree(long ref);

    /**
     * rl_submit (timeoutMs other than 0: rl_submit_acquire_wait): the
     * completion calls {@link AsyncCalls#complete} with {@code tag} on the
     * client's I/O thread. Throws (like {@link #decide}) when the core
     * refuses the request; then no completion follows.
     */
    static native void submit(long client, long context, long tag, byte[] name, byte[] id, long[] spec, long permits,
            int op, long maxWaitMs, long nowMs, long leaseMs, long timeoutMs);

    // ---- asynchronous primitives (primitives_jni.c; see AsyncOp) -----------------------

    // Each completes with AsyncCalls.completeOp(tag, ...) on the I/O thread, or
    // throws (like its blocking twin) when the core refuses it; then no
    // completion follows.

    /** rl_submit_semaphore_acquire / rl_submit_lock_acquire; timeoutMs 0: one try. */
    static native void semAcquireAsync(long client, long context, long tag, boolean lock, byte[] name, long max,
            long leaseMs, long timeoutMs);

    static native void semReleaseAsync(long client, long context, long tag, boolean lock, byte[] name, byte[] id);

    static native void semRefreshAsync(long client, long context, long tag, boolean lock, byte[] name, byte[] id,
            long leaseMs);

    static native void queuePushAsync(long client, long context, long tag, byte[] queue, byte[] message,
            long delayMs);

    /** timeoutMs 0: what is due now. */
    static native void queuePopAsync(long client, long context, long tag, byte[] queue, long max, long timeoutMs);

    /** rl_submit_reset: the completion's value is the keys deleted. */
    static native void resetAsync(long client, long context, long tag, byte[] name, byte[] id, long[] spec);

    /** rl_submit_semaphore_info: the completion's value is the live holders (max 0) or the permits available. */
    static native void semInfoAsync(long client, long context, long tag, byte[] name, long max);

    static native void queueSizeAsync(long client, long context, long tag, byte[] queue);

    /** The completion's value: 1 when the message was removed. */
    static native void queueRemoveAsync(long client, long context, long tag, byte[] queue, byte[] message);

    /** rl_cancel: the wait under {@code tag} completes with CANCELLED and holds nothing. */
    static native void cancel(long client, long tag);

    // ---- metrics (stats_jni.c) -------------------------------------------------------

    /**
     * rl_client_stats: {byte[][] names, long[] counters (per name: allowed,
     * denied, fallback, errors, local allowed, local denied, lease calls,
     * latency sum in us, then the bucket counts),
     * long[] bucket bounds in us}.
     */
    static native Object[] stats(long client);
}
