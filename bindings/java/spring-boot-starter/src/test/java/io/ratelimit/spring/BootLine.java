package io.ratelimit.spring;

import org.springframework.boot.SpringBootVersion;

/**
 * The Spring Boot line this test JVM runs (3 or 4) and the classes the tests
 * name that Boot 4 moved: the same test sources run on both lines
 * (spring-boot4-tests compiles them against Boot 4). A class missing from its
 * line fails the test that asks for it.
 */
public final class BootLine {
    /** The major version of the Spring Boot on the classpath. */
    public static final int MAJOR = Integer.parseInt(SpringBootVersion.getVersion().split("\\.")[0]);

    private BootLine() {}

    /** The line the build runs these tests on (surefire's ratelimit.boot.line). */
    static int expected() {
        return Integer.parseInt(System.getProperty("ratelimit.boot.line", "unset by the build"));
    }

    static Class<?> webMvcAutoConfiguration() {
        return byLine("org.springframework.boot.autoconfigure.web.servlet.WebMvcAutoConfiguration",
                "org.springframework.boot.webmvc.autoconfigure.WebMvcAutoConfiguration");
    }

    static Class<?> webFluxAutoConfiguration() {
        return byLine("org.springframework.boot.autoconfigure.web.reactive.WebFluxAutoConfiguration",
                "org.springframework.boot.webflux.autoconfigure.WebFluxAutoConfiguration");
    }

    public static Class<?> nettyReactiveWebServerFactory() {
        return byLine("org.springframework.boot.web.embedded.netty.NettyReactiveWebServerFactory",
                "org.springframework.boot.reactor.netty.NettyReactiveWebServerFactory");
    }

    /** The starter's health contributor on this line, for servlet and non-web applications. */
    static Class<?> healthIndicator() {
        return byLine("io.ratelimit.spring.RateLimitHealthIndicator", "io.ratelimit.spring.boot4.RateLimitHealthIndicator");
    }

    static Class<?> reactiveHealthIndicator() {
        return byLine("io.ratelimit.spring.ReactiveRateLimitHealthIndicator",
                "io.ratelimit.spring.boot4.ReactiveRateLimitHealthIndicator");
    }

    private static Class<?> byLine(String boot3, String boot4) {
        String name = switch (MAJOR) {
            case 3 -> boot3;
            case 4 -> boot4;
            default -> throw new AssertionError("Spring Boot " + SpringBootVersion.getVersion() + ": not a tested line");
        };
        try {
            return Class.forName(name);
        } catch (ClassNotFoundException e) {
            throw new AssertionError("Spring Boot " + SpringBootVersion.getVersion() + " has no " + name, e);
        }
    }
}
