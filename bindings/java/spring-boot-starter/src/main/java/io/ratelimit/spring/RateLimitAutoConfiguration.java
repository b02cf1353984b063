package io.ratelimit.spring;

import io.micrometer.core.instrument.binder.MeterBinder;
import io.ratelimit.RateLimitClient;
import io.ratelimit.RedisFailureException;
import io.ratelimit.micrometer.RateLimitMetrics;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnWebApplication;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.env.Environment;
import org.springframework.web.reactive.HandlerAdapter;
import org.springframework.web.reactive.result.method.annotation.RequestMappingHandlerAdapter;
import org.springframework.web.servlet.HandlerInterceptor;
import org.springframework.web.servlet.config.annotation.InterceptorRegistry;
import org.springframework.web.servlet.config.annotation.WebMvcConfigurer;
import reactor.core.scheduler.Schedulers;

/**
 * A shared {@link RateLimitClient} from {@code ratelimit.*}; {@link RateLimited}
 * for Spring MVC (an interceptor) and Spring WebFlux (a handler adapter on the
 * asynchronous core); Micrometer metrics when Micrometer is present.
 */
@AutoConfiguration
@ConditionalOnClass(RateLimitClient.class)
@ConditionalOnProperty(prefix = "ratelimit", name = "enabled", havingValue = "true", matchIfMissing = true)
@EnableConfigurationProperties(RateLimitProperties.class)
public class RateLimitAutoConfiguration {

    @Bean(destroyMethod = "close")
    @ConditionalOnMissingBean
    public RateLimitClient rateLimitClient(RateLimitProperties properties) {
        try {
            return RateLimitClient.connect(properties.getUrl(), properties.toClientOptions());
        } catch (RedisFailureException e) {
            // one start-up report (RateLimitFailureAnalyzer), not a stack trace with the cause last
            throw new RedisUnreachableAtStartupException(properties.getUrl(), properties.getOnRedisError(), e);
        }
    }

    @Bean
    @ConditionalOnMissingBean
    @ConditionalOnWebApplication
    @ConditionalOnClass(name = "org.springframework.web.bind.annotation.RequestMapping")
    public RateLimitGuards rateLimitGuards(RateLimitClient client, BeanFactory beanFactory,
            RateLimitProperties properties) {
        return new RateLimitGuards(client, beanFactory, properties.getLimits());
    }

    /** Problem details when ratelimit.web.problem-details says so, else when the stack's own property does. */
    static boolean problemDetails(RateLimitProperties properties, Environment env, String stackProperty) {
        Boolean own = properties.getWeb().getProblemDetails();
        return own != null ? own : env.getProperty(stackProperty, Boolean.class, false);
    }

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnWebApplication(type = ConditionalOnWebApplication.Type.SERVLET)
    @ConditionalOnClass(HandlerInterceptor.class)
    static class WebMvc {
        @Bean
        @ConditionalOnMissingBean
        RateLimitInterceptor rateLimitInterceptor(RateLimitGuards guards, RateLimitProperties properties,
                Environment env) {
            return new RateLimitInterceptor(guards, new RateLimitResponses(properties.getWeb(),
                    problemDetails(properties, env, "spring.mvc.problemdetails.enabled")));
        }

        @Bean
        WebMvcConfigurer rateLimitWebMvcConfigurer(RateLimitInterceptor interceptor) {
            return new WebMvcConfigurer() {
                @Override
                public void addInterceptors(InterceptorRegistry registry) {
                    registry.addInterceptor(interceptor);
                }
            };
        }
    }

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnWebApplication(type = ConditionalOnWebApplication.Type.REACTIVE)
    @ConditionalOnClass({HandlerAdapter.class, Schedulers.class})
    static class WebFlux {
        @Bean
        @ConditionalOnMissingBean
        RateLimitHandlerAdapter rateLimitHandlerAdapter(RateLimitGuards guards, RateLimitProperties properties,
                Environment env, RequestMappingHandlerAdapter requestMappingHandlerAdapter) {
            return new RateLimitHandlerAdapter(guards, new RateLimitResponses(properties.getWeb(),
                    problemDetails(properties, env, "spring.webflux.problemdetails.enabled")),
                    requestMappingHandlerAdapter, Schedulers.parallel());
        }
    }

    /** The core's Micrometer binder for the client; Spring Boot binds it to every MeterRegistry. */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass({MeterBinder.class, RateLimitMetrics.class})
    static class Metrics {
        @Bean
        @ConditionalOnMissingBean
        RateLimitMetrics rateLimitMetrics(RateLimitClient client) {
            return new RateLimitMetrics(client);
        }
    }
}
