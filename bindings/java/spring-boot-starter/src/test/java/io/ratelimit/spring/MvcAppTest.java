package io.ratelimit.spring;

import io.ratelimit.spring.mvc.MvcApp;
import org.springframework.boot.test.context.SpringBootTest;

/** A real Spring MVC app (Tomcat) on a random port, a real Redis, driven over HTTP. */
@SpringBootTest(classes = MvcApp.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = {"ratelimit.prefix=mvc", "ratelimit.timeout=500ms", "ratelimit.on-redis-error=raise",
            "ratelimit.pool-size=4", "ratelimit.limits.hot.lease=10s"})
class MvcAppTest extends WebAppContract {
    @Override
    String prefix() {
        return "mvc";
    }

    @Override
    String apiClass() {
        return "Api";
    }

    @Override
    Class<?> webGuard() {
        return RateLimitInterceptor.class;
    }

    @Override
    Class<?> healthIndicator() {
        return BootLine.healthIndicator();
    }
}
