package io.ratelimit.spring;

import io.ratelimit.Algorithm;
import io.ratelimit.Limiter;
import io.ratelimit.LimiterConfig;
import io.ratelimit.Rate;
import io.ratelimit.RateLimitClient;
import io.ratelimit.RateLimitException;
import java.lang.reflect.Method;
import java.security.Principal;
import java.util.Arrays;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Collectors;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.beans.factory.config.ConfigurableListableBeanFactory;
import org.springframework.context.expression.BeanFactoryResolver;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.expression.EvaluationContext;
import org.springframework.expression.Expression;
import org.springframework.expression.ParseException;
import org.springframework.expression.spel.standard.SpelExpressionParser;
import org.springframework.expression.spel.support.StandardEvaluationContext;
import org.springframework.util.ClassUtils;
import org.springframework.util.ReflectionUtils;
import org.springframework.web.bind.annotation.RequestMapping;

/**
 * The {@link Guard} of every {@link RateLimited} handler method, built when the
 * application starts: a rate that does not parse, permits the limiter cannot
 * hold or a key that is not SpEL fail start-up with a message naming the
 * method, instead of failing every request. {@code ratelimit.limits.<name>.*}
 * adds to the annotation of that name (a lease); a name there that no
 * handler has fails start-up too (a typo would silently do nothing).
 */
public class RateLimitGuards implements SmartInitializingSingleton {
    private final RateLimitClient client;
    private final BeanFactory beanFactory;
    private final BeanFactoryResolver beanResolver;
    private final SpelExpressionParser parser = new SpelExpressionParser();
    private final Map<String, RateLimitProperties.Limit> limits;
    // Optional.empty(): looked at, not limited (so unannotated handlers cost one map lookup)
    private final Map<Handler, Optional<Guard>> guards = new ConcurrentHashMap<>();

    /** A method as a handler of one class: two controllers inheriting it have a guard each. */
    private record Handler(Class<?> type, Method method) {}

    public RateLimitGuards(RateLimitClient client, BeanFactory beanFactory) {
        this(client, beanFactory, Map.of());
    }

    /** limits: {@code ratelimit.limits}, by limiter name. */
    public RateLimitGuards(RateLimitClient client, BeanFactory beanFactory,
            Map<String, RateLimitProperties.Limit> limits) {
        this.client = client;
        this.limits = Map.copyOf(limits);
        this.beanFactory = beanFactory;
        this.beanResolver = beanFactory == null ? null : new BeanFactoryResolver(beanFactory);
    }

    /** The guard of a handler method, or null when it is not rate limited. */
    public Guard find(Method method, Class<?> beanType) {
        Handler h = new Handler(ClassUtils.getUserClass(beanType), method);
        Optional<Guard> g = guards.get(h);
        if (g == null) {   // a handler of a bean made after start-up (lazy, prototype)
            g = guards.computeIfAbsent(h, k -> Optional.ofNullable(build(k.method, k.type)));
        }
        return g.orElse(null);
    }

    /** Checks every annotated method of every bean once all singletons exist. */
    @Override
    public void afterSingletonsInstantiated() {
        if (!(beanFactory instanceof ConfigurableListableBeanFactory factory)) {
            return;
        }
        for (String name : factory.getBeanDefinitionNames()) {
            Class<?> type = factory.getType(name, false);
            if (type != null) {
                scan(ClassUtils.getUserClass(type));
            }
        }
        Set<String> names = guards.values().stream().flatMap(Optional::stream).map(g -> g.limiter().name())
                .collect(Collectors.toCollection(TreeSet::new));
        for (String name : limits.keySet()) {
            if (!names.contains(name)) {
                throw new IllegalStateException("ratelimit.limits." + name + ": no @RateLimited handler has the"
                        + " limiter name \"" + name + "\" (names: " + names + ")");
            }
        }
    }

