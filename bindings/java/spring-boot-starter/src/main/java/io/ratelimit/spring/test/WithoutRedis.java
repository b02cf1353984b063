package io.ratelimit.spring.test;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Inherited;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import org.springframework.test.context.TestPropertySource;

/**
 * On a {@code @SpringBootTest} class: the application starts without any
 * Redis. The client points at a port nothing listens on with
 * {@code ratelimit.on-redis-error=allow}, so it opens at once and every
 * {@code @RateLimited} request passes (a fallback decision, no rate-limit
 * headers); the {@code rateLimit} health contributor is DOWN. Needs
 * spring-test (the application's test scope has it).
 */
@Target(ElementType.TYPE)
@Retention(RetentionPolicy.RUNTIME)
@Documented
@Inherited
@TestPropertySource(properties = {"ratelimit.url=redis://127.0.0.1:1", "ratelimit.on-redis-error=allow"})
public @interface WithoutRedis {}
