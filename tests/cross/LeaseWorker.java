// The Java process of the lease tests and the fleet benchmark; the same
// command line and commands as lease_worker.py (see there). Run as a
// single-file program:
//   java -cp ratelimit.jar tests/cross/LeaseWorker.java URL THREADS
import io.ratelimit.Algorithm;
import io.ratelimit.ClientOptions;
import io.ratelimit.Limiter;
import io.ratelimit.LimiterConfig;
import io.ratelimit.Rate;
import io.ratelimit.RateLimitClient;
import io.ratelimit.Result;
import java.io.BufferedOutputStream;
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.LockSupport;

public class LeaseWorker {
    public static void main(String[] args) throws Exception {
        String url = args[0];
        int threads = Integer.parseInt(args[1]);
        PrintStream out = new PrintStream(new BufferedOutputStream(new FileOutputStream(FileDescriptor.out), 1 << 16));
        ClientOptions options = ClientOptions.defaults().timeout(Duration.ofSeconds(5)).poolSize(16);
        try (RateLimitClient client = RateLimitClient.connect(url, options)) {
            Limiter warm = client.limiter("warm-up", Rate.of(1000000, Duration.ofSeconds(1)), Algorithm.GCRA);
            for (int i = 0; i < 2000; i++) warm.acquire("w", 1);
            out.println("ready");
            out.flush();
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
            for (String line; (line = in.readLine()) != null; ) {
                String[] f = line.trim().split(" ");
                if (f[0].equals("clock")) {
                    out.println(System.nanoTime());
                } else if (f[0].equals("run")) {
                    run(client, threads, f, out);
                } else {
                    throw new IllegalArgumentException("unknown command " + f[0]);
                }
                out.flush();
            }
        }
    }

    static void run(RateLimitClient client, int threads, String[] f, PrintStream out) throws Exception {
        long limit = Long.parseLong(f[2]), periodMs = Long.parseLong(f[3]), burst = Long.parseLong(f[4]);
        long leaseMs = Long.parseLong(f[5]), start = Long.parseLong(f[7]), end = Long.parseLong(f[8]);
        long rate = Long.parseLong(f[9]);
        boolean record = f[10].equals("1");
        Rate r = Rate.of(limit, Duration.ofMillis(periodMs));
        LimiterConfig config = LimiterConfig.of(Algorithm.fromName(f[1]), burst > 0 ? r.withBurst(burst) : r);
        if (leaseMs > 0) config = config.lease(Duration.ofMillis(leaseMs));
        long interval = rate > 0 ? threads * 1_000_000_000L / rate : 0;
        try (Limiter lim = client.limiter(f[6], config)) {  // closing gives the lease back
            List<Thread> workers = new ArrayList<>();
            List<StringBuilder> records = new ArrayList<>();
            long[][] counts = new long[threads][];
            for (int t = 0; t < threads; t++) {
                StringBuilder sb = new StringBuilder();
                records.add(sb);
                int slot = t;
                Thread w = new Thread(() -> counts[slot] = hammer(lim, start, end, interval, record ? sb : null));
                workers.add(w);
                w.start();
            }
            for (Thread w : workers) w.join();
            for (StringBuilder sb : records) out.append(sb);
            long[] total = new long[5];
            for (long[] c : counts) for (int i = 0; i < 5; i++) total[i] += c[i];
            out.println("done " + total[0] + " " + total[1] + " " + total[2] + " " + total[3] + " " + total[4]);
        }
    }

    static long[] hammer(Limiter lim, long start, long end, long interval, StringBuilder record) {
        long calls = 0, admitted = 0, localAdmitted = 0, localDenied = 0;
        while (System.nanoTime() < start) LockSupport.parkNanos(200_000);
        long due = start;
        while (true) {
            long lo = System.nanoTime();
            if (lo >= end) break;
            if (interval > 0) {
                if (lo < due) {
                    LockSupport.parkNanos(due - lo);
                    continue;
                }
                due = Math.max(due, lo - 10_000_000);  // a stall is not made up in one burst
            }
            Result r = lim.acquire("hot", 1);
            long hi = System.nanoTime();
            calls++;
            due += interval;
            if (r.allowed()) {
                admitted++;
                if (r.isLocal()) localAdmitted++;
                if (record != null) record.append("a ").append(lo).append(' ').append(hi)
                        .append(r.isLocal() ? " 1\n" : " 0\n");
            } else if (r.isLocal()) {
                localDenied++;
            }
        }
        return new long[] {calls, admitted, localAdmitted, calls - admitted, localDenied};
    }
}
