package bench;

import io.github.bucket4j.BucketConfiguration;
import io.github.bucket4j.distributed.BucketProxy;
import io.github.bucket4j.distributed.ExpirationAfterWriteStrategy;
import io.github.bucket4j.distributed.proxy.ProxyManager;
import io.github.bucket4j.redis.lettuce.Bucket4jLettuce;
import io.lettuce.core.RedisClient;
import io.ratelimit.Algorithm;
import io.ratelimit.Limiter;
import io.ratelimit.RateLimitClient;
import io.ratelimit.spring.RateLimited;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.ThreadLocalRandom;
import org.springframework.beans.factory.annotation.Value;
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
 * same blocking acquire, plus SpEL and headers);</li>
 * <li>{@code /bucket4j}: the handler calls Bucket4j's blocking
 * {@code BucketProxy.tryConsume(1)}, set up as bench/java's JavaBench sets
 * up its Bucket4j rows (the Lettuce compare-and-swap proxy manager, its own
 * connection to the same Redis), without a starter.</li>
 * </ul>
 * Every decision is allowed (a limit no run reaches) over 1000 ids; a denial
 * answers 429, which wrk counts as a non-2xx response. With
 * {@code --spring.threads.virtual.enabled=true} Tomcat runs each request on a
 * virtual thread (Java 21+).
 * Usage: MvcBench --server.port=P --ratelimit.url=redis://... [--ratelimit.prefix=...]
 */
@SpringBootApplication
public class MvcBench {
    static final String RATE = "1000000000/second";
    static final long LIMIT = 1_000_000_000L;
    static final int IDS = 1000;

    @RestController
    public static class Api {
        private final Limiter limiter;
        private final BucketProxy[] buckets = new BucketProxy[IDS];

        public Api(RateLimitClient client, @Value("${ratelimit.url}") String url,
                @Value("${ratelimit.prefix}") String prefix) {
            this.limiter = client.limiter("bench-mvc", RATE, Algorithm.GCRA);
            // Bucket4j as JavaBench has it: one bucket per id, the same limit
            ProxyManager<byte[]> proxies = Bucket4jLettuce
                    .casBasedBuilder(RedisClient.create(url))
                    .expirationAfterWrite(
                            ExpirationAfterWriteStrategy.basedOnTimeForRefillingBucketUpToMax(Duration.ofSeconds(10)))
                    .build();
            BucketConfiguration config = BucketConfiguration.builder()
                    .addLimit(l -> l.capacity(LIMIT).refillGreedy(LIMIT, Duration.ofSeconds(1))).build();
            for (int i = 0; i < IDS; i++) {
                byte[] key = (prefix + ":bucket4j:u" + i).getBytes(StandardCharsets.UTF_8);
                buckets[i] = proxies.builder().build(key, () -> config);
            }
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

        @GetMapping("/bucket4j")
        public String bucket4j() {
            if (!buckets[ThreadLocalRandom.current().nextInt(IDS)].tryConsume(1)) {
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
        String[] all = new String[args.length + 5];
        all[0] = "--spring.main.banner-mode=off";
        all[1] = "--logging.level.root=WARN";
        // wrk keeps its connections: Tomcat's default closes one every 100 requests
        all[2] = "--server.tomcat.max-keep-alive-requests=-1";
        all[3] = "--spring.main.web-application-type=servlet";
        // a shared machine stalls for seconds at times: wait as wrk (30 s) and
        // Lettuce (60 s) do rather than answer 503 after the core's 1 s
        all[4] = "--ratelimit.command-timeout=30s";
        System.arraycopy(args, 0, all, 5, args.length);
        SpringApplication.run(MvcBench.class, all);
    }
}
