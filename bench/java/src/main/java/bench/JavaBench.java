package bench;

import io.github.bucket4j.BucketConfiguration;
import io.github.bucket4j.distributed.AsyncBucketProxy;
import io.github.bucket4j.distributed.BucketProxy;
import io.github.bucket4j.distributed.ExpirationAfterWriteStrategy;
import io.github.bucket4j.distributed.proxy.ProxyManager;
import io.github.bucket4j.redis.lettuce.Bucket4jLettuce;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.async.RedisAsyncCommands;
import io.lettuce.core.api.sync.RedisCommands;
import io.lettuce.core.codec.ByteArrayCodec;
import io.ratelimit.Algorithm;
import io.ratelimit.Limiter;
import io.ratelimit.LimiterConfig;
import io.ratelimit.Rate;
import io.ratelimit.RateLimitClient;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.redisson.Redisson;
import org.redisson.api.RRateLimiter;
import org.redisson.api.RateType;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * ratelimit's Java binding against Redisson's {@code RRateLimiter} and
 * Bucket4j (Lettuce, compare-and-swap) on the same Redis in one run:
 * asynchronous with 64 and with 1 request in flight, and blocking with 1 and
 * 8 threads. Every decision admits (a limit of 10^9 per second), on 64 keys
 * (one per request in flight or per thread), each library as it ships
 * (default options). Rows run in interleaved rounds; each row reports the
 * median round's decisions/s, its latency percentiles and Redis's own CPU
 * time per decision (INFO cpu).
 *
 * <p>"Lettuce running our script": Lettuce's own API on one shared
 * connection (its usual use from many threads) sending, per decision, the
 * very EVALSHA our limiter sends for that id (captured by MONITOR, see
 * {@link ScriptCommand}): a plain good client running our Lua, synchronous
 * beside the blocking rows and asynchronous beside the async ones.
 *
 * <p>Leases (issue 25): the "hot key" rows put every caller on one key, with
 * and without {@code LimiterConfig.lease(50 ms)}, and report the ratio and
 * the script calls per decision (INFO commandstats).
 *
 * <p>Usage: {@code JavaBench redis://127.0.0.1:6397 [seconds per row] [rounds] [only rows holding this]}
 * (bench/bench_java.sh starts the Redis and runs it).
 */
public final class JavaBench {
    static final long LIMIT = 1_000_000_000L;
    static final int KEYS = 64;
    static final Duration LEASE = Duration.ofMillis(50);
    static final String LEASE_NAME = "lease 50 ms";
    /** Groups of the hot-key rows (leases). */
    static final String HOT = "hot key, ";
    static final String OUR_SCRIPT = "Lettuce running our script: ";

    interface AsyncCall {
        CompletionStage<?> call(int chain);
    }

    interface SyncCall {
        void call(int thread) throws Exception;
    }

    /** One run of one row. */
    record Sample(double perSecond, double p50us, double p99us, double redisCpuUs, double clientCpuUs, long errors,
            double scriptsPerDecision) {}

    static final com.sun.management.OperatingSystemMXBean OS =
            (com.sun.management.OperatingSystemMXBean) java.lang.management.ManagementFactory.getOperatingSystemMXBean();

    /** This JVM's CPU seconds so far (every thread: callers, I/O threads, JIT, GC). */
    static double clientCpu() {
        return OS.getProcessCpuTime() / 1e9;
    }

    /** The first failure of a row, printed with the table. */
    static final Map<String, String> FIRST_ERROR = new java.util.concurrent.ConcurrentHashMap<>();
    static volatile String current = "";

    static void failed(Throwable e) {
        Throwable cause = e instanceof java.util.concurrent.CompletionException && e.getCause() != null
                ? e.getCause() : e;
        FIRST_ERROR.putIfAbsent(current, cause.toString());
    }

    /** A growable list of latencies, written by one chain or thread at a time. */
    static final class Latencies {
        long[] values = new long[1 << 14];
        int n;

        void add(long v) {
            if (n == values.length) {
                values = Arrays.copyOf(values, n * 2);
            }
            values[n++] = v;
        }
    }

    private static StatefulRedisConnection<String, String> admin;

    /** Redis's user + sys CPU seconds so far. */
    static double redisCpu() {
        double user = 0;
        double sys = 0;
        for (String line : admin.sync().info("cpu").split("\r?\n")) {
            if (line.startsWith("used_cpu_user:")) {
                user = Double.parseDouble(line.substring(14).trim());
            } else if (line.startsWith("used_cpu_sys:")) {
                sys = Double.parseDouble(line.substring(13).trim());
            }
        }
        return user + sys;
    }

    /** EVALSHA + EVAL calls Redis has run so far (INFO commandstats). */
    static long scriptCalls() {
        long calls = 0;
        for (String line : admin.sync().info("commandstats").split("\r?\n")) {
            if (line.startsWith("cmdstat_evalsha:") || line.startsWith("cmdstat_eval:")) {
                int at = line.indexOf("calls=") + 6;
                calls += Long.parseLong(line.substring(at, line.indexOf(',', at)));
            }
        }
        return calls;
    }

    static Sample summarize(List<Latencies> lats, long ops, long nanos, double cpu, double clientCpu, long errors,
            long scripts) {
        int total = 0;
        for (Latencies l : lats) {
            total += l.n;
        }
        long[] all = new long[total];
        int at = 0;
        for (Latencies l : lats) {
            System.arraycopy(l.values, 0, all, at, l.n);
            at += l.n;
        }
        Arrays.sort(all);
        double p50 = total == 0 ? 0 : all[(int) (total * 0.50)] / 1000.0;
        double p99 = total == 0 ? 0 : all[Math.min(total - 1, (int) (total * 0.99))] / 1000.0;
        return new Sample(ops * 1e9 / nanos, p50, p99, ops == 0 ? 0 : cpu * 1e6 / ops,
                ops == 0 ? 0 : clientCpu * 1e6 / ops, errors, ops == 0 ? 0 : (double) scripts / ops);
    }

    /** {@code inflight} chains, each issuing its next call when the previous one completes. */
    static Sample runAsync(int inflight, double seconds, AsyncCall call) throws Exception {
        List<Latencies> lats = new ArrayList<>();
        AtomicLong ops = new AtomicLong();
        AtomicLong errors = new AtomicLong();
        CountDownLatch drained = new CountDownLatch(inflight);
        long scripts0 = scriptCalls();
        double cpu0 = redisCpu();
        double client0 = clientCpu();
        long start = System.nanoTime();
        long end = start + (long) (seconds * 1e9);
        for (int i = 0; i < inflight; i++) {
            Latencies l = new Latencies();
            lats.add(l);
            new Chain(i, call, l, ops, errors, end, drained).next();
        }
        drained.await(60, TimeUnit.SECONDS);
        long nanos = System.nanoTime() - start;
        return summarize(lats, ops.get(), nanos, redisCpu() - cpu0, clientCpu() - client0, errors.get(),
                scriptCalls() - scripts0);
    }

    static final class Chain {
        final int index;
        final AsyncCall call;
        final Latencies lat;
        final AtomicLong ops;
        final AtomicLong errors;
        final long end;
        final CountDownLatch drained;

        Chain(int index, AsyncCall call, Latencies lat, AtomicLong ops, AtomicLong errors, long end,
                CountDownLatch drained) {
            this.index = index;
            this.call = call;
            this.lat = lat;
            this.ops = ops;
            this.errors = errors;
            this.end = end;
            this.drained = drained;
        }

        /** Calls until one does not complete at once, then goes on from its completion (no recursion). */
        void next() {
            while (true) {
                long t0 = System.nanoTime();
                CompletableFuture<?> f = call.call(index).toCompletableFuture();
                if (!f.isDone()) {
                    f.whenComplete((v, e) -> {
                        if (!finished(t0, e)) {
                            next();
                        }
                    });
                    return;
                }
                Throwable e = null;
                try {
                    f.join(); // a local decision (a lease) completes in the call
                } catch (RuntimeException ex) {
                    e = ex;
                }
                if (finished(t0, e)) {
                    return;
                }
            }
        }

        /** Counts one call; true when the chain is past its end. */
        boolean finished(long t0, Throwable e) {
            long t1 = System.nanoTime();
            if (e != null) {
                errors.incrementAndGet();
                failed(e);
            } else {
                lat.add(t1 - t0);
                ops.incrementAndGet();
            }
            if (t1 < end) {
                return false;
            }
            drained.countDown();
            return true;
        }
    }

    static Sample runSync(int threads, double seconds, SyncCall call) throws Exception {
        List<Latencies> lats = new ArrayList<>();
        AtomicLong ops = new AtomicLong();
        AtomicLong errors = new AtomicLong();
        List<Thread> list = new ArrayList<>();
        long scripts0 = scriptCalls();
        double cpu0 = redisCpu();
        double client0 = clientCpu();
        long start = System.nanoTime();
        long end = start + (long) (seconds * 1e9);
        for (int t = 0; t < threads; t++) {
            Latencies l = new Latencies();
            lats.add(l);
            int index = t;
            Thread th = new Thread(() -> {
                long n = 0;
                for (long t0 = System.nanoTime(); t0 < end; ) {
                    try {
                        call.call(index);
                        long t1 = System.nanoTime();
                        l.add(t1 - t0);
                        n++;
                        t0 = t1;
                    } catch (Exception e) {
                        errors.incrementAndGet();
                        failed(e);
                        t0 = System.nanoTime();
                    }
                }
                ops.addAndGet(n);
            });
            th.start();
            list.add(th);
        }
        for (Thread th : list) {
            th.join();
        }
        long nanos = System.nanoTime() - start;
        return summarize(lats, ops.get(), nanos, redisCpu() - cpu0, clientCpu() - client0, errors.get(),
                scriptCalls() - scripts0);
    }

    record Row(String group, String name, boolean async, int width, Object call) {}

    public static void main(String[] args) throws Exception {
        String url = args.length > 0 ? args[0] : "redis://127.0.0.1:6397";
        double seconds = args.length > 1 ? Double.parseDouble(args[1]) : 3;
        int rounds = args.length > 2 ? Integer.parseInt(args[2]) : 3;
        String only = args.length > 3 ? args[3] : ""; // run only the rows whose "mode / library" holds this

        RedisClient lettuce = RedisClient.create(url);
        admin = lettuce.connect();
        admin.sync().flushall();

        // ratelimit: gcra, one client with default options
        RateLimitClient ours = RateLimitClient.connect(url);
        Limiter limiter = ours.limiter("bench-java", Rate.of(LIMIT, Duration.ofSeconds(1)), Algorithm.GCRA);
        String[] ids = new String[KEYS];
        for (int i = 0; i < KEYS; i++) {
            ids[i] = "user-" + i;
        }

        // the hot key: every caller on one key, with and without a lease
        Limiter hot = ours.limiter("bench-hot", Rate.of(LIMIT, Duration.ofSeconds(1)), Algorithm.GCRA);
        Limiter leased = ours.limiter("bench-hot-lease",
                LimiterConfig.of(Algorithm.GCRA, Rate.of(LIMIT, Duration.ofSeconds(1))).lease(LEASE));

        // Lettuce: one connection shared by every thread or chain, bytes (the packed arguments)
        StatefulRedisConnection<byte[], byte[]> scripts = lettuce.connect(ByteArrayCodec.INSTANCE);
        RedisCommands<byte[], byte[]> scriptSync = scripts.sync();
        RedisAsyncCommands<byte[], byte[]> scriptAsync = scripts.async();
        ScriptCommand[] ourCommand = new ScriptCommand[KEYS];

        RRateLimiter[] rrl = new RRateLimiter[KEYS];
        AsyncBucketProxy[] asyncBuckets = new AsyncBucketProxy[KEYS];
        BucketProxy[] syncBuckets = new BucketProxy[KEYS];
        List<Row> rows = new ArrayList<>();
        for (int inflight : new int[] {64, 1}) {
            String group = "async, " + inflight + " in flight";
            rows.add(new Row(group, "ratelimit acquireAsync", true, inflight,
                    (AsyncCall) i -> limiter.acquireAsync(ids[i])));
            rows.add(new Row(group, "Redisson RRateLimiter.tryAcquireAsync", true, inflight,
                    (AsyncCall) i -> rrl[i].tryAcquireAsync()));
            rows.add(new Row(group, "Bucket4j (Lettuce) AsyncBucketProxy.tryConsume", true, inflight,
                    (AsyncCall) i -> asyncBuckets[i].tryConsume(1)));
            rows.add(new Row(group, OUR_SCRIPT + "async evalsha", true, inflight,
                    (AsyncCall) i -> ourCommand[i].async(scriptAsync)));
        }
        for (int threads : new int[] {1, 8}) {
            String group = "blocking, " + threads + (threads == 1 ? " thread" : " threads");
            rows.add(new Row(group, "ratelimit acquire", false, threads, (SyncCall) i -> limiter.acquire(ids[i])));
            rows.add(new Row(group, "Redisson RRateLimiter.tryAcquire", false, threads,
                    (SyncCall) i -> rrl[i].tryAcquire()));
            rows.add(new Row(group, "Bucket4j (Lettuce) BucketProxy.tryConsume", false, threads,
                    (SyncCall) i -> syncBuckets[i].tryConsume(1)));
            rows.add(new Row(group, OUR_SCRIPT + "evalsha", false, threads,
                    (SyncCall) i -> ourCommand[i].sync(scriptSync)));
        }
        for (int threads : new int[] {1, 8}) {
            String group = HOT + "blocking, " + threads + (threads == 1 ? " thread" : " threads");
            rows.add(new Row(group, "ratelimit acquire", false, threads, (SyncCall) i -> hot.acquire("hot")));
            rows.add(new Row(group, "ratelimit acquire, " + LEASE_NAME, false, threads,
                    (SyncCall) i -> leased.acquire("hot")));
        }
        String hotAsync = HOT + "async, 64 in flight";
        rows.add(new Row(hotAsync, "ratelimit acquireAsync", true, 64, (AsyncCall) i -> hot.acquireAsync("hot")));
        rows.add(new Row(hotAsync, "ratelimit acquireAsync, " + LEASE_NAME, true, 64,
                (AsyncCall) i -> leased.acquireAsync("hot")));

        rows.removeIf(row -> !(row.group() + " / " + row.name()).contains(only));

        // the command our limiter sends for each id, before any other library talks to Redis
        if (rows.stream().anyMatch(row -> row.name().startsWith(OUR_SCRIPT))) {
            System.arraycopy(ScriptCommand.capture(url, limiter, ids, admin.sync()), 0, ourCommand, 0, KEYS);
            List<?> reply = ourCommand[0].check(scripts, LIMIT);
            for (ScriptCommand command : ourCommand) {
                command.check(scripts, LIMIT); // each admits at our limit
            }
            System.out.printf("our script's command for %s: %s%nits reply, replayed by Lettuce: %s%n", ids[0],
                    ourCommand[0], reply);
        }

        // Redisson: one RRateLimiter per key, defaults (pool, threads, codec)
        RedissonClient redisson = null;
        if (rows.stream().anyMatch(row -> row.name().startsWith("Redisson"))) {
            Config config = new Config();
            config.useSingleServer().setAddress(url);
            redisson = Redisson.create(config);
            for (int i = 0; i < KEYS; i++) {
                rrl[i] = redisson.getRateLimiter("bench-redisson:user-" + i);
                rrl[i].trySetRate(RateType.OVERALL, LIMIT, Duration.ofSeconds(1));
            }
        }

        // Bucket4j: the Lettuce compare-and-swap proxy manager, one bucket per key
        if (rows.stream().anyMatch(row -> row.name().startsWith("Bucket4j"))) {
            ProxyManager<byte[]> buckets = Bucket4jLettuce.casBasedBuilder(lettuce)
                    .expirationAfterWrite(
                            ExpirationAfterWriteStrategy.basedOnTimeForRefillingBucketUpToMax(Duration.ofSeconds(10)))
                    .build();
            BucketConfiguration bucketConfig = BucketConfiguration.builder()
                    .addLimit(l -> l.capacity(LIMIT).refillGreedy(LIMIT, Duration.ofSeconds(1))).build();
            for (int i = 0; i < KEYS; i++) {
                byte[] key = ("bench-bucket4j:user-" + i).getBytes(StandardCharsets.UTF_8);
                asyncBuckets[i] = buckets.asAsync().builder().build(key, bucketConfig);
                syncBuckets[i] = buckets.builder().build(key, () -> bucketConfig);
            }
        }

        // warm-up: JIT, connections, scripts loaded
        for (Row row : rows) {
            run(row, Math.min(1.0, seconds));
        }
        Map<Row, List<Sample>> samples = new LinkedHashMap<>();
        for (int r = 0; r < rounds; r++) {
            for (Row row : rows) {
                Sample s = run(row, seconds);
                samples.computeIfAbsent(row, k -> new ArrayList<>()).add(s);
                System.err.printf(Locale.ROOT, "round %d  %-26s %-48s %10.0f/s%n", r + 1, row.group(), row.name(),
                        s.perSecond());
            }
        }

        System.out.printf(Locale.ROOT, "%nJava, %s, %.1f s per row, median of %d rounds (Redis %s)%n%n", url, seconds,
                rounds, redisVersion());
        if (rows.stream().anyMatch(row -> !row.group().startsWith(HOT))) {
            System.out.println("| mode | library | decisions/s | ratelimit / this | p50 | p99 | Redis CPU per decision"
                    + " | client CPU per decision | script calls per decision |");
            System.out.println("|---|---|---:|---:|---:|---:|---:|---:|---:|");
        }
        double ref = 0;
        Map<String, Sample[]> hotPairs = new LinkedHashMap<>(); // group -> {without, with lease}
        for (Map.Entry<Row, List<Sample>> e : samples.entrySet()) {
            Row row = e.getKey();
            Sample m = median(e.getValue());
            if (row.group().startsWith(HOT)) {
                hotPairs.computeIfAbsent(row.group(), g -> new Sample[2])[row.name().endsWith(LEASE_NAME) ? 1 : 0] = m;
                continue;
            }
            if (row.name().startsWith("ratelimit")) {
                ref = m.perSecond();
            }
            long errors = 0;
            for (Sample s : e.getValue()) {
                errors += s.errors();
            }
            System.out.printf(Locale.ROOT, "| %s | %s | %,.0f | %.2fx | %.0f us | %.0f us | %.1f us | %.1f us | %.2f |%s%n",
                    row.group(), row.name(), m.perSecond(), ref / m.perSecond(), m.p50us(), m.p99us(), m.redisCpuUs(),
                    m.clientCpuUs(), m.scriptsPerDecision(), errors > 0 ? " " + errors + " errors in all rounds" : "");
        }
        if (!hotPairs.isEmpty()) {
            System.out.printf(Locale.ROOT, "%nLeases: one hot key, gcra %,d/s, LimiterConfig.lease(%d ms) against none%n%n",
                    LIMIT, LEASE.toMillis());
            System.out.println("| mode | decisions/s, no lease | decisions/s, lease | lease / none | script calls per"
                    + " decision, no lease | script calls per decision, lease | Redis CPU per decision, no lease / lease"
                    + " | p50, no lease / lease |");
            System.out.println("|---|---:|---:|---:|---:|---:|---:|---:|");
            for (Map.Entry<String, Sample[]> e : hotPairs.entrySet()) {
                Sample none = e.getValue()[0];
                Sample lease = e.getValue()[1];
                if (none == null || lease == null) {
                    continue; // a filter kept one of the two
                }
                System.out.printf(Locale.ROOT, "| %s | %,.0f | %,.0f | %.1fx | %.2f | %.5f (1 per %,.0f) | %.2f / %.3f us"
                        + " | %.1f / %.1f us |%n", e.getKey().substring(HOT.length()), none.perSecond(),
                        lease.perSecond(), lease.perSecond() / none.perSecond(), none.scriptsPerDecision(),
                        lease.scriptsPerDecision(), 1 / Math.max(lease.scriptsPerDecision(), 1e-9), none.redisCpuUs(),
                        lease.redisCpuUs(), none.p50us(), lease.p50us());
            }
        }
        for (Map.Entry<String, String> e : FIRST_ERROR.entrySet()) {
            System.out.println("first error of " + e.getKey() + ": " + e.getValue());
        }

        ours.close();
        if (redisson != null) {
            redisson.shutdown();
        }
        scripts.close();
        admin.close();
        lettuce.shutdown();
    }

    /** The round with the median decisions/s. */
    static Sample median(List<Sample> samples) {
        List<Sample> list = new ArrayList<>(samples);
        list.sort((a, b) -> Double.compare(a.perSecond(), b.perSecond()));
        return list.get(list.size() / 2);
    }

    static Sample run(Row row, double seconds) throws Exception {
        current = row.group() + " / " + row.name();
        return row.async() ? runAsync(row.width(), seconds, (AsyncCall) row.call())
                : runSync(row.width(), seconds, (SyncCall) row.call());
    }

    static String redisVersion() {
        for (String line : admin.sync().info("server").split("\r?\n")) {
            if (line.startsWith("redis_version:")) {
                return line.substring(14).trim();
            }
        }
        return "?";
    }
}
