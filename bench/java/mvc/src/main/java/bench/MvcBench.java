package bench;

import io.ratelimit.Algorithm;
import io.ratelimit.Limiter;
import io.ratelimit.RateLimitClient;
import io.ratelimit.spring.RateLimited;
import java.util.concurrent.ThreadLocalRandom;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.http.HttpStatus;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.server.ResponseStatusException;

/**
 * A Spring MVC app (Tomcat, a thread per request) for bench/bench_mvc.sh,
 * which drives it with wrk; one path per way of deciding:
 * <ul>
 * <li>{@code /none}: no decision (Tomcat and Spring alone);</li>
 * <li>{@code /acquire}: the handler calls the blocking {@code acquire};</li>
 * <li>{@code /starter}: {@code @RateLimited}, the starter's interceptor (the
 * same blocking acquire, plus SpEL and headers).</li>
 * </ul>
 * Every decision is allowed (a limit no run reaches) over 1000 ids; a denial
 * answers 429, which wrk counts as a non-2xx response.
 * Usage: MvcBench --server.port=P --ratelimit.url=redis://... [--ratelimit.prefix=...]
 */
@SpringBootApplication
public class MvcBench {
    static final String RATE = "1000000000/second";

    @RestController
    public static class Api {
        private final Limiter limiter;

        public Api(RateLimitClient client) {
            this.limiter = client.limiter("bench-mvc", RATE, Algorithm.GCRA);
        }

        @GetMapping("/none")
        public String none() {
            return "ok";
        }

        @GetMapping("/acquire")
        public String acquire() {
            if (!limiter.acquire("u" + ThreadLocalRandom.current().nextInt(1000)).allowed()) {
                throw new ResponseStatusException(HttpStatus.TOO_MANY_REQUESTS);
            }
            return "ok";
        }

        @GetMapping("/starter")
        @RateLimited(name = "bench-mvc-starter", rate = RATE,
                key = "'u' + T(java.util.concurrent.ThreadLocalRandom).current().nextInt(1000)")
        public String starter() {
            return "ok";
        }
    }

    public static void main(String[] args) {
        String[] all = new String[args.length + 4];
        all[0] = "--spring.main.banner-mode=off";
        all[1] = "--logging.level.root=WARN";
        // wrk keeps its connections: Tomcat's default closes one every 100 requests
        all[2] = "--server.tomcat.max-keep-alive-requests=-1";
        all[3] = "--spring.main.web-application-type=servlet";
        System.arraycopy(args, 0, all, 4, args.length);
        SpringApplication.run(MvcBench.class, all);
    }
}
