package io.ratelimit.spring;

import static org.assertj.core.api.Assertions.assertThat;

import io.ratelimit.Algorithm;
import io.ratelimit.Limiter;
import io.ratelimit.LimiterConfig;
import io.ratelimit.ClientOptions;
import io.ratelimit.RateLimitClient;
import io.ratelimit.RedisServer;
import io.ratelimit.Result;
import java.time.Duration;
import java.util.Optional;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.WebApplicationContextRunner;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;

/** ratelimit.limits.<name>.lease: bound to the @RateLimited limiter of that name, checked at start-up, given back on close. */
class LeasePropertiesTest {
    private static final String PREFIX = "jlease-" + UUID.randomUUID();
    private final RedisServer redis;
    private final WebApplicationContextRunner mvc;

    LeasePropertiesTest() throws Exception {
        redis = WebAppContract.sharedRedis();
        mvc = new WebApplicationContextRunner()
                .withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class, BootLine.webMvcAutoConfiguration()))
                .withPropertyValues("ratelimit.url=" + redis.url(), "ratelimit.prefix=" + PREFIX)
                .withUserConfiguration(Api.class);
    }

    @RestController
    static class Api {
        @GetMapping("/hot")
        @RateLimited(name = "hot", rate = "1000000/day", algorithm = Algorithm.FIXED_WINDOW, key = "'all'")
        public String hot() {
            return "hot";
        }

        @GetMapping("/cold")
        @RateLimited(name = "cold", rate = "10/second")
        public String cold() {
            return "cold";
        }

        @GetMapping("/plain")
        @RateLimited(rate = "10/second")
        public String plain() {
            return "plain";
        }
    }

    private static Limiter limiter(RateLimitGuards guards, String method) throws Exception {
        return guards.find(Api.class.getMethod(method), Api.class).limiter();
    }

    @Test
    void theLeaseReachesTheLimiterOfThatName() {
        // a default name holds a dot: the key goes in brackets
        mvc.withPropertyValues("ratelimit.limits.hot.lease=50ms", "ratelimit.limits[Api.plain].lease=20ms").run(ctx -> {
            assertThat(ctx).hasNotFailed();
            RateLimitGuards guards = ctx.getBean(RateLimitGuards.class);
            assertThat(limiter(guards, "hot").config().flatMap(LimiterConfig::lease))
                    .isEqualTo(Optional.of(Duration.ofMillis(50)));
            assertThat(limiter(guards, "cold").config().flatMap(LimiterConfig::lease)).isEmpty();
            assertThat(limiter(guards, "plain").config().flatMap(LimiterConfig::lease))
                    .isEqualTo(Optional.of(Duration.ofMillis(20)));
            assertThat(ctx.getBean(RateLimitProperties.class).getLimits().get("hot").getLease())
                    .isEqualTo(Duration.ofMillis(50));
        });
    }

    @Test
    void aBadLeaseOrAnUnknownNameFailsStartUp() {
        mvc.withPropertyValues("ratelimit.limits.hot.lease=2h").run(ctx -> {
            assertThat(ctx).hasFailed();
            assertThat(ctx.getStartupFailure()).hasMessageContaining("Api.hot(")
                    .hasMessageContaining("ratelimit.limits.hot.lease: lease must be between 1 ms and 1 hour");
        });
        mvc.withPropertyValues("ratelimit.limits.hott.lease=50ms").run(ctx -> {
            assertThat(ctx).hasFailed();
            assertThat(ctx.getStartupFailure()).hasMessageContaining("ratelimit.limits.hott: no @RateLimited handler")
                    .hasMessageContaining("[Api.plain, cold, hot]");
        });
    }

    @Test
    void decidesLocallyAndGivesBackWhenTheContextCloses() throws Exception {
        try (RateLimitClient observer = RateLimitClient.connect(redis.url(), ClientOptions.defaults().prefix(PREFIX))) {
            Limiter plain = observer.limiter("hot", "1000000/day", Algorithm.FIXED_WINDOW);
            long[] held = new long[1];
            mvc.withPropertyValues("ratelimit.limits.hot.lease=10s").run(ctx -> {
                Limiter hot = limiter(ctx.getBean(RateLimitGuards.class), "hot");
                int local = 0;
                for (int i = 0; i < 201; i++) {
                    Result r = hot.acquire("all");
                    assertThat(r.allowed()).isTrue();
                    local += r.isLocal() ? 1 : 0;
                }
                assertThat(local).isGreaterThan(150);
                held[0] = plain.peek("all").remaining();
            });
            // the context closed its client (destroyMethod close): the unused permits are back
            assertThat(plain.peek("all").remaining()).isGreaterThan(held[0]);
        }
    }
}
