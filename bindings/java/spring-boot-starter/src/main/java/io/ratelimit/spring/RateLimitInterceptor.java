package io.ratelimit.spring;

import io.ratelimit.Limiter;
import io.ratelimit.Rate;
import io.ratelimit.RateLimitClient;
import io.ratelimit.Result;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.lang.reflect.Method;
import java.util.Collections;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.context.expression.BeanFactoryResolver;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.expression.Expression;
import org.springframework.expression.spel.standard.SpelExpressionParser;
import org.springframework.expression.spel.support.StandardEvaluationContext;
import org.springframework.web.method.HandlerMethod;
import org.springframework.web.servlet.HandlerInterceptor;
import org.springframework.web.servlet.HandlerMapping;

/** Applies {@link RateLimited} to handler methods: 429 + Retry-After when denied. */
public class RateLimitInterceptor implements HandlerInterceptor {
    static final int TOO_MANY_REQUESTS = 429;

    private final RateLimitClient client;
    private final BeanFactory beanFactory;
    private final SpelExpressionParser parser = new SpelExpressionParser();
    // per handler method: parsed once (a bad rate or key fails the first request loudly)
    private final Map<Method, Guard> guards = new ConcurrentHashMap<>();

    private record Guard(Limiter limiter, Expression key, long permits) {}

    private static final Guard NONE = new Guard(null, null, 0);

    public RateLimitInterceptor(RateLimitClient client, BeanFactory beanFactory) {
        this.client = client;
        this.beanFactory = beanFactory;
    }

    @Override
    public boolean preHandle(HttpServletRequest request, HttpServletResponse response, Object handler)
            throws Exception {
        if (!(handler instanceof HandlerMethod hm)) {
            return true;
        }
        Guard guard = guards.computeIfAbsent(hm.getMethod(), m -> guardFor(hm));
        if (guard == NONE) {
            return true;
        }
        Result r = guard.limiter.acquire(key(guard, request), guard.permits);
        response.setHeader("X-RateLimit-Limit", String.valueOf(r.limit()));
        response.setHeader("X-RateLimit-Remaining", String.valueOf(Math.max(0, r.remaining())));
        if (r.allowed()) {
            return true;
        }
        long ms = r.retryAfter().toMillis();
        response.setHeader("Retry-After", String.valueOf(Math.max(1, (ms + 999) / 1000)));
        response.setStatus(TOO_MANY_REQUESTS);
        response.setContentType("text/plain;charset=UTF-8");
        response.getWriter().write("Too Many Requests");
        return false;
    }

    private Guard guardFor(HandlerMethod hm) {
        RateLimited a = AnnotatedElementUtils.findMergedAnnotation(hm.getMethod(), RateLimited.class);
        if (a == null) {
            a = AnnotatedElementUtils.findMergedAnnotation(hm.getBeanType(), RateLimited.class);
        }
        if (a == null) {
            return NONE;
        }
        String name = a.name().isEmpty() ? hm.getBeanType().getSimpleName() + "." + hm.getMethod().getName() : a.name();
        Rate rate = Rate.parse(a.rate());
        if (a.burst() != 0) {
            rate = rate.withBurst(a.burst());
        }
        return new Guard(client.limiter(name, rate, a.algorithm()), parser.parseExpression(a.key()), a.permits());
    }

    private String key(Guard guard, HttpServletRequest request) {
        StandardEvaluationContext ctx = new StandardEvaluationContext();
        ctx.setVariable("request", request);
        Object vars = request.getAttribute(HandlerMapping.URI_TEMPLATE_VARIABLES_ATTRIBUTE);
        ctx.setVariable("pathVariables", vars != null ? vars : Collections.emptyMap());
        ctx.setVariable("principal", request.getUserPrincipal());
        if (beanFactory != null) {
            ctx.setBeanResolver(new BeanFactoryResolver(beanFactory));
        }
        Object value = guard.key.getValue(ctx);
        String key = value == null ? "" : value.toString();
        return key.isEmpty() ? "anonymous" : key;
    }
}
