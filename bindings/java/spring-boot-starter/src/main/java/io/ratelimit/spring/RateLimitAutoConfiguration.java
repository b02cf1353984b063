package io.ratelimit.spring;

import io.ratelimit.RateLimitClient;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnWebApplication;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.web.servlet.HandlerInterceptor;
import org.springframework.web.servlet.config.annotation.InterceptorRegistry;
import org.springframework.web.servlet.config.annotation.WebMvcConfigurer;

/** A shared {@link RateLimitClient} from {@code ratelimit.*}, and {@link RateLimited} for Spring MVC. */
@AutoConfiguration
@ConditionalOnClass(RateLimitClient.class)
@ConditionalOnProperty(prefix = "ratelimit", name = "enabled", havingValue = "true", matchIfMissing = true)
@EnableConfigurationProperties(RateLimitProperties.class)
public class RateLimitAutoConfiguration {

    @Bean(destroyMethod = "close")
    @ConditionalOnMissingBean
    public RateLimitClient rateLimitClient(RateLimitProperties properties) {
        return RateLimitClient.connect(properties.getUrl(), properties.toClientOptions());
    }

    @Configuration(proxyBeanMethods = false)
    @ConditionalOnWebApplication(type = ConditionalOnWebApplication.Type.SERVLET)
    @ConditionalOnClass(HandlerInterceptor.class)
    static class WebMvc {
        @Bean
        @ConditionalOnMissingBean
        RateLimitInterceptor rateLimitInterceptor(RateLimitClient client, BeanFactory beanFactory) {
            return new RateLimitInterceptor(client, beanFactory);
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
}
