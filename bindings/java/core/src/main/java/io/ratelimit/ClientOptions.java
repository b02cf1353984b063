package io.ratelimit;

import java.nio.file.Path;
import java.time.Duration;
import java.util.function.Consumer;

/**
 * Client settings. Immutable: every setter returns a copy. Anything not set
 * keeps the C core's default (rl_options_init), which this class does not
 * repeat. Values are checked by the core when a client is opened
 * ({@link InvalidArgumentException}).
 */
public final class ClientOptions {
    private final String prefix;
    private final Duration connectTimeout;
    private final Duration commandTimeout;
    private final Integer poolSize;
    private final OnRedisError onRedisError;
    private final String tlsCaFile;
    private final String tlsCertFile;
    private final String tlsKeyFile;
    private final TlsVerify tlsVerify;
    private final Duration reconnectMax;
    private final Duration configRefresh;
    private final String clientId;
    private final Integer maxInFlight;
    private final Integer maxBatch;

    /** The mutable form a setter edits before freezing it into a new ClientOptions. */
    private static final class Fields {
        String prefix;
        Duration connectTimeout;
        Duration commandTimeout;
        Integer poolSize;
        OnRedisError onRedisError;
        String tlsCaFile;
        String tlsCertFile;
        String tlsKeyFile;
        TlsVerify tlsVerify;
        Duration reconnectMax;
        Duration configRefresh;
        String clientId;
        Integer maxInFlight;
        Integer maxBatch;
    }

    private ClientOptions(Fields f) {
        this.prefix = f.prefix;
        this.connectTimeout = f.connectTimeout;
        this.commandTimeout = f.commandTimeout;
        this.poolSize = f.poolSize;
        this.onRedisError = f.onRedisError;
        this.tlsCaFile = f.tlsCaFile;
        this.tlsCertFile = f.tlsCertFile;
        this.tlsKeyFile = f.tlsKeyFile;
        this.tlsVerify = f.tlsVerify;
        this.reconnectMax = f.reconnectMax;
        this.configRefresh = f.configRefresh;
        this.clientId = f.clientId;
        this.maxInFlight = f.maxInFlight;
        this.maxBatch = f.maxBatch;
    }

    /** A copy with the edit applied. */
    private ClientOptions with(Consumer<Fields> edit) {
        Fields f = new Fields();
        f.prefix = prefix;
        f.connectTimeout = connectTimeout;
        f.commandTimeout = commandTimeout;
        f.poolSize = poolSize;
        f.onRedisError = onRedisError;
        f.tlsCaFile = tlsCaFile;
        f.tlsCertFile = tlsCertFile;
        f.tlsKeyFile = tlsKeyFile;
        f.tlsVerify = tlsVerify;
        f.reconnectMax = reconnectMax;
        f.configRefresh = configRefresh;
        f.clientId = clientId;
        f.maxInFlight = maxInFlight;
        f.maxBatch = maxBatch;
        edit.accept(f);
        return new ClientOptions(f);
    }

    public static ClientOptions defaults() {
        return new ClientOptions(new Fields());
    }

    /** Key prefix (core default "rl"). */
    public ClientOptions prefix(String prefix) {
        return with(f -> f.prefix = prefix);
    }

    /** Sets both the connect and the command timeout. */
    public ClientOptions timeout(Duration timeout) {
        return with(f -> {
            f.connectTimeout = timeout;
            f.commandTimeout = timeout;
        });
    }

    public ClientOptions connectTimeout(Duration timeout) {
        return with(f -> f.connectTimeout = timeout);
    }

    public ClientOptions commandTimeout(Duration timeout) {
        return with(f -> f.commandTimeout = timeout);
    }

    /** Connections shared by all threads. */
    public ClientOptions poolSize(int poolSize) {
        return with(f -> f.poolSize = poolSize);
    }

    /**
     * What rate-limit decisions do while Redis is unreachable. With
     * {@link OnRedisError#ALLOW} or {@link OnRedisError#DENY} opening a client
     * succeeds even while Redis is down (an application can boot in an outage);
     * with {@link OnRedisError#RAISE} (the default) it connects at once and fails.
     */
    public ClientOptions onRedisError(OnRedisError policy) {
        return with(f -> f.onRedisError = policy);
    }

    /**
     * PEM CA bundle that server certificates must chain to ({@code rediss://}
     * only); overrides the URL's {@code ssl_ca_certs}. Default: the system's
     * trust store. null: back to the URL's setting.
     */
    public ClientOptions tlsCaFile(String file) {
        return with(f -> f.tlsCaFile = file);
    }

    /** {@link #tlsCaFile(String)} from a Path. */
    public ClientOptions tlsCaFile(Path file) {
        return tlsCaFile(path(file));
    }

    /**
     * Client certificate (PEM), for servers with {@code tls-auth-clients};
     * overrides the URL's {@code ssl_certfile}.
     */
    public ClientOptions tlsCertFile(String file) {
        return with(f -> f.tlsCertFile = file);
    }

    /** {@link #tlsCertFile(String)} from a Path. */
    public ClientOptions tlsCertFile(Path file) {
        return tlsCertFile(path(file));
    }

    /**
     * Private key (PEM) of the client certificate; overrides the URL's
     * {@code ssl_keyfile}. Default: read from the certificate file.
     */
    public ClientOptions tlsKeyFile(String file) {
        return with(f -> f.tlsKeyFile = file);
    }

    /** {@link #tlsKeyFile(String)} from a Path. */
    public ClientOptions tlsKeyFile(Path file) {
        return tlsKeyFile(path(file));
    }

