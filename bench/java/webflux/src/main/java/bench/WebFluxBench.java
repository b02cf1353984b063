package bench;

import io.ratelimit.Algorithm;
import io.ratelimit.Limiter;
import io.ratelimit.RateLimitClient;
import io.ratelimit.Result;
import io.ratelimit.spring.RateLimited;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.web.context.WebServerApplicationContext;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;
import reactor.netty.http.client.HttpClient;
import reactor.netty.resources.ConnectionProvider;

/**
 * Requests per second of one WebFlux app (Netty) per way of deciding, driven
 * by a Reactor Netty client with a fixed number of requests in flight, rows
 * interleaved round by round so they share the machine's state:
 * <ul>
 * <li>{@code none}: no decision (the app and client alone);</li>
 * <li>{@code async}: {@code acquireAsync}, then on the parallel scheduler
 * (what the starter's handler adapter does);</li>
 * <li>{@code elastic}: the blocking {@code acquire} on boundedElastic;</li>
 * <li>{@code starter}: {@code @RateLimited}, the starter itself (async, plus
 * SpEL, headers).</li>
 * </ul>
 * Every decision is allowed (a limit no run reaches) over 1000 ids.
 * Usage: WebFluxBench redis-url seconds rounds concurrency
 */
@SpringBootApplication
public class WebFluxBench {
    static final String RATE = "1000000000/second";

    @RestController
    public static class Api {
        private final Limiter limiter;

        public Api(RateLimitClient client) {
            this.limiter = client.limiter("bench-webflux", RATE, Algorithm.GCRA);
        }

        private static String id() {
            return "u" + ThreadLocalRandom.current().nextInt(1000);
        }

        @GetMapping("/none")
        public Mono<String> none() {
            return Mono.just("ok");
        }

        @GetMapping("/async")
        public Mono<String> async() {
            return Mono.fromFuture(limiter.acquireAsync(id())).publishOn(Schedulers.parallel()).map(Api::answer);
        }

        @GetMapping("/elastic")
        public Mono<String> elastic() {
            String id = id();
            return Mono.fromCallable(() -> limiter.acquire(id)).subscribeOn(Schedulers.boundedElastic())
                    .map(Api::answer);
        }

        @GetMapping("/starter")
        @RateLimited(name = "bench-webflux", rate = RATE,
                key = "'u' + T(java.util.concurrent.ThreadLocalRandom).current().nextInt(1000)")
        public Mono<String> starter() {
            return Mono.just("ok");
        }

        private static String answer(Result r) {
            if (!r.allowed()) {
                throw new IllegalStateException("denied: " + r);
            }
            return "ok";
        }
    }

    public static void main(String[] args) {
        String url = args[0];
        int seconds = Integer.parseInt(args[1]);
        int rounds = Integer.parseInt(args[2]);
        int concurrency = Integer.parseInt(args[3]);
        ConfigurableApplicationContext ctx = new SpringApplication(WebFluxBench.class).run(
                "--spring.main.web-application-type=reactive", "--server.port=0", "--ratelimit.url=" + url,
                "--ratelimit.prefix=bench-webflux", "--spring.main.banner-mode=off", "--logging.level.root=WARN");
        try {
            measure(((WebServerApplicationContext) ctx).getWebServer().getPort(), seconds, rounds, concurrency);
        } finally {
            ctx.close();   // else Netty's threads keep the JVM (and the script) alive after a failure
        }
    }

    private static void measure(int port, int seconds, int rounds, int concurrency) {
        HttpClient http = HttpClient.create(ConnectionProvider.create("bench", concurrency)).port(port);
        String[] rows = {"none", "async", "elastic", "starter"};
        Map<String, double[]> rates = new LinkedHashMap<>();
        for (String row : rows) {
            run(http, row, concurrency, Duration.ofSeconds(seconds));   // warm-up (JIT, connections)
            rates.put(row, new double[rounds]);
        }
        for (int round = 0; round < rounds; round++) {
            for (String row : rows) {
                rates.get(row)[round] = run(http, row, concurrency, Duration.ofSeconds(seconds));
            }
        }
        System.out.printf("WebFlux, %d requests in flight, %d s x %d rounds, %d cores (client and app in one JVM)%n",
                concurrency, seconds, rounds, Runtime.getRuntime().availableProcessors());
        double async = median(rates.get("async"));
        for (String row : rows) {
            double m = median(rates.get(row));
            System.out.printf("%-8s %9.0f req/s (median)  x%.2f of async%n", row, m, m / async);
        }
    }

    private static double run(HttpClient http, String path, int concurrency, Duration time) {
        long start = System.nanoTime();
        long deadline = start + time.toNanos();
        // no new request after the deadline; those in flight finish (cancelling them would close connections)
        long n = Flux.range(0, Integer.MAX_VALUE).takeWhile(i -> System.nanoTime() < deadline)
                .flatMap(i -> http.get().uri("/" + path).responseSingle((res, body) -> {
                    if (res.status().code() != 200) {
                        return Mono.error(new IllegalStateException(path + ": " + res.status()));
                    }
                    return body.asString();
                }), concurrency)
                .count().block();
        return n / ((System.nanoTime() - start) / 1e9);
    }

    private static double median(double[] xs) {
        double[] s = xs.clone();
        java.util.Arrays.sort(s);
        return s[s.length / 2];
    }
}
