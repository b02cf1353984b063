package io.ratelimit.spring;

import io.ratelimit.OnRedisError;
import io.ratelimit.RateLimitClient;
import io.ratelimit.RedisFailureException;

/**
 * The client could not reach Redis while the application started, under
 * on-redis-error raise: {@link RateLimitFailureAnalyzer} turns it into one
 * message naming the URL (password masked), the cause and the setting.
 */
public class RedisUnreachableAtStartupException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final String url;
    private final OnRedisError onRedisError;

    public RedisUnreachableAtStartupException(String url, OnRedisError onRedisError, RedisFailureException cause) {
        super("ratelimit could not reach Redis at " + masked(url) + ": " + cause.getMessage(), cause);
        this.url = masked(url);
        this.onRedisError = onRedisError;
    }

    /** The URL as the core's messages quote it: password and secret options masked. */
    public String url() {
        return url;
    }

    /** ratelimit.on-redis-error as set; null: not set (the core's default, raise). */
    public OnRedisError onRedisError() {
        return onRedisError;
    }

    static String masked(String url) {
        return url == null ? null : RateLimitClient.redactUrl(url);
    }
}
