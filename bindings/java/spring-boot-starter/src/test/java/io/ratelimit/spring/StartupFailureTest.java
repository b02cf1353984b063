package io.ratelimit.spring;

import static org.assertj.core.api.Assertions.assertThat;

import io.ratelimit.RedisServer;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ReactiveWebApplicationContextRunner;
import org.springframework.boot.test.context.runner.WebApplicationContextRunner;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;

/** Bad @RateLimited settings fail start-up, naming the method, in both stacks; no Redis is needed. */
class StartupFailureTest {
    private static String deadRedis() {
        try {
            return "ratelimit.url=redis://127.0.0.1:" + RedisServer.freePort();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    private final WebApplicationContextRunner mvc = new WebApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class, BootLine.webMvcAutoConfiguration()))
            .withPropertyValues(deadRedis(), "ratelimit.on-redis-error=allow");
    private final ReactiveWebApplicationContextRunner flux = new ReactiveWebApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class, BootLine.webFluxAutoConfiguration()))
            .withPropertyValues(deadRedis(), "ratelimit.on-redis-error=allow");

    @RestController
    static class BadRate {
        @GetMapping("/a")
        @RateLimited(rate = "abc")
        public String a() {
            return "a";
        }
    }

    @RestController
    static class TooManyPermits {
        @GetMapping("/b")
        @RateLimited(rate = "5/minute", permits = 6)
        public String b() {
            return "b";
        }
    }

    @RestController
    static class BadKey {
        @GetMapping("/c")
        @RateLimited(rate = "5/minute", key = "#request.getHeader('X-User'")
        public String c() {
            return "c";
        }
    }

    /** On the class: checked on each handler, so the message names one. */
    @RestController
    @RateLimited(rate = "10/fortnight")
    static class BadClass {
        @GetMapping("/d")
        public String d() {
            return "d";
        }
    }

    @RestController
    static class Good {
        @GetMapping("/e")
        @RateLimited(rate = "5/minute", permits = 5, burst = 0)
        public String e() {
            return "e";
        }
    }

    abstract static class Base {
        @GetMapping("/inherited")
        @RateLimited(rate = "5/minute")
        public String inherited() {
            return "inherited";
        }
    }

    @RestController
    static class First extends Base {}

    @RestController
    static class Second extends Base {}

    @Test
    void controllersInheritingAMethodHaveAGuardEach() throws Exception {
        var method = Base.class.getMethod("inherited");
        new WebApplicationContextRunner()
                .withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
                .withPropertyValues(deadRedis(), "ratelimit.on-redis-error=allow")
                .withBean(First.class).withBean(Second.class).run(ctx -> {
                    RateLimitGuards guards = ctx.getBean(RateLimitGuards.class);
                    assertThat(guards.find(method, First.class).limiter().name()).isEqualTo("First.inherited");
                    assertThat(guards.find(method, Second.class).limiter().name()).isEqualTo("Second.inherited");
                    assertThat(guards.find(Good.class.getMethod("e"), Good.class)).isNotNull();
                    assertThat(guards.find(First.class.getMethod("toString"), First.class)).isNull();
                });
    }

    @Test
    void badSettingsFailStartUpNamingTheMethod() {
        expectFailure(BadRate.class, "BadRate.a", "rate \"abc\"");
        expectFailure(TooManyPermits.class, "TooManyPermits.b", "permits = 6 but the limiter holds 1..5");
        expectFailure(BadKey.class, "BadKey.c", "is not a SpEL expression");
        expectFailure(BadClass.class, "BadClass.d", "rate \"10/fortnight\"");
    }

    @Test
    void goodSettingsStart() {
        mvc.withUserConfiguration(Good.class).run(ctx -> assertThat(ctx).hasNotFailed()
                .hasSingleBean(RateLimitInterceptor.class));
        flux.withUserConfiguration(Good.class).run(ctx -> assertThat(ctx).hasNotFailed()
                .hasSingleBean(RateLimitHandlerAdapter.class));
    }

    private void expectFailure(Class<?> controller, String method, String problem) {
        mvc.withUserConfiguration(controller).run(ctx -> {
            assertThat(ctx).hasFailed();
            assertThat(ctx.getStartupFailure()).hasMessageContaining("@RateLimited on ")
                    .hasMessageContaining(method + "(").hasMessageContaining(problem);
        });
        flux.withUserConfiguration(controller).run(ctx -> {
            assertThat(ctx).hasFailed();
            assertThat(ctx.getStartupFailure()).hasMessageContaining(method + "(").hasMessageContaining(problem);
        });
    }
}
