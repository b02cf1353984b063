package io.ratelimit.spring.mvc;

import io.ratelimit.Algorithm;
import io.ratelimit.spring.RateLimited;
import io.ratelimit.spring.SharedHandlers;
import jakarta.servlet.Filter;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletRequestWrapper;
import java.security.Principal;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.context.annotation.Bean;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;

/** A Spring MVC app using the starter, for the tests in io.ratelimit.spring. */
@SpringBootApplication
public class MvcApp {

    /** Stands in for Spring Security: the X-Login header becomes the authenticated principal. */
    @Bean
    Filter loginFilter() {
        return (req, res, chain) -> {
            HttpServletRequest http = (HttpServletRequest) req;
            String login = http.getHeader("X-Login");
            chain.doFilter(login == null ? req : new HttpServletRequestWrapper(http) {
                @Override
                public Principal getUserPrincipal() {
                    return () -> login;
                }
            }, res);
        };
    }

    @RestController
    public static class Api extends SharedHandlers {
        @GetMapping("/sms")
        @RateLimited(name = "sms", rate = "3/minute", algorithm = Algorithm.FIXED_WINDOW,
                key = "#request.getHeader('X-User')")
        public String sms(HttpServletRequest request) {
            return "sent for " + request.getHeader("X-User");
        }

        @GetMapping("/me")
        @RateLimited(name = "me", rate = "2/minute", key = "#principal?.name")
        public String me(Principal principal) {
            return "hello " + (principal == null ? "nobody" : principal.getName());
        }
    }

    /** Every handler of the class shares one limiter (the class's name). */
    @RestController
    @RateLimited(name = "reports", rate = "2/minute", key = "#request.getHeader('X-User')")
    public static class Reports {
        @GetMapping("/reports/daily")
        public String daily() {
            return "daily";
        }

        @GetMapping("/reports/weekly")
        public String weekly() {
            return "weekly";
        }

        /** A method's own annotation wins over the class's. */
        @GetMapping("/reports/export")
        @RateLimited(name = "export", rate = "1/hour", permits = 1, key = "#request.getHeader('X-User')")
        public String export() {
            return "export";
        }
    }
}
