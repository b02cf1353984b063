package io.ratelimit.spring.boot4;

import io.ratelimit.RateLimitClient;
import io.ratelimit.spring.RateLimitAutoConfiguration;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnWebApplication;
import org.springframework.boot.autoconfigure.condition.NoneNestedConditions;
import org.springframework.boot.health.autoconfigure.contributor.ConditionalOnEnabledHealthIndicator;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Conditional;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.ConfigurationCondition;

/**
 * The {@code rateLimit} health contributor on Spring Boot 4, whose health API
 * is {@code org.springframework.boot.health.contributor} (spring-boot-health);
 * {@link io.ratelimit.spring.RateLimitHealthAutoConfiguration} is Spring Boot
 * 3's. Each is conditional on its own line's class, so exactly one applies.
 */
@AutoConfiguration(after = RateLimitAutoConfiguration.class)
@ConditionalOnClass(name = "org.springframework.boot.health.contributor.HealthIndicator")
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
