package io.ratelimit.spring;

import io.ratelimit.ClientOptions;
import io.ratelimit.OnRedisError;
import io.ratelimit.TlsVerify;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import org.springframework.boot.context.properties.ConfigurationProperties;

/**
 * {@code ratelimit.*} in application.properties. Unset values keep the C
 * core's defaults (they are not repeated here), except the URL.
 */
@ConfigurationProperties(prefix = "ratelimit")
public class RateLimitProperties {
    /** Set to false to skip the auto-configuration. */
    private boolean enabled = true;
    /**
     * redis://[[user]:password@]host[:port][/db], rediss://...[?ssl_ca_certs=...] (TLS),
     * unix:///path.sock[?db=N], redis+sentinel://host:port[,host:port...]/service[/db]
     * or redis+cluster://host:port[,host:port...] (rediss+sentinel://, rediss+cluster:// for TLS).
     */
    private String url = "redis://127.0.0.1:6379";
    /** Key prefix. */
    private String prefix;
    /** Connect and command timeout (both), e.g. 500ms. */
    private Duration timeout;
    /** Connect timeout (overrides timeout), e.g. 200ms; default: the core's (1s). */
    private Duration connectTimeout;
    /** Command timeout (overrides timeout), e.g. 200ms; default: the core's (1s). */
    private Duration commandTimeout;
    /** Connections shared by all threads. */
    private Integer poolSize;
    /** raise, allow (fail open) or deny (fail closed) when Redis is unreachable. */
    private OnRedisError onRedisError;
    /** Longest pause between reconnect attempts while Redis is unreachable, e.g. 5s. */
    private Duration reconnectMax;
    /** TLS for rediss:// URLs; each overrides the URL's ssl_* option of the same meaning. */
    private final Tls tls = new Tls();
    /** How @RateLimited handlers answer (Spring MVC and WebFlux). */
    private final Web web = new Web();
    /**
     * Per limiter name (a @RateLimited name, or SimpleClassName.method), e.g.
     * ratelimit.limits.api.lease=50ms.
     */
    private final Map<String, Limit> limits = new LinkedHashMap<>();

    /** {@code ratelimit.limits.<name>.*}: what one @RateLimited limiter adds to its annotation. */
    public static class Limit {
        /**
         * Decide from a lease of permits taken from Redis in blocks valid this long (1ms to 1h), e.g. 50ms:
         * far fewer round trips on a hot key, the limit still exact. Unset: every request asks Redis.
         */
        private Duration lease;

        public Duration getLease() {
            return lease;
        }

        public void setLease(Duration lease) {
            this.lease = lease;
        }
    }

    /** {@code ratelimit.web.*}. */
    public static class Web {
        /**
         * HTTP status of a request whose decision failed because Redis could not be reached
         * (on-redis-error=raise); one WARN line is logged per outage, not one per request.
         */
        private int redisErrorStatus = 503;
        /** Send RateLimit-Policy, RateLimit, RateLimit-Limit, -Remaining and -Reset on limited responses. */
        private boolean headers = true;
        /**
         * Answer 429 (and redis-error-status) with an RFC 9457 application/problem+json body; default:
         * spring.mvc.problemdetails.enabled or spring.webflux.problemdetails.enabled.
         */
        private Boolean problemDetails;

        public int getRedisErrorStatus() {
            return redisErrorStatus;
        }

        public void setRedisErrorStatus(int redisErrorStatus) {
            this.redisErrorStatus = redisErrorStatus;
        }

        public boolean isHeaders() {
            return headers;
        }

        public void setHeaders(boolean headers) {
            this.headers = headers;
        }

        public Boolean getProblemDetails() {
            return problemDetails;
        }

        public void setProblemDetails(Boolean problemDetails) {
            this.problemDetails = problemDetails;
        }
    }

    /** {@code ratelimit.tls.*}. */
    public static class Tls {
        /** PEM CA bundle server certificates must chain to (default: the system's trust store). */
        private String caFile;
        /** Client certificate (PEM), for servers with tls-auth-clients. */
        private String certFile;
        /** Its private key (PEM); default: read from cert-file. */
        private String keyFile;
        /** default (the URL's ssl_cert_reqs, else required), required or none. */
        private TlsVerify verify;

        public String getCaFile() {
            return caFile;
        }

        public void setCaFile(String caFile) {
            this.caFile = caFile;
        }

        public String getCertFile() {
            return certFile;
        }

        public void setCertFile(String certFile) {
            this.certFile = certFile;
        }

        public String getKeyFile() {
            return keyFile;
        }

        public void setKeyFile(String keyFile) {
            this.keyFile = keyFile;
        }

        public TlsVerify getVerify() {
            return verify;
        }

        public void setVerify(TlsVerify verify) {
            this.verify = verify;
        }
    }

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
        if (reconnectMax != null) {
            o = o.reconnectMax(reconnectMax);
        }
        if (tls.caFile != null) {
            o = o.tlsCaFile(tls.caFile);
        }
        if (tls.certFile != null) {
            o = o.tlsCertFile(tls.certFile);
        }
        if (tls.keyFile != null) {
            o = o.tlsKeyFile(tls.keyFile);
        }
        if (tls.verify != null) {
            o = o.tlsVerify(tls.verify);
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

    public Duration getReconnectMax() {
        return reconnectMax;
    }

    public void setReconnectMax(Duration reconnectMax) {
        this.reconnectMax = reconnectMax;
    }

    public Tls getTls() {
        return tls;
    }

    public Web getWeb() {
        return web;
    }

    public Map<String, Limit> getLimits() {
        return limits;
    }
}
