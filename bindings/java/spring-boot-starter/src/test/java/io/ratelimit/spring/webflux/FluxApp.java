package io.ratelimit.spring.webflux;

import io.ratelimit.Algorithm;
import io.ratelimit.spring.RateLimited;
import io.ratelimit.spring.SharedHandlers;
import java.security.Principal;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import io.ratelimit.spring.BootLine;
import org.springframework.beans.factory.support.BeanDefinitionRegistry;
import org.springframework.beans.factory.support.RootBeanDefinition;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.context.annotation.ImportBeanDefinitionRegistrar;
import org.springframework.core.type.AnnotationMetadata;
import org.springframework.http.server.reactive.ServerHttpRequest;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.server.WebFilter;
import reactor.core.publisher.Mono;

/** The WebFlux twin of MvcApp: the same paths and annotations, reactive types. */
@SpringBootApplication
@Import(FluxApp.Netty.class)
public class FluxApp {

    /**
     * Netty, as a WebFlux app has it (the test classpath also has Tomcat, for
     * the MVC app, which Boot would pick); its factory's package differs by
     * Boot line, so it is registered by class.
     */
    static class Netty implements ImportBeanDefinitionRegistrar {
        @Override
        public void registerBeanDefinitions(AnnotationMetadata metadata, BeanDefinitionRegistry registry) {
            registry.registerBeanDefinition("netty", new RootBeanDefinition(BootLine.nettyReactiveWebServerFactory()));
        }
    }

    /** Stands in for Spring Security: the X-Login header becomes the authenticated principal. */
    @Bean
    WebFilter loginFilter() {
        return (exchange, chain) -> {
            String login = exchange.getRequest().getHeaders().getFirst("X-Login");
            if (login == null) {
                return chain.filter(exchange);
            }
            Principal p = () -> login;
            return chain.filter(exchange.mutate().principal(Mono.just(p)).build());
        };
    }

    @RestController
    public static class FluxApi extends SharedHandlers {
        @GetMapping("/sms")
        @RateLimited(name = "sms", rate = "3/minute", algorithm = Algorithm.FIXED_WINDOW,
                key = "#request.headers.getFirst('X-User')")
        public Mono<String> sms(ServerHttpRequest request) {
            return Mono.just("sent for " + request.getHeaders().getFirst("X-User"));
        }

        @GetMapping("/me")
        @RateLimited(name = "me", rate = "2/minute", key = "#principal?.name")
        public Mono<String> me(Mono<Principal> principal) {
            return principal.map(p -> "hello " + p.getName()).defaultIfEmpty("hello nobody");
        }

        /** Where the handler runs: its connection's event loop, never the client's I/O thread. */
        @GetMapping("/thread")
        @RateLimited(name = "thread", rate = "1000/second")
        public String thread() {
            return Thread.currentThread().getName();
        }
    }

    /** Every handler of the class shares one limiter (the class's name). */
    @RestController
    @RateLimited(name = "reports", rate = "2/minute", key = "#request.headers.getFirst('X-User')")
    public static class Reports {
        @GetMapping("/reports/daily")
        public Mono<String> daily() {
            return Mono.just("daily");
        }

        @GetMapping("/reports/weekly")
        public Mono<String> weekly() {
            return Mono.just("weekly");
        }

        /** A method's own annotation wins over the class's. */
        @GetMapping("/reports/export")
        @RateLimited(name = "export", rate = "1/hour", key = "#request.headers.getFirst('X-User')")
        public Mono<String> export() {
            return Mono.just("export");
        }
    }
}
