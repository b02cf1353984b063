package io.ratelimit.spring;

import org.springframework.boot.diagnostics.AbstractFailureAnalyzer;
import org.springframework.boot.diagnostics.FailureAnalysis;

/**
 * Start-up with Redis unreachable and on-redis-error raise (the default): one
 * "APPLICATION FAILED TO START" report naming the URL, the cause and the
 * setting, instead of a long stack trace with the cause last. Registered in
 * META-INF/spring.factories.
 */
public class RateLimitFailureAnalyzer extends AbstractFailureAnalyzer<RedisUnreachableAtStartupException> {
    @Override
    protected FailureAnalysis analyze(Throwable rootFailure, RedisUnreachableAtStartupException failure) {
        Throwable cause = failure.getCause();
        String description = "ratelimit could not reach Redis at " + failure.url() + " while the application started:\n"
                + "    " + cause.getClass().getSimpleName() + ": " + cause.getMessage();
        String setting = failure.onRedisError() == null ? "is not set (raise, the default)"
                : "is " + failure.onRedisError().name().toLowerCase(java.util.Locale.ROOT);
        String action = "Start Redis, or correct ratelimit.url. ratelimit.on-redis-error " + setting
                + ": set it to allow (requests pass unlimited) or deny (requests get 429) to start without Redis;"
                + " the client then reconnects in the background and limits apply once Redis answers.";
        return new FailureAnalysis(description, action, failure);
    }
}
