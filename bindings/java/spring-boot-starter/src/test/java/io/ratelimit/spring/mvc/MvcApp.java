package io.ratelimit.spring;

import io.ratelimit.Algorithm;
import jakarta.servlet.http.HttpServletRequest;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.RestController;

/** A small web app for {@link RateLimitedWebTest}. */
@SpringBootApplication
public class TestApp {

    @RestController
    public static class Api {
        @GetMapping("/sms")
        @RateLimited(name = "sms", rate = "3/minute", algorithm = Algorithm.FIXED_WINDOW,
                key = "#request.getHeader('X-User')")
        public String sms(HttpServletRequest request) {
            return "sent for " + request.getHeader("X-User");
        }

        @GetMapping("/items/{tenant}")
        @RateLimited(rate = "2/hour", key = "#pathVariables['tenant']")
        public String items(@PathVariable String tenant) {
            return "items of " + tenant;
        }

        @GetMapping("/by-ip")
        @RateLimited(name = "by-ip", rate = "1/minute", algorithm = Algorithm.SLIDING_LOG)
        public String byIp() {
            return "ok";
        }

        @GetMapping("/open")
        public String open() {
            return "open";
        }
    }
}