    /** Certificate checks; overrides the URL's {@code ssl_cert_reqs} unless {@link TlsVerify#DEFAULT}. */
    public ClientOptions tlsVerify(TlsVerify verify) {
        return with(f -> f.tlsVerify = verify);
    }

    /**
     * The longest pause between reconnect attempts while Redis is unreachable
     * (they back off exponentially, with jitter, up to this; core default 1 s).
     * Calls in between fail at once, or the {@link OnRedisError} policy decides.
     * Must be positive; null keeps the default.
     */
    public ClientOptions reconnectMax(Duration pause) {
        return with(f -> f.reconnectMax = pause);
    }

    /**
     * How often a spec stored in Redis ({@link RateLimitClient#configure}) is
     * read again, per limiter name: a change reaches this client within it
     * (core default 1 s). Must be positive; null keeps the default.
     */
    public ClientOptions configRefresh(Duration interval) {
        return with(f -> f.configRefresh = interval);
    }

    /**
     * This client's identity for per-client quotas ({@link LimiterConfig#perClient()}):
     * 1..64 of {@code [A-Za-z0-9._-]}, e.g. a host or pod name so its quota
     * survives a restart. Default: 32 random hex digits drawn when the client
     * opens ({@link RateLimitClient#clientId()}). null keeps the default.
     */
    public ClientOptions clientId(String id) {
        return with(f -> f.clientId = id);
    }

    /**
     * Requests in flight on one connection of the asynchronous calls
     * ({@code ...Async}), 1..1000000 (core default 1000). Past it a request
     * waits, unsent, for room; while the server is behind (its oldest owed
     * reply is older than the command timeout) it fails at once with
     * {@link BacklogException} instead, as does one still unsent at its
     * timeout: nothing was sent, nothing consumed. Blocking calls: a server
     * that is behind gets one call at a time, and a second fails the same
     * way. The {@link OnRedisError} policy decides a rate limit, as for a
     * timeout. null keeps the default.
     */
    public ClientOptions maxInFlight(Integer requests) {
        return with(f -> f.maxInFlight = requests);
    }

    /**
     * Plain decisions (acquire, peek, reserve, up to, refund; no lease) for
     * one server (one slot in a cluster) that are ready together go in one
     * script call, up to this many, 1..100 (core default 16; 1: one call
     * each). The asynchronous calls batch what is queued at once and never
     * wait for company; batch calls batch their requests. A batch costs
     * Redis less CPU per decision and holds it for its whole length. null
     * keeps the default.
     */
    public ClientOptions maxBatch(Integer decisions) {
        return with(f -> f.maxBatch = decisions);
    }

    private static String path(Path file) {
        return file == null ? null : file.toString();
    }

    String prefix() {
        return prefix;
    }

    long connectTimeoutMs() {
        return positiveMillis("connectTimeout", connectTimeout);
    }

    long commandTimeoutMs() {
        return positiveMillis("commandTimeout", commandTimeout);
    }

    // the core reads 0 as "the default": a zero set here must not silently become it
    private static long positiveMillis(String what, Duration d) {
        if (d == null) {
            return Native.UNSET;
        }
        if (d.isZero()) {
            throw new InvalidArgumentException(what + " must be positive (got Duration.ZERO; leave it unset for the default)");
        }
        return Native.millis(what, d);
    }

    int poolSizeOrUnset() {
        if (poolSize != null && poolSize <= 0) {
            throw new InvalidArgumentException("poolSize must be in 1..1024 (got " + poolSize + ")");
        }
        return poolSize == null ? Integer.MIN_VALUE : poolSize;
    }

    int onErrorOrUnset() {
        return onRedisError == null ? Integer.MIN_VALUE : onRedisError.code();
    }

    String tlsCaFile() {
        return tlsCaFile;
    }

    String tlsCertFile() {
        return tlsCertFile;
    }

    String tlsKeyFile() {
        return tlsKeyFile;
    }

    int tlsVerifyOrUnset() {
        return tlsVerify == null ? Integer.MIN_VALUE : tlsVerify.code();
    }

    long reconnectMaxMs() {
        return positiveMillis("reconnectMax", reconnectMax);
    }

    long configRefreshMs() {
        return positiveMillis("configRefresh", configRefresh);
    }

    String clientId() {
        return clientId;
    }

    int maxInFlightOrUnset() {
        if (maxInFlight != null && maxInFlight <= 0) { // 0 would be the core's default
            throw new InvalidArgumentException("maxInFlight must be in 1..1000000 (got " + maxInFlight + ")");
        }
        return maxInFlight == null ? Integer.MIN_VALUE : maxInFlight;
    }

    int maxBatchOrUnset() {
        if (maxBatch != null && maxBatch <= 0) { // 0 would be the core's default
            throw new InvalidArgumentException("maxBatch must be in 1..100 (got " + maxBatch + ")");
        }
        return maxBatch == null ? Integer.MIN_VALUE : maxBatch;
    }

    @Override
    public String toString() {
        return "ClientOptions{prefix=" + prefix + ", connectTimeout=" + connectTimeout + ", commandTimeout="
                + commandTimeout + ", poolSize=" + poolSize + ", onRedisError=" + onRedisError + ", tlsCaFile="
                + tlsCaFile + ", tlsCertFile=" + tlsCertFile + ", tlsKeyFile=" + tlsKeyFile + ", tlsVerify="
                + tlsVerify + ", reconnectMax=" + reconnectMax + ", configRefresh=" + configRefresh + ", clientId="
                + clientId + ", maxInFlight=" + maxInFlight + ", maxBatch=" + maxBatch + "}";
    }
}
