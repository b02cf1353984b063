import io.ratelimit.Algorithm;
import io.ratelimit.DistributedLock;
import io.ratelimit.Lock;
import io.ratelimit.NotAcquiredException;
import io.ratelimit.RateLimitClient;
import io.ratelimit.RedisFailureException;
import io.ratelimit.Result;
import java.time.Duration;

/**
 * The Java side of the demo: a limiter, a denial and its retry time, a lock
 * with fencing tokens, and the two kinds of failure kept apart.
 *
 * <pre>REDIS_URL=redis://127.0.0.1:6379/0 java -cp ratelimit.jar examples/Demo.java</pre>
 */
public class Demo {
    public static void main(String[] args) {
        String url = System.getenv().getOrDefault("REDIS_URL", "redis://127.0.0.1:6379/0");
        try (RateLimitClient client = RateLimitClient.connect(url)) {
            var sms = client.limiter("demo-sms", "3/second", Algorithm.GCRA);
            System.out.println("gcra, 3/second (one call every 333 ms, a burst of 3):");
            for (int i = 1; i <= 4; i++) {
                Result r = sms.acquire("user-42", 1);
                System.out.println(r.allowed()
                        ? "  call " + i + ": allowed   remaining " + r.remaining()
                        : "  call " + i + ": DENIED    retry after " + r.retryAfter() + " (the next cell is due then)");
            }
            DistributedLock lock = client.lock("demo-job", Duration.ofSeconds(10));
            try (Lock held = lock.acquire(Duration.ofSeconds(1))) {
                System.out.println("lock held, fencing token " + held.fencingToken() + " (grows with every grant)");
                try {
                    lock.acquire(Duration.ofMillis(200));
                } catch (NotAcquiredException busy) { // Redis answered: the lock is taken
                    System.out.println("  a second acquire: " + busy.getClass().getSimpleName() + ": " + busy.getMessage());
                }
            }
            try (Lock again = lock.tryAcquire().orElseThrow()) {
                System.out.println("released; acquired again with fencing token " + again.fencingToken());
            }
        }
        try {
            RateLimitClient.connect("redis://127.0.0.1:1/0").close();
        } catch (RedisFailureException down) { // Redis failed: never a denial or a busy lock
            System.out.println("nothing listens on port 1: " + down.getClass().getSimpleName());
        }
    }
}
