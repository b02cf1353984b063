package io.ratelimit.spring;

import io.ratelimit.RedisFailureException;
import io.ratelimit.Result;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.util.Map;
import org.springframework.web.method.HandlerMethod;
import org.springframework.web.servlet.HandlerInterceptor;
import org.springframework.web.servlet.HandlerMapping;

/**
 * Spring MVC: applies {@link RateLimited} before the handler runs (a blocking
 * decision on the request's thread, as servlet handlers block anyway).
 */
public class RateLimitInterceptor implements HandlerInterceptor {
    private final RateLimitGuards guards;
    private final RateLimitResponses responses;

    public RateLimitInterceptor(RateLimitGuards guards, RateLimitResponses responses) {
        this.guards = guards;
        this.responses = responses;
    }

    @Override
    public boolean preHandle(HttpServletRequest request, HttpServletResponse response, Object handler)
            throws IOException {
        if (!(handler instanceof HandlerMethod hm)) {
            return true;
        }
        Guard guard = guards.find(hm.getMethod(), hm.getBeanType());
        if (guard == null) {
            return true;
        }
        @SuppressWarnings("unchecked")
        Map<String, ?> vars = (Map<String, ?>) request.getAttribute(HandlerMapping.URI_TEMPLATE_VARIABLES_ATTRIBUTE);
        String id = guard.keyFor(guards.context(request, vars, request.getUserPrincipal(), request.getRemoteAddr()));
        Result r;
        try {
            r = guard.limiter().acquire(id, guard.permits());
        } catch (RedisFailureException e) {
            send(response, responses.failed(e, guard, request.getRequestURI()));
            return false;
        }
        responses.decided(guard, r).forEach(response::setHeader);
        if (r.allowed()) {
            return true;
        }
        send(response, responses.denied(guard, r, request.getRequestURI()));
        return false;
    }

    private static void send(HttpServletResponse response, RateLimitResponses.Rejection rejection) throws IOException {
        response.setStatus(rejection.status());
        response.setContentType(rejection.contentType());
        response.setContentLength(rejection.body().length);
        response.getOutputStream().write(rejection.body());
    }
}
