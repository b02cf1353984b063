package io.ratelimit.spring;

import static org.assertj.core.api.Assertions.assertThat;

import io.ratelimit.RedisServer;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

/**
 * The health contributor of the Boot line on the classpath, both lines'
 * auto-configurations listed as the jar lists them: exactly one applies, it
 * is DOWN while Redis is, and its property turns it off. No web server.
 */
class HealthAutoConfigurationTest {
    private final ApplicationContextRunner runner = new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class,
                    RateLimitHealthAutoConfiguration.class, io.ratelimit.spring.boot4.RateLimitHealthAutoConfiguration.class))
            .withPropertyValues("ratelimit.url=redis://127.0.0.1:" + freePort(), "ratelimit.on-redis-error=allow");

    private static int freePort() {
        try {
            return RedisServer.freePort();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    @Test
    void thisLinesContributorIsDownWhileRedisIs() {
        assertThat(BootLine.MAJOR).isEqualTo(BootLine.expected());
        runner.run(ctx -> {
            assertThat(ctx).hasNotFailed();
            Object indicator = ctx.getBean("rateLimitHealthIndicator");
            assertThat(indicator).isExactlyInstanceOf(BootLine.healthIndicator());
            // each line's own Health type: read through its public methods
            Object health = indicator.getClass().getMethod("health").invoke(indicator);
            assertThat(health.getClass().getMethod("getStatus").invoke(health)).hasToString("DOWN");
            Map<?, ?> details = (Map<?, ?>) health.getClass().getMethod("getDetails").invoke(health);
            assertThat(details.get("error")).isEqualTo("Redis unreachable: decisions follow on-redis-error");
        });
    }

    @Test
    void itsPropertyTurnsItOff() {
        runner.withPropertyValues("management.health.ratelimit.enabled=false")
                .run(ctx -> assertThat(ctx).hasNotFailed().doesNotHaveBean("rateLimitHealthIndicator"));
    }
}
