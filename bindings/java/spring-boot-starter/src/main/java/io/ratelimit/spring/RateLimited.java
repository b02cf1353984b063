package io.ratelimit.spring;

import io.ratelimit.Algorithm;
import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Rate-limits a controller method (or every handler of a controller class).
 * When denied the request is answered 429 Too Many Requests with a
 * Retry-After header (whole seconds, rounded up) and the handler does not run.
 *
 * <pre>
 * &#64;RateLimited(name = "sms", rate = "10/minute", key = "#request.getHeader('X-User')")
 * </pre>
 */
@Target({ElementType.METHOD, ElementType.TYPE})
@Retention(RetentionPolicy.RUNTIME)
@Documented
public @interface RateLimited {
    /** Limiter name; defaults to {@code SimpleClassName.method}. */
    String name() default "";

    /** A rate the core parses: "10/minute", "5 per 30 seconds", "3/500ms"... */
    String rate();

    Algorithm algorithm() default Algorithm.GCRA;

    /** token_bucket / gcra capacity; 0 = the limit. */
    long burst() default 0;

    /**
     * SpEL for the limited entity. Variables: {@code #request}
     * (HttpServletRequest), {@code #pathVariables} (Map), {@code #principal}
     * (may be null); beans as {@code @name}. A null or empty value counts as
     * the shared id "anonymous".
     */
    String key() default "#remoteAddress";

    /** Permits each request takes. */
    long permits() default 1;
}
