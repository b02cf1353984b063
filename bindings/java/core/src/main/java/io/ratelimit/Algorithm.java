package io.ratelimit;

/** The rate-limiting algorithms; the order matches the C enum {@code rl_algorithm}. */
public enum Algorithm {
    FIXED_WINDOW,
    SLIDING_LOG,
    SLIDING_WINDOW,
    TOKEN_BUCKET,
    LEAKY_BUCKET,
    GCRA;

    int code() {
        return ordinal();
    }

    /** The core's name: "fixed_window", "gcra"... (used in keys). */
    public String wireName() {
        return Native.algorithmName(code());
    }

    /** Parses the core's name ("token_bucket"); throws InvalidArgumentException otherwise. */
    public static Algorithm fromName(String name) {
        return values()[Native.algorithmParse(Native.name("algorithm", name))];
    }
}
