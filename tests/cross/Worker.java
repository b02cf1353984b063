// The Java side of the cross-language tests; same command line as
// c_worker.c and worker.py. Run as a single-file program:
//   java -cp ratelimit.jar tests/cross/Worker.java URL COMMAND ...
import io.ratelimit.Algorithm;
import io.ratelimit.ClientOptions;
import io.ratelimit.Limiter;
import io.ratelimit.LimiterConfig;
import io.ratelimit.Rate;
import io.ratelimit.RateLimitClient;
import io.ratelimit.Result;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

public class Worker {
    public static void main(String[] args) throws Exception {
        String url = args[0], command = args[1];
        ClientOptions options = ClientOptions.defaults().timeout(Duration.ofSeconds(5)).poolSize(16);
        try (RateLimitClient client = RateLimitClient.connect(url, options)) {
            if (command.equals("scripts")) {
                for (String[] script : RateLimitClient.scripts()) System.out.println(script[0] + " " + script[1]);
                return;
            }
            Algorithm algorithm = Algorithm.fromName(args[2]);
            Rate rate = Rate.of(Long.parseLong(args[3]), Duration.ofMillis(Long.parseLong(args[4])));
            if (command.equals("configure")) {
                // Worker URL configure ALGORITHM LIMIT PERIOD_MS NAME: store NAME's spec, print when done
                client.configure(args[5], LimiterConfig.of(algorithm, rate));
                System.out.println(System.currentTimeMillis());
                return;
            }
            Limiter lim = client.limiter(args[5], rate, algorithm);
            String id = args[6];
            if (command.equals("burst")) {
                int threads = Integer.parseInt(args[7]), calls = Integer.parseInt(args[8]);
                AtomicLong admitted = new AtomicLong();
                List<Thread> workers = new ArrayList<>();
                for (int t = 0; t < threads; t++) {
                    Thread w = new Thread(() -> {
                        for (int i = 0; i < calls; i++) if (lim.acquire(id, 1).allowed()) admitted.incrementAndGet();
                    });
                    workers.add(w);
                    w.start();
                }
                for (Thread w : workers) w.join();
                System.out.println(admitted.get());
            } else if (command.equals("step")) {
                long permits = Long.parseLong(args[8]);
                Result r = args[7].equals("peek") ? lim.peek(id, permits) : lim.acquire(id, permits);
                long retry = r.allowed() ? -1 : r.retryAfter().toMillis();
                System.out.println((r.allowed() ? 1 : 0) + " " + r.remaining() + " " + retry + " "
                        + r.resetAfter().toMillis());
            } else {
                throw new IllegalArgumentException("unknown command " + command);
            }
        }
    }
}
