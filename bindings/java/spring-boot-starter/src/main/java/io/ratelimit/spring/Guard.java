package io.ratelimit.spring;

import io.ratelimit.Limiter;
import org.springframework.expression.EvaluationContext;
import org.springframework.expression.Expression;

/**
 * What one {@link RateLimited} handler method asks for: its limiter, the
 * parsed key expression and the permits a request takes.
 *
 * @param where the method, for messages ({@code com.acme.Api.send(String)})
 */
public record Guard(Limiter limiter, Expression key, long permits, String where) {

    /** The limited entity for one request; null or empty counts as the shared id "anonymous". */
    public String keyFor(EvaluationContext context) {
        Object value = key.getValue(context);
        String id = value == null ? "" : value.toString();
        return id.isEmpty() ? "anonymous" : id;
    }
}