    private void scan(Class<?> type) {
        boolean onClass = AnnotatedElementUtils.hasAnnotation(type, RateLimited.class);
        ReflectionUtils.doWithMethods(type, m -> {
            // on a class it covers its request handlers; on a method it must be valid wherever it is
            if (AnnotatedElementUtils.hasAnnotation(m, RateLimited.class)
                    || onClass && AnnotatedElementUtils.hasAnnotation(m, RequestMapping.class)) {
                guards.computeIfAbsent(new Handler(type, m), k -> Optional.ofNullable(build(m, type)));
            }
        }, ReflectionUtils.USER_DECLARED_METHODS);
    }

    private Guard build(Method method, Class<?> beanType) {
        RateLimited a = AnnotatedElementUtils.findMergedAnnotation(method, RateLimited.class);
        if (a == null) {
            a = AnnotatedElementUtils.findMergedAnnotation(beanType, RateLimited.class);
        }
        if (a == null) {
            return null;
        }
        String where = ClassUtils.getQualifiedMethodName(method, beanType) + Arrays.stream(method.getParameterTypes())
                .map(Class::getSimpleName).collect(Collectors.joining(", ", "(", ")"));
        String name = a.name().isEmpty() ? beanType.getSimpleName() + "." + method.getName() : a.name();
        String spec = "rate \"" + a.rate() + "\" (algorithm " + a.algorithm() + ", burst " + a.burst() + ", name \""
                + name + "\"): ";
        Limiter limiter;
        LimiterConfig config;
        try {
            Rate rate = Rate.parse(a.rate());
            config = LimiterConfig.of(a.algorithm(), a.burst() != 0 ? rate.withBurst(a.burst()) : rate);
        } catch (RateLimitException e) {
            throw invalid(where, spec + e.getMessage(), e);
        }
        RateLimitProperties.Limit limit = limits.get(name);
        if (limit != null && limit.getLease() != null) {
            try {
                config = config.lease(limit.getLease());
            } catch (RateLimitException e) {
                throw invalid(where, "ratelimit.limits." + name + ".lease: " + e.getMessage(), e);
            }
        }
        try {
            limiter = client.limiter(name, config);
        } catch (RateLimitException e) {
            throw invalid(where, spec + e.getMessage(), e);
        }
        long capacity = capacity(limiter);
        if (a.permits() < 1 || a.permits() > capacity) {
            throw invalid(where, "permits = " + a.permits() + " but the limiter holds 1.." + capacity
                    + " (rate \"" + a.rate() + "\"" + (a.burst() != 0 ? ", burst " + a.burst() : "")
                    + "): no request could ever pass", null);
        }
        Expression key;
        try {
            key = parser.parseExpression(a.key());
        } catch (ParseException e) {
            throw invalid(where, "key \"" + a.key() + "\" is not a SpEL expression: " + e.getMessage(), e);
        }
        return new Guard(limiter, key, a.permits(), where);
    }

    /** The most permits one call can take (docs/semantics.md: 1 <= permits <= capacity). */
    static long capacity(Limiter limiter) {
        Rate rate = limiter.rate();
        boolean burstable = limiter.algorithm() == Algorithm.TOKEN_BUCKET || limiter.algorithm() == Algorithm.GCRA;
        return burstable && rate.burst() != 0 ? rate.burst() : rate.limit();
    }

    private static IllegalStateException invalid(String where, String problem, Exception cause) {
        return new IllegalStateException("@RateLimited on " + where + ": " + problem, cause);
    }

    /**
     * The SpEL variables of a key: {@code #request} (the stack's request
     * object), {@code #pathVariables}, {@code #principal} (null when
     * anonymous), {@code #remoteAddress} (the client's IP address); beans as
     * {@code @name}.
     */
    public EvaluationContext context(Object request, Map<String, ?> pathVariables, Principal principal,
            String remoteAddress) {
        StandardEvaluationContext ctx = new StandardEvaluationContext();
        ctx.setVariable("request", request);
        ctx.setVariable("pathVariables", pathVariables != null ? pathVariables : Map.of());
        ctx.setVariable("principal", principal);
        ctx.setVariable("remoteAddress", remoteAddress);
        if (beanResolver != null) {
            ctx.setBeanResolver(beanResolver);
        }
        return ctx;
    }
}
