package io.ratelimit.spring;

import io.ratelimit.spring.webflux.FluxApp;
import org.springframework.boot.test.context.SpringBootTest;

/** WebFlux; problem details from ratelimit.web.problem-details. */
@SpringBootTest(classes = FluxApp.class, webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = {"spring.main.web-application-type=reactive", "ratelimit.prefix=flux-outage",
            "ratelimit.timeout=300ms", "ratelimit.reconnect-max=100ms", "ratelimit.web.problem-details=true",
            "management.endpoint.health.show-details=always"})
class WebFluxOutageTest extends OutageContract {}
