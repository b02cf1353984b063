package io.ratelimit.spring;

import io.ratelimit.Rate;
import io.ratelimit.RedisFailureException;
import io.ratelimit.Result;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.http.HttpStatus;

/**
 * What a limited handler answers, the same for Spring MVC and WebFlux and
 * the same headers as the Python integrations (docs/frameworks.md, "Headers"):
 * RateLimit-Policy and RateLimit (IETF httpapi ratelimit-headers draft),
 * RateLimit-Limit / -Remaining / -Reset, and on a 429 Retry-After in whole
 * seconds rounded up. Also logs Redis outages: one WARN when decisions start
 * failing, one INFO when they work again.
 */
public class RateLimitResponses {
    private static final Logger log = LoggerFactory.getLogger(RateLimitResponses.class);
    static final int TOO_MANY_REQUESTS = 429;

    private final RateLimitProperties.Web web;
    private final boolean problemDetails;
    private final AtomicBoolean outage = new AtomicBoolean();

    /** A response to send instead of running the handler. */
    public record Rejection(int status, String contentType, byte[] body) {}

    public RateLimitResponses(RateLimitProperties.Web web, boolean problemDetails) {
        this.web = web;
        this.problemDetails = problemDetails;
    }

    /**
     * The headers of a decision, in order (none but Retry-After when the
     * client's on-redis-error policy decided without Redis: its numbers are
     * not the limiter's). A policy decision starts an outage window, a Redis
     * one ends it.
     */
    public Map<String, String> decided(Guard guard, Result r) {
        Map<String, String> h = new LinkedHashMap<>();
        if (r.fallback()) {
            outageStarted(guard, "deciding by the on-redis-error policy (" + (r.allowed() ? "allow" : "deny") + ")");
        } else {
            succeeded();
            if (web.isHeaders()) {
                String policy = sfString(guard.limiter().name());
                long remaining = Math.max(0, r.remaining());
                long reset = seconds(r.resetAfter());
                Rate rate = guard.limiter().rate();   // q and w: the rate; RateLimit-Limit: the capacity
                h.put("RateLimit-Policy", policy + ";q=" + rate.limit() + ";w=" + seconds(rate.period()));
                h.put("RateLimit", policy + ";r=" + remaining + ";t=" + reset);
                h.put("RateLimit-Limit", String.valueOf(r.limit()));
                h.put("RateLimit-Remaining", String.valueOf(remaining));
                h.put("RateLimit-Reset", String.valueOf(reset));
            }
        }
        if (!r.allowed()) {
            h.put("Retry-After", String.valueOf(Math.max(1, seconds(r.retryAfter()))));
        }
        return h;
    }

    /** The 429 for a denied decision. */
    public Rejection denied(Guard guard, Result r, String path) {
        return body(TOO_MANY_REQUESTS, "Too Many Requests", "rate limit '" + guard.limiter().name()
                + "' exceeded; retry after " + Math.max(1, seconds(r.retryAfter())) + " s", path);
    }

    /**
     * The answer when Redis failed a decision (on-redis-error raise): the
     * configured status (503) and one WARN per outage. Anything else (an id
     * the core refuses, a bug) is left to the application's error handling.
     */
    public Rejection failed(RedisFailureException e, Guard guard, String path) {
        outageStarted(guard, "answering " + web.getRedisErrorStatus() + ": " + e.status() + ": " + e.getMessage());
        HttpStatus status = HttpStatus.resolve(web.getRedisErrorStatus());
        String title = status != null ? status.getReasonPhrase() : "Rate limit unavailable";
        return body(web.getRedisErrorStatus(), title, "rate limit '" + guard.limiter().name()
                + "' could not be checked", path);
    }

    private void outageStarted(Guard guard, String what) {
        if (!outage.get() && outage.compareAndSet(false, true)) {
            log.warn("Redis unreachable for rate limiting, until it answers again (first at {}): {}", guard.where(), what);
        }
    }

    /** A decision Redis made: ends an outage window. */
    private void succeeded() {
        if (outage.get() && outage.compareAndSet(true, false)) {
            log.info("Redis reachable again for rate limiting");
        }
    }

    private Rejection body(int status, String title, String detail, String path) {
        if (!problemDetails) {
            return new Rejection(status, "text/plain;charset=UTF-8", title.getBytes(StandardCharsets.UTF_8));
        }
        String json = "{\"type\":\"about:blank\",\"title\":" + json(title) + ",\"status\":" + status + ",\"detail\":"
                + json(detail) + ",\"instance\":" + json(path) + "}";
        return new Rejection(status, "application/problem+json", json.getBytes(StandardCharsets.UTF_8));
    }

    /** Whole seconds, rounded up. */
    static long seconds(Duration d) {
        long ms = d.toMillis();
        return ms / 1000 + (ms % 1000 != 0 ? 1 : 0);
    }

    /** An RFC 8941 sf-string: printable ASCII only, so other characters become '?'. */
    static String sfString(String s) {
        StringBuilder b = new StringBuilder(s.length() + 2).append('"');
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else {
                b.append(c >= 0x20 && c <= 0x7e ? c : '?');
            }
        }
        return b.append('"').toString();
    }

    private static String json(String s) {
        StringBuilder b = new StringBuilder(s.length() + 2).append('"');
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }
}
