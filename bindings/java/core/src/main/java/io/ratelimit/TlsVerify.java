package io.ratelimit;

/** Certificate checks for TLS ({@code rediss://}); {@code rl_tls_verify}. */
public enum TlsVerify {
    /** The URL's {@code ssl_cert_reqs}, else {@link #REQUIRED}. */
    DEFAULT,
    /** The server's chain must lead to a trusted CA, and its certificate must name the host. */
    REQUIRED,
    /** Encrypt only, check nothing: anyone in the middle can read along. */
    NONE;

    /** The C value (RL_TLS_VERIFY_DEFAULT = 0, REQUIRED = 1, NONE = 2). */
    int code() {
        return ordinal();
    }
}
