package io.ratelimit.spring;

import io.ratelimit.spring.mvc.MvcApp;
import org.springframework.boot.test.context.SpringBootTest;

/** Spring MVC; problem details because the app turned them on for Spring MVC. */
@SpringBootTest(classes = MvcApp.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = {"ratelimit.prefix=mvc-outage", "ratelimit.timeout=300ms", "ratelimit.reconnect-max=100ms",
            "spring.mvc.problemdetails.enabled=true", "management.endpoint.health.show-details=always"})
class MvcOutageTest extends OutageContract {}
