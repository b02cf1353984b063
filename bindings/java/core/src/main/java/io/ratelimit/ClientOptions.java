package io.ratelimit;

import java.time.Duration;

/**
 * Client settings. Immutable: every setter returns a copy. Anything not set
 * keeps the C core's default (rl_options_init), which this class does not
 * repeat.
 */
public final class ClientOptions {
    private final String prefix;
    private final Duration connectTimeout;
    private final Duration commandTimeout;
    private final Integer poolSize;
    private final OnRedisError onRedisError;

    private ClientOptions(String prefix, Duration connectTimeout, Duration commandTimeout, Integer poolSize,
            OnRedisError onRedisError) {
        this.prefix = prefix;
        this.connectTimeout = connectTimeout;
        this.commandTimeout = commandTimeout;
        this.poolSize = poolSize;
        this.onRedisError = onRedisError;
    }

    public static ClientOptions defaults() {
        return new ClientOptions(null, null, null, null, null);
    }

    /** Key prefix (core default "rl"). */
    public ClientOptions prefix(String prefix) {
        return new ClientOptions(prefix, connectTimeout, commandTimeout, poolSize, onRedisError);
    }

    /** Sets both the connect and the command timeout. */
    public ClientOptions timeout(Duration timeout) {
        return new ClientOptions(prefix, timeout, timeout, poolSize, onRedisError);
    }

    public ClientOptions connectTimeout(Duration timeout) {
        return new ClientOptions(prefix, timeout, commandTimeout, poolSize, onRedisError);
    }

    public ClientOptions commandTimeout(Duration timeout) {
        return new ClientOptions(prefix, connectTimeout, timeout, poolSize, onRedisError);
    }

    /** Connections shared by all threads. */
    public ClientOptions poolSize(int poolSize) {
        return new ClientOptions(prefix, connectTimeout, commandTimeout, poolSize, onRedisError);
    }

    public ClientOptions onRedisError(OnRedisError policy) {
        return new ClientOptions(prefix, connectTimeout, commandTimeout, poolSize, policy);
    }

    String prefix() {
        return prefix;
    }

    long connectTimeoutMs() {
        return connectTimeout == null ? Native.UNSET : Native.millis("connect timeout", connectTimeout);
    }

    long commandTimeoutMs() {
        return commandTimeout == null ? Native.UNSET : Native.millis("command timeout", commandTimeout);
    }

    int poolSizeOrUnset() {
        return poolSize == null ? Integer.MIN_VALUE : poolSize;
    }

    int onErrorOrUnset() {
        return onRedisError == null ? Integer.MIN_VALUE : onRedisError.code();
    }

    @Override
    public String toString() {
        return "ClientOptions{prefix=" + prefix + ", connectTimeout=" + connectTimeout + ", commandTimeout="
                + commandTimeout + ", poolSize=" + poolSize + ", onRedisError=" + onRedisError + "}";
    }
}
