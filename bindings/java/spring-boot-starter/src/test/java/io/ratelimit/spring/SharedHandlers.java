package io.ratelimit.spring;

import io.ratelimit.Algorithm;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PathVariable;

/**
 * Handlers both test apps inherit (plain return types work in MVC and
 * WebFlux alike); inherited, so also the case of a @RateLimited method
 * declared on a superclass (its default name is the subclass's).
 */
public abstract class SharedHandlers {
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

    /** A burst above the rate: q is the rate's limit, RateLimit-Limit the capacity. */
    @GetMapping("/burst")
    @RateLimited(name = "burst", rate = "2/minute", burst = 5)
    public String burst() {
        return "burst";
    }

    /** A limited handler that fails: the application's @ExceptionHandler still answers. */
    @GetMapping("/boom")
    @RateLimited(name = "boom", rate = "100/minute")
    public String boom() {
        throw new IllegalArgumentException("boom");
    }

    @ExceptionHandler(IllegalArgumentException.class)
    public ResponseEntity<String> teapot(IllegalArgumentException e) {
        return ResponseEntity.status(418).body("handled " + e.getMessage());
    }

    /** One key for every caller, leased in the app tests (ratelimit.limits.hot.lease). */
    @GetMapping("/hot")
    @RateLimited(name = "hot", rate = "20/hour", algorithm = Algorithm.FIXED_WINDOW, key = "'all'")
    public String hot() {
        return "hot";
    }

    @GetMapping("/open")
    public String open() {
        return "open";
    }
}
