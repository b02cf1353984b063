package io.ratelimit.spring;

import io.ratelimit.ClientOptions;
import io.ratelimit.OnRedisError;
import java.time.Duration;
import org.springframework.boot.context.properties.ConfigurationProperties;

/**
 * {@code ratelimit.*} in application.properties. Unset values keep the C
 * core's defaults (they are not repeated here), except the URL.
 */
@ConfigurationProperties(prefix = "ratelimit")
public class RateLimitProperties {
    /** Set to false to skip the auto-configuration. */
    private boolean enabled = true;
    /** redis://[[user]:password@]host[:port][/db] or unix:///path.sock[?db=N]. */
    private String url = "redis://127.0.0.1:6379";
    /** Key prefix. */
    private String prefix;
    /** Connect and command timeout (both), e.g. 500ms. */
    private Duration timeout;
    private Duration connectTimeout;
    private Duration commandTimeout;
    /** Connections shared by all threads. */
    private Integer poolSize;
    /** raise, allow (fail open) or deny (fail closed) when Redis is unreachable. */
    private OnRedisError onRedisError;

    /** The client options these properties describe. */
    public ClientOptions toClientOptions() {
        ClientOptions o = ClientOptions.defaults();
        if (prefix != null) {
            o = o.prefix(prefix);
        }
        if (timeout != null) {
            o = o.timeout(timeout);
        }
        if (connectTimeout != null) {
            o = o.connectTimeout(connectTimeout);
        }
        if (commandTimeout != null) {
            o = o.commandTimeout(commandTimeout);
        }
        if (poolSize != null) {
            o = o.poolSize(poolSize);
        }
        if (onRedisError != null) {
            o = o.onRedisError(onRedisError);
        }
        return o;
    }

    public boolean isEnabled() {
        return enabled;
    }

    public void setEnabled(boolean enabled) {
        this.enabled = enabled;
    }

    public String getUrl() {
        return url;
    }

    public void setUrl(String url) {
        this.url = url;
    }

    public String getPrefix() {
        return prefix;
    }

    public void setPrefix(String prefix) {
        this.prefix = prefix;
    }

    public Duration getTimeout() {
        return timeout;
    }

    public void setTimeout(Duration timeout) {
        this.timeout = timeout;
    }

    public Duration getConnectTimeout() {
        return connectTimeout;
    }

    public void setConnectTimeout(Duration connectTimeout) {
        this.connectTimeout = connectTimeout;
    }

    public Duration getCommandTimeout() {
        return commandTimeout;
    }

    public void setCommandTimeout(Duration commandTimeout) {
        this.commandTimeout = commandTimeout;
    }

    public Integer getPoolSize() {
        return poolSize;
    }

    public void setPoolSize(Integer poolSize) {
        this.poolSize = poolSize;
    }

    public OnRedisError getOnRedisError() {
        return onRedisError;
    }

    public void setOnRedisError(OnRedisError onRedisError) {
        this.onRedisError = onRedisError;
    }
}
