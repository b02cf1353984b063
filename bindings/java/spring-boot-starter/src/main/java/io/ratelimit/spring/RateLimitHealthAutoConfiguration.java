package io.ratelimit.spring;

import io.ratelimit.RateLimitClient;
import org.springframework.boot.actuate.autoconfigure.health.ConditionalOnEnabledHealthIndicator;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnWebApplication;
import org.springframework.boot.autoconfigure.condition.NoneNestedConditions;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Conditional;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.ConfigurationCondition;

/**
 * The {@code rateLimit} health contributor on Spring Boot 3 (Actuator's
 * {@code org.springframework.boot.actuate.health}); Spring Boot 4 moved that
 * API, and {@link io.ratelimit.spring.boot4.RateLimitHealthAutoConfiguration}
 * is its twin there. Each is conditional on its own line's class.
 */
@AutoConfiguration(after = RateLimitAutoConfiguration.class)
@ConditionalOnClass(name = "org.springframework.boot.actuate.health.HealthIndicator")
@ConditionalOnBean(RateLimitClient.class)
@ConditionalOnEnabledHealthIndicator("ratelimit")
public class RateLimitHealthAutoConfiguration {

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnWebApplication(type = ConditionalOnWebApplication.Type.REACTIVE)
    @ConditionalOnClass(name = "reactor.core.publisher.Mono")
    static class Reactive {
        @Bean
        @ConditionalOnMissingBean(name = "rateLimitHealthIndicator")
        ReactiveRateLimitHealthIndicator rateLimitHealthIndicator(RateLimitClient client) {
            return new ReactiveRateLimitHealthIndicator(client);
        }
    }

    @Configuration(proxyBeanMethods = false)
    @Conditional(NotReactive.class)
    static class Blocking {
        @Bean
        @ConditionalOnMissingBean(name = "rateLimitHealthIndicator")
        RateLimitHealthIndicator rateLimitHealthIndicator(RateLimitClient client) {
            return new RateLimitHealthIndicator(client);
        }
    }

    static class NotReactive extends NoneNestedConditions {
        NotReactive() {
            super(ConfigurationCondition.ConfigurationPhase.PARSE_CONFIGURATION);
        }

        @ConditionalOnWebApplication(type = ConditionalOnWebApplication.Type.REACTIVE)
        static class Reactive {}
    }
}
