// The Java side of tests/model/test_model.py: limiter requests on stdin, one
// per line, answers on stdout, so Hypothesis drives the Java binding with
// the same random sequences as the Python one. Run as a single-file program:
//   java -cp ratelimit.jar tests/model/ModelWorker.java URL PREFIX NAME
// A request: OP ALGORITHM INITIAL(- for full) N (LIMIT PERIOD_MS BURST)xN ID PERMITS MAX_WAIT_MS NOW_MS
// An answer: "ok" and the eight fields (allowed 0/1, limit, remaining,
// retry_after_ms, reset_after_ms, wait_ms, granted, rate_index), "reset",
// or "invalid" (InvalidArgumentException).
import io.ratelimit.Algorithm;
import io.ratelimit.ClientOptions;
import io.ratelimit.InvalidArgumentException;
import io.ratelimit.Limiter;
import io.ratelimit.LimiterConfig;
import io.ratelimit.Rate;
import io.ratelimit.RateLimitClient;
import io.ratelimit.Result;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

public class ModelWorker {
    public static void main(String[] args) throws Exception {
        String url = args[0], prefix = args[1], name = args[2];
        ClientOptions options = ClientOptions.defaults().prefix(prefix).timeout(Duration.ofSeconds(10));
        Map<String, Limiter> limiters = new HashMap<>();
        try (RateLimitClient client = RateLimitClient.connect(url, options);
                BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            for (String line; (line = in.readLine()) != null;) {
                String[] w = line.trim().split(" ");
                int n = Integer.parseInt(w[3]), at = 4 + 3 * n;
                String specKey = String.join(" ", java.util.Arrays.copyOfRange(w, 1, at));
                Limiter lim = limiters.computeIfAbsent(specKey, k -> client.limiter(name, config(w)));
                String op = w[0], id = w[at];
                long permits = Long.parseLong(w[at + 1]), maxWait = Long.parseLong(w[at + 2]);
                Limiter.AtTime now = lim.at(Long.parseLong(w[at + 3]));
                String answer;
                try {
                    if (op.equals("reset")) {
                        lim.reset(id);
                        answer = "reset";
                    } else {
                        Result r;
                        switch (op) {
                            case "acquire": r = now.acquire(id, permits); break;
                            case "peek": r = now.peek(id, permits); break;
                            case "acquire_up_to": r = now.acquireAtMost(id, permits); break;
                            case "refund": r = now.refund(id, permits); break;
                            case "reserve": r = now.reserve(id, permits, Duration.ofMillis(maxWait)); break;
                            default: throw new IllegalArgumentException("unknown op " + op);
                        }
                        answer = "ok " + (r.allowed() ? 1 : 0) + " " + r.limit() + " " + r.remaining() + " "
                                + (r.allowed() ? -1 : r.retryAfter().toMillis()) + " " + r.resetAfter().toMillis()
                                + " " + r.waitTime().toMillis() + " " + r.granted() + " " + r.rateIndex();
                    }
                } catch (InvalidArgumentException e) {
                    answer = "invalid";
                }
                System.out.println(answer);
                System.out.flush();
            }
        }
    }

    /** w[1..]: ALGORITHM INITIAL N (LIMIT PERIOD_MS BURST)xN */
    static LimiterConfig config(String[] w) {
        List<Rate> rates = new ArrayList<>();
        for (int i = 0; i < Integer.parseInt(w[3]); i++) {
            int at = 4 + 3 * i;
            rates.add(Rate.of(Long.parseLong(w[at]), Duration.ofMillis(Long.parseLong(w[at + 1])))
                    .withBurst(Long.parseLong(w[at + 2])));
        }
        LimiterConfig config = LimiterConfig.of(Algorithm.fromName(w[1]), rates);
        return w[2].equals("-") ? config : config.initialTokens(Long.parseLong(w[2]));
    }
}
