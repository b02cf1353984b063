package io.ratelimit.spring;

import io.ratelimit.RedisFailureException;
import io.ratelimit.Result;
import java.net.InetSocketAddress;
import java.security.Principal;
import java.util.Map;
import java.util.Optional;
import org.springframework.core.Ordered;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpStatusCode;
import org.springframework.http.server.reactive.ServerHttpRequestDecorator;
import org.springframework.http.server.reactive.ServerHttpResponse;
import org.springframework.util.ClassUtils;
import org.springframework.web.method.HandlerMethod;
import org.springframework.web.reactive.HandlerAdapter;
import org.springframework.web.reactive.HandlerMapping;
import org.springframework.web.reactive.HandlerResult;
import org.springframework.web.server.ServerWebExchange;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;
import reactor.netty.Connection;

/**
 * Spring WebFlux: applies {@link RateLimited} to annotated handler methods,
 * then hands the request to the application's own adapter. Placed after
 * handler mapping (so the handler, path variables and principal are known)
 * and before the handler runs; the decision is the core's asynchronous call
 * ({@code acquireAsync}), so no thread waits for Redis, and the request goes
 * on (the handler, or the 429 / 503) never on the client's I/O thread, which
 * must never run application code: on Reactor Netty on its connection's
 * event loop, where WebFlux runs handlers anyway, elsewhere on
 * {@code scheduler}. Errors of the handler still reach the application's
 * {@code @ExceptionHandler}s: the dispatcher asks every adapter that handles
 * errors, whichever adapter ran the handler.
 *
 * <p>Why the event loop: a response Reactor Netty is given off its event
 * loop is flushed by one task of the loop and its exchange ended by a later
 * one, so a keep-alive client may already send its next request in between;
 * Reactor Netty buffers that request, and when the buffered request is
 * answered at once it stops reading the connection (reactor/reactor-netty#4361,
 * in 1.2.18 and 1.3.6): the request after it gets no answer. On the loop the
 * response is written and its exchange ended in one task.
 */
public class RateLimitHandlerAdapter implements HandlerAdapter, Ordered {
    private final RateLimitGuards guards;
    private final RateLimitResponses responses;
    private final HandlerAdapter delegate;
    private final Scheduler scheduler;

    public RateLimitHandlerAdapter(RateLimitGuards guards, RateLimitResponses responses, HandlerAdapter delegate,
            Scheduler scheduler) {
        this.guards = guards;
        this.responses = responses;
        this.delegate = delegate;
        this.scheduler = scheduler;
    }

    @Override
    public int getOrder() {
        return Ordered.HIGHEST_PRECEDENCE + 100;
    }

    @Override
    public boolean supports(Object handler) {
        return handler instanceof HandlerMethod hm && guards.find(hm.getMethod(), hm.getBeanType()) != null
                && delegate.supports(handler);
    }

    @Override
    public Mono<HandlerResult> handle(ServerWebExchange exchange, Object handler) {
        HandlerMethod hm = (HandlerMethod) handler;
        Guard guard = guards.find(hm.getMethod(), hm.getBeanType());
        String path = exchange.getRequest().getPath().value();
        return exchange.getPrincipal().map(Optional::of).defaultIfEmpty(Optional.empty())
                .flatMap(principal -> Mono.fromFuture(
                        guard.limiter().acquireAsync(key(guard, exchange, principal.orElse(null)), guard.permits())))
                .publishOn(continuation(exchange))
                .onErrorResume(RedisFailureException.class,
                        e -> send(exchange.getResponse(), responses.failed(e, guard, path)).then(Mono.empty()))
                .flatMap(r -> decided(exchange, handler, guard, r, path));
    }

    private Mono<HandlerResult> decided(ServerWebExchange exchange, Object handler, Guard guard, Result r,
            String path) {
        HttpHeaders headers = exchange.getResponse().getHeaders();
        responses.decided(guard, r).forEach(headers::set);
        if (r.allowed()) {
            return delegate.handle(exchange, handler);
        }
        return send(exchange.getResponse(), responses.denied(guard, r, path)).then(Mono.empty());
    }

    /** Where the request goes on once decided (see the class comment). */
    private Scheduler continuation(ServerWebExchange exchange) {
        Scheduler loop = NETTY ? NettyLoop.of(exchange) : null;
        return loop != null ? loop : scheduler;
    }

    private static final boolean NETTY = ClassUtils.isPresent("reactor.netty.Connection",
            RateLimitHandlerAdapter.class.getClassLoader());

    /** Loaded only with Reactor Netty present. */
    private static final class NettyLoop {
        static Scheduler of(ServerWebExchange exchange) {
            Object request = ServerHttpRequestDecorator.getNativeRequest(exchange.getRequest());
            // publishOn always posts a task, on the loop too: never answered within Netty's dispatch
            return request instanceof Connection c ? Schedulers.fromExecutor(c.channel().eventLoop()) : null;
        }
    }

    private String key(Guard guard, ServerWebExchange exchange, Principal principal) {
        Map<String, ?> vars = exchange.getAttribute(HandlerMapping.URI_TEMPLATE_VARIABLES_ATTRIBUTE);
        InetSocketAddress remote = exchange.getRequest().getRemoteAddress();
        String address = remote == null ? null
                : remote.getAddress() != null ? remote.getAddress().getHostAddress() : remote.getHostString();
        return guard.keyFor(guards.context(exchange.getRequest(), vars, principal, address));
    }

    private static Mono<Void> send(ServerHttpResponse response, RateLimitResponses.Rejection rejection) {
        response.setStatusCode(HttpStatusCode.valueOf(rejection.status()));
        response.getHeaders().set(HttpHeaders.CONTENT_TYPE, rejection.contentType());
        response.getHeaders().setContentLength(rejection.body().length);
        DataBuffer body = response.bufferFactory().wrap(rejection.body());
        return response.writeWith(Mono.just(body));
    }
}
