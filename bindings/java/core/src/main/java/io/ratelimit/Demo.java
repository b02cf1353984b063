package io.ratelimit;

import java.time.Duration;

/**
 * A smoke test that needs nothing but this jar and a Redis:
 * {@code java -cp ratelimit.jar io.ratelimit.Demo [redis://host:port]}.
 */
public final class Demo {
    private Demo() {}

    public static void main(String[] args) {
        String url = args.length > 0 ? args[0] : "redis://127.0.0.1:6379";
        try (RateLimitClient client = RateLimitClient.connect(url,
                ClientOptions.defaults().prefix("rl-demo").timeout(Duration.ofSeconds(2)))) {
            Limiter limiter = client.limiter("demo", Rate.parse("3/minute"), Algorithm.FIXED_WINDOW);
            limiter.reset("user");
            int admitted = 0;
            for (int i = 0; i < 5; i++) {
                Result r = limiter.acquire("user");
                System.out.println("attempt " + (i + 1) + ": " + r);
                if (r.allowed()) {
                    admitted++;
                }
            }
            limiter.reset("user");
            System.out.println("core " + RateLimitClient.coreVersion() + ", native library from "
                    + NativeLoader.loadedFrom() + ", TLS: "
                    + (RateLimitClient.hasTls() ? RateLimitClient.tlsVersion() : "none"));
            System.out.println("admitted " + admitted + " of 5");
        }
    }
}
