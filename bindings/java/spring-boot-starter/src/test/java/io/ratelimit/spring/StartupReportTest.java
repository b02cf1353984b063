package io.ratelimit.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.ratelimit.ConnectionException;
import io.ratelimit.RedisServer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.ImportAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.context.annotation.Configuration;

/**
 * Redis down at start-up under the default policy: one report naming the URL
 * (password masked), the cause and ratelimit.on-redis-error, not a stack trace.
 */
@ExtendWith(OutputCaptureExtension.class)
class StartupReportTest {
    @Configuration(proxyBeanMethods = false)
    @ImportAutoConfiguration(RateLimitAutoConfiguration.class)
    static class App {}

    @Test
    void redisDownAtStartIsOneReport(CapturedOutput output) throws Exception {
        String url = "redis://:s3cret@127.0.0.1:" + RedisServer.freePort() + "/0";
        assertThatThrownBy(() -> new SpringApplicationBuilder(App.class).web(WebApplicationType.NONE)
                .run("--ratelimit.url=" + url, "--ratelimit.timeout=500ms"))
                .isInstanceOf(Exception.class)
                .rootCause().isInstanceOf(ConnectionException.class);
        String masked = url.replace("s3cret", "***");
        String out = output.getAll();
        assertThat(out).contains("APPLICATION FAILED TO START")
                .contains("ratelimit could not reach Redis at " + masked + " while the application started")
                .contains("ConnectionException: ")
                .contains("ratelimit.on-redis-error is not set (raise, the default)")
                .contains("set it to allow").doesNotContain("s3cret");
        // the report, not the stack trace (Spring Boot logs that at DEBUG only)
        assertThat(out).doesNotContain("\tat io.ratelimit.");
    }

    @Test
    void theSettingAsGiven(CapturedOutput output) throws Exception {
        String url = "redis://127.0.0.1:" + RedisServer.freePort();
        assertThatThrownBy(() -> new SpringApplicationBuilder(App.class).web(WebApplicationType.NONE)
                .run("--ratelimit.url=" + url, "--ratelimit.on-redis-error=raise", "--ratelimit.timeout=500ms"));
        assertThat(output.getAll()).contains("ratelimit.on-redis-error is raise:").contains(url);
    }

    @Test
    void passwordsAreMasked() {
        assertThat(RedisUnreachableAtStartupException.masked("rediss://user:p@ss@h:6380/0"))
                .isEqualTo("rediss://user:***@h:6380/0");
        assertThat(RedisUnreachableAtStartupException.masked("redis://h:6379/0")).isEqualTo("redis://h:6379/0");
        assertThat(RedisUnreachableAtStartupException.masked(
                "redis+sentinel://:pw@h1:26379,h2:26379/m/0?sentinel_password=x&db=1"))
                .isEqualTo("redis+sentinel://:***@h1:26379,h2:26379/m/0?sentinel_password=***");
    }
}
