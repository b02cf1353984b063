// The Java side of the soak (scripts/soak.sh compiles it against the jar and
// tests/soak/soak.py runs it):
//   java -cp ratelimit.jar:classes SoakWorker URL SECONDS LOGDIR INTERVAL LIMITERS
// The same workload and log format as worker.py (see there): sync and
// acquireAsync-style decisions on every algorithm and op, the semaphore, lock
// and delay queue, threads started and stopped, clients opened and closed
// (one closed with decisions in flight). Prints Q0 / Q1 (fds, heap after GC,
// threads at a quiescent point), HEAP samples (after a forced GC) every
// INTERVAL seconds, and STATS. Exit status 1 when anything unexpected happened.
import io.ratelimit.Algorithm;
import io.ratelimit.ClientClosedException;
import io.ratelimit.ClientOptions;
import io.ratelimit.ConnectionException;
import io.ratelimit.DelayQueue;
import io.ratelimit.DistributedLock;
import io.ratelimit.Limiter;
import io.ratelimit.LimiterConfig;
import io.ratelimit.Lock;
import io.ratelimit.NotAcquiredException;
import io.ratelimit.OnRedisError;
import io.ratelimit.Permit;
import io.ratelimit.Rate;
import io.ratelimit.RateLimitClient;
import io.ratelimit.RedisErrorException;
import io.ratelimit.Request;
import io.ratelimit.Result;
import io.ratelimit.Semaphore;
import java.io.BufferedWriter;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.stream.Stream;

public class SoakWorker {
    static final String[] IDS = {"a", "b"};
    static final Algorithm[] BUCKETS = {Algorithm.TOKEN_BUCKET, Algorithm.LEAKY_BUCKET, Algorithm.GCRA};
    static String url;
    static volatile boolean stop;
    static final Map<String, LongAdder> counts = new ConcurrentHashMap<>();
    static final Map<String, Boolean> messages = new ConcurrentHashMap<>();
    static final AtomicInteger unexpected = new AtomicInteger();
    static final AtomicLong seq = new AtomicLong();
    static BufferedWriter log;
    static final List<Object[]> checked = new ArrayList<>(); // {name, LimiterConfig}

    interface Op {
        void run() throws Exception;
    }

    record Named(String name, Limiter limiter, boolean bucket) {}

    static double now() {
        Instant t = Instant.now();
        return t.getEpochSecond() * 1000.0 + t.getNano() / 1e6;
    }

    static void count(String key) {
        counts.computeIfAbsent(key, k -> new LongAdder()).increment();
    }

    static void write(String line) {
        synchronized (SoakWorker.class) {
            try {
                log.write(line);
            } catch (IOException e) {
                throw new RuntimeException(e);
            }
        }
    }

    static Throwable unwrap(Throwable t) {
        while (t instanceof CompletionException && t.getCause() != null) t = t.getCause();
        return t;
    }

    /** Sorts an outcome: a denial, a Redis failure the faults explain, or something unexpected. */
    static void failed(Throwable t) {
        t = unwrap(t);
        if (t instanceof io.ratelimit.InvalidArgumentException && lostConfig(t)) {
            return;
        }
        if (t instanceof NotAcquiredException) {
            count("not_acquired");
        } else if (t instanceof ConnectionException || t instanceof io.ratelimit.TimeoutException
                || t instanceof io.ratelimit.BacklogException
                || t instanceof RedisErrorException) {
            count("redis_failure");
            write(String.format("E %.1f %s%n", now(), t.getClass().getSimpleName()));
            if (messages.size() < 20) {
                String m = String.valueOf(t.getMessage());
                messages.put(t.getClass().getSimpleName() + ": " + m.substring(0, Math.min(100, m.length())), true);
            }
        } else {
            if (unexpected.incrementAndGet() <= 20) {
                System.err.println("SoakWorker: UNEXPECTED:");
                t.printStackTrace();
            }
        }
    }

    static volatile RateLimitClient sharedClient; // to store the spec again with

    /** A restart without saving lost the stored spec: store it again (the report counts these). */
    static boolean lostConfig(Throwable t) {
        if (!String.valueOf(t.getMessage()).contains("no configuration is stored for limiter 'soak-stored'")) {
            return false;
        }
        count("config_restored");
        guard(() -> sharedClient.configureIfAbsent("soak-stored", LimiterConfig.of(Algorithm.GCRA, "10/1000ms")));
        return true;
    }

    static void guard(Op op) {
        try {
            op.run();
        } catch (Throwable t) {
            failed(t);
        }
    }

    /** Counts a decision; logs it when it consumed permits of a checked limiter (name given). */
    static void decided(Result r, String name, String id, double t0, double t1) {
        count("decisions");
        if (r.fallback()) {
            count("fallback");
            write(String.format("E %.1f fallback%n", t1 > 0 ? t1 : now()));
        } else if (r.allowed()) {
            count("admitted");
            if (name != null) {
                write(String.format("A %s %s %.1f %.1f %d %d%n", name, id, t0, t1, r.granted(), r.resetAfter().toMillis()));
            }
        } else {
            count("denied");
        }
    }

    static void decided(Result r) {
        decided(r, null, null, 0, 0);
    }

    // ---- limiters -------------------------------------------------------------------------

    static void loadChecked(Path file) throws IOException {
        for (String line : Files.readAllLines(file)) {
            String[] f = line.split("#")[0].trim().split("\\s+");
            if (f.length < 3) continue;
            List<Rate> rates = new ArrayList<>();
            for (String r : f[2].split(";")) {
                String[] p = r.split("/");
                Rate rate = Rate.of(Long.parseLong(p[0]), Duration.ofMillis(Long.parseLong(p[1])));
                rates.add(p.length > 2 ? rate.withBurst(Long.parseLong(p[2])) : rate);
            }
            checked.add(new Object[] {f[0], LimiterConfig.of(Algorithm.fromName(f[1]), rates)});
        }
    }

    static List<Named> checkedLimiters(RateLimitClient c) {
        List<Named> out = new ArrayList<>();
        for (Object[] e : checked) out.add(new Named((String) e[0], c.limiter((String) e[0], (LimiterConfig) e[1]), false));
        return out;
    }

    static boolean isBucket(Algorithm a) {
        for (Algorithm b : BUCKETS) if (a == b) return true;
        return false;
    }

    static Limiter stored(RateLimitClient c) {
        try {
            return c.limiter("soak-stored");
        } catch (io.ratelimit.InvalidArgumentException e) {
            if (!lostConfig(e)) throw e;
            return c.limiter("soak-stored");
        }
    }

    static List<Named> otherLimiters(RateLimitClient c) {
        List<Named> out = new ArrayList<>();
        for (Algorithm a : Algorithm.values()) {
            Rate rate = Rate.parse("10/1000ms");
            if (a == Algorithm.TOKEN_BUCKET || a == Algorithm.GCRA) rate = rate.withBurst(15);
            out.add(new Named(null, c.limiter("soak-x-java-" + a.wireName(), LimiterConfig.of(a, rate)), isBucket(a)));
            out.add(new Named(null, c.limiter("soak-xm-java-" + a.wireName(), "5/500ms;20/2000ms", a), isBucket(a)));
        }
        for (Algorithm a : BUCKETS) {
            out.add(new Named(null, c.limiter("soak-xi-java-" + a.wireName(),
                    LimiterConfig.of(a, Rate.parse("10/1000ms")).initialTokens(0)), true));
        }
        for (Algorithm a : new Algorithm[] {Algorithm.FIXED_WINDOW, Algorithm.GCRA}) {
            out.add(new Named(null, c.limiter("soak-xp-java-" + a.wireName(),
                    LimiterConfig.of(a, Rate.parse("10/1000ms")).perClient()), isBucket(a)));
        }
        out.add(new Named(null, stored(c), false));
        return out;
    }

    // ---- sync operations ----------------------------------------------------------------

    static void checkedOp(List<Named> lims, Random rng) {
        Named n = lims.get(rng.nextInt(lims.size()));
        String id = IDS[rng.nextInt(IDS.length)];
        double k = rng.nextDouble();
        double t0 = now();
        Result r;
        if (k < 0.4) {
            r = n.limiter.acquire(id, rng.nextInt(4) == 0 ? 2 : 1);
        } else if (k < 0.55) {
            r = n.limiter.acquireAtMost(id, 3);
        } else if (k < 0.7) {
            decided(n.limiter.peek(id, 1)); // consumes nothing
            return;
        } else if (k < 0.8) {
            List<Result> rs = n.limiter.acquireMany(List.of(IDS), 1);
            double t1 = now();
            for (int i = 0; i < IDS.length; i++) decided(rs.get(i), n.name, IDS[i], t0, t1);
            return;
        } else if (k < 0.9) {
            RateLimitClient c = clientOf(n);
            List<Result> rs = c.execute(List.of(Request.acquire(n.limiter, "a", 1), Request.peek(n.limiter, "b", 1)));
            double t1 = now();
            decided(rs.get(0), n.name, "a", t0, t1);
            decided(rs.get(1));
            return;
        } else {
            r = n.limiter.tryAcquire(id, 1, Duration.ofMillis(200));
        }
        decided(r, n.name, id, t0, now());
    }

    // execute() needs the limiter's own client; the workers keep that pairing here
    static final Map<Limiter, RateLimitClient> owners = new ConcurrentHashMap<>();

    static RateLimitClient clientOf(Named n) {
        return owners.get(n.limiter);
    }

    static List<Named> own(RateLimitClient c, List<Named> lims) {
        for (Named n : lims) owners.put(n.limiter, c);
        return lims;
    }

    static void forget(List<Named> lims) {
        for (Named n : lims) owners.remove(n.limiter);
    }

    static void otherOp(List<Named> lims, Random rng) {
        Named n = lims.get(rng.nextInt(lims.size()));
        Limiter lim = n.limiter;
        String id = "u" + rng.nextInt(30);
        double k = rng.nextDouble();
        if (k < 0.3) {
            decided(lim.acquire(id, 1 + rng.nextInt(3)));
        } else if (k < 0.4) {
            decided(lim.peek(id, 1));
        } else if (k < 0.55 && n.bucket) {
            lim.reserve(id, 1, Duration.ofMillis(100)); // throws RateLimitExceededException beyond
            count("decisions");
        } else if (k < 0.7) {
            decided(lim.acquireAtMost(id, 5));
        } else if (k < 0.8) {
            decided(lim.refund(id, 2));
        } else if (k < 0.85) {
            lim.reset(id);
        } else if (k < 0.92) {
            List<String> ids = new ArrayList<>();
            for (int i = 0; i < 4; i++) ids.add("u" + rng.nextInt(30));
            for (Result r : lim.acquireMany(ids, 1)) decided(r);
        } else if (k < 0.96) {
            decided(lim.acquireOrThrow(id, 1)); // throws RateLimitExceededException when denied
        } else {
            decided(lim.tryAcquire(id, 1, Duration.ofMillis(100)));
        }
    }

    /** Takes a permit or the lock, holds it briefly, releases it; logs the holding. */
    static void primitiveOp(RateLimitClient c, Random rng, Duration wait) throws InterruptedException {
        boolean sem = rng.nextBoolean();
        String name = sem ? "soak-sem" : "soak-lock";
        AutoCloseable held;
        long fence;
        if (sem) {
            Semaphore s = c.semaphore(name, 3, Duration.ofSeconds(2));
            Optional<Permit> p = wait.isZero() ? s.tryAcquire() : Optional.of(s.acquire(wait));
            if (p.isEmpty()) {
                count("not_acquired");
                return;
            }
            held = p.get();
            fence = p.get().fencingToken();
        } else {
            DistributedLock l = c.lock(name, Duration.ofSeconds(2));
            Optional<Lock> p = wait.isZero() ? l.tryAcquire() : Optional.of(l.acquire(wait));
            if (p.isEmpty()) {
                count("not_acquired");
                return;
            }
            held = p.get();
            fence = p.get().fencingToken();
        }
        double tAcq = now(), tRel = tAcq;
        boolean ok = false;
        try {
            Thread.sleep(2 + rng.nextInt(18));
            tRel = now();
            ok = held instanceof Permit ? ((Permit) held).release() : ((Lock) held).release();
        } finally {
            write(String.format("H %s %s %.1f %.1f %d %d%n", sem ? "S" : "L", name, tAcq, ok ? tRel : tAcq, fence,
                    ok ? 1 : 0));
        }
    }

    static void queueOp(RateLimitClient c, Random rng) {
        DelayQueue q = c.delayQueue("soak-q");
        for (int i = 1 + rng.nextInt(3); i > 0; i--) {
            String msg = "java-" + seq.incrementAndGet();
            int delay = rng.nextInt(300);
            double t0 = now();
            if (q.push(msg, Duration.ofMillis(delay))) write(String.format("P %s %.1f %d%n", msg, t0, delay));
        }
        List<String> got = q.pop(10, Duration.ofMillis(200));
        double t1 = now();
        for (String m : got) write(String.format("D %s %.1f%n", m, t1));
    }

    static ClientOptions options(Random rng, boolean anyPolicy) {
        OnRedisError[] policies = {OnRedisError.RAISE, OnRedisError.RAISE, OnRedisError.ALLOW, OnRedisError.DENY};
        return ClientOptions.defaults().poolSize(2)
                .onRedisError(anyPolicy ? policies[rng.nextInt(policies.length)] : OnRedisError.RAISE);
    }

    /** A short-lived thread: on the shared client or on one of its own, closed when it ends. */
    static void churn(RateLimitClient shared, long seed) {
        Random rng = new Random(seed);
        long until = System.nanoTime() + (500 + rng.nextInt(1500)) * 1_000_000L;
        RateLimitClient own = null;
        List<Named> ch = List.of(), others = List.of();
        try {
            if (rng.nextBoolean()) {
                own = RateLimitClient.connect(url, options(rng, true));
                count("clients_opened");
            }
            RateLimitClient c = own != null ? own : shared;
            ch = own(c, checkedLimiters(c));
            others = otherLimiters(c);
            while (System.nanoTime() < until && !stop) {
                double k = rng.nextDouble();
                List<Named> lims = ch, lims2 = others;
                if (k < 0.5) guard(() -> checkedOp(lims, rng));
                else if (k < 0.95) guard(() -> otherOp(lims2, rng));
                else guard(() -> primitiveOp(c, rng, Duration.ZERO));
                Thread.sleep(rng.nextInt(7));
            }
        } catch (Throwable t) {
            failed(t); // opening or making limiters during an outage
        } finally {
            forget(ch);
            if (own != null) own.close();
        }
    }

    static void primitives(RateLimitClient c, long seed) {
        Random rng = new Random(seed);
        while (!stop) {
            guard(() -> primitiveOp(c, rng, Duration.ofMillis(500)));
            guard(() -> queueOp(c, rng));
        }
    }

    // ---- asynchronous decisions ---------------------------------------------------------

    /** Holds a permit or the lock briefly (no thread waits), then releases it and logs the holding. */
    static CompletableFuture<Void> holdAsync(String kind, String name, long fence,
            java.util.function.Supplier<CompletableFuture<Boolean>> release, Random rng) {
        double tAcq = now();
        CompletableFuture<Void> out = new CompletableFuture<>();
        CompletableFuture.delayedExecutor(2 + rng.nextInt(18), TimeUnit.MILLISECONDS, Runnable::run).execute(() -> {
            double tRel = now();
            release.get().whenComplete((ok, e) -> {
                boolean released = e == null && ok;
                write(String.format("H %s %s %.1f %.1f %d %d%n", kind, name, tAcq, released ? tRel : tAcq, fence,
                        released ? 1 : 0));
                if (e != null) out.completeExceptionally(e);
                else out.complete(null);
            });
        });
        return out;
    }

    /** The semaphore, lock and delay queue on the core's asynchronous waits, some cancelled while waiting. */
    static CompletableFuture<?> asyncPrimitive(RateLimitClient c, Random rng) {
        Semaphore sem = c.semaphore("soak-sem", 3, Duration.ofSeconds(2));
        DistributedLock lock = c.lock("soak-lock", Duration.ofSeconds(2));
        double j = rng.nextDouble();
        if (j < 0.3) {
            return sem.acquireAsync(Duration.ofMillis(500))
                    .thenCompose(p -> holdAsync("S", "soak-sem", p.fencingToken(), p::releaseAsync, rng));
        } else if (j < 0.6) {
            return lock.acquireAsync(Duration.ofMillis(500))
                    .thenCompose(l -> holdAsync("L", "soak-lock", l.fencingToken(), l::releaseAsync, rng));
        } else if (j < 0.8) {
            // given up while waiting: the binding cancels the wait and gives back a grant that raced it
            boolean isSem = rng.nextBoolean();
            CompletableFuture<?> f = isSem ? sem.acquireAsync(Duration.ofMillis(500))
                    : lock.acquireAsync(Duration.ofMillis(500));
            CompletableFuture.delayedExecutor(rng.nextInt(5), TimeUnit.MILLISECONDS, Runnable::run)
                    .execute(() -> f.cancel(false));
            return f.handle((held, e) -> {
                if (held == null) {
                    if (unwrap(e) instanceof java.util.concurrent.CancellationException) count("cancelled");
                    else failed(e);
                    return CompletableFuture.completedFuture(null);
                }
                // done before the cancel: held normally
                return held instanceof Permit
                        ? holdAsync("S", "soak-sem", ((Permit) held).fencingToken(), ((Permit) held)::releaseAsync, rng)
                        : holdAsync("L", "soak-lock", ((Lock) held).fencingToken(), ((Lock) held)::releaseAsync, rng);
            }).thenCompose(x -> x);
        } else {
            DelayQueue q = c.delayQueue("soak-q");
            String msg = "java-" + seq.incrementAndGet();
            int delay = rng.nextInt(300);
            double t0 = now();
            return q.pushAsync(msg, Duration.ofMillis(delay)).thenCompose(pushed -> {
                if (pushed) write(String.format("P %s %.1f %d%n", msg, t0, delay));
                return q.popAsync(10, Duration.ofMillis(200));
            }).thenAccept(got -> {
                double t1 = now();
                for (String m : got) write(String.format("D %s %.1f%n", m, t1));
            });
        }
    }

    /** One asynchronous decision or primitive; the permit of `inflight` comes back when it completes. */
    static CompletableFuture<?> asyncOp(RateLimitClient c, List<Named> ch, List<Named> others, Random rng,
            java.util.concurrent.Semaphore inflight) {
        double k = rng.nextDouble();
        double t0 = now();
        CompletableFuture<?> f;
        if (k < 0.1) {
            f = asyncPrimitive(c, rng);
        } else if (k < 0.55) {
            Named n = ch.get(rng.nextInt(ch.size()));
            String id = IDS[rng.nextInt(IDS.length)];
            double j = rng.nextDouble();
            CompletableFuture<Result> r = j < 0.5 ? n.limiter.acquireAsync(id, 1)
                    : j < 0.7 ? n.limiter.acquireAtMostAsync(id, 3)
                    : j < 0.85 ? n.limiter.tryAcquireAsync(id, 1, Duration.ofMillis(200))
                    : n.limiter.peekAsync(id, 1);
            boolean consumes = j < 0.85;
            f = r.whenComplete((res, e) -> {
                if (e == null) {
                    if (consumes) decided(res, n.name, id, t0, now());
                    else decided(res);
                }
            });
        } else {
            Named n = others.get(rng.nextInt(others.size()));
            String id = "u" + rng.nextInt(30);
            double j = rng.nextDouble();
            if (j < 0.2 && n.bucket) {
                f = n.limiter.reserveAsync(id, 1, Duration.ofMillis(100)).thenRun(() -> count("decisions"));
            } else {
                CompletableFuture<Result> r = j < 0.4 ? n.limiter.acquireAsync(id, 1 + rng.nextInt(3))
                        : j < 0.55 ? n.limiter.peekAsync(id, 1)
                        : j < 0.7 ? n.limiter.acquireAtMostAsync(id, 5)
                        : j < 0.85 ? n.limiter.refundAsync(id, 2)
                        : n.limiter.acquireOrThrowAsync(id, 1);
                f = r.thenAccept(SoakWorker::decided);
            }
        }
        return f.whenComplete((x, e) -> inflight.release());
    }

    static void async(RateLimitClient shared, long seed) {
        Random rng = new Random(seed);
        java.util.concurrent.Semaphore inflight = new java.util.concurrent.Semaphore(64);
        List<Named> ch = null, others = null;
        long nextClose = System.nanoTime();
        try {
            while (!stop) {
                try {
                    if (ch == null) {
                        ch = checkedLimiters(shared);
                        others = otherLimiters(shared);
                    }
                    if (System.nanoTime() >= nextClose) {
                        closeInFlight(rng);
                        nextClose = System.nanoTime() + 2_000_000_000L;
                    }
                    inflight.acquire();
                    asyncOp(shared, ch, others, rng, inflight).whenComplete((x, e) -> {
                        if (e != null) failed(e);
                    });
                    if (rng.nextInt(4) == 0) Thread.sleep(1);
                } catch (InterruptedException e) {
                    throw e;
                } catch (Throwable t) {
                    failed(t); // making limiters during an outage
                    Thread.sleep(100);
                }
            }
            if (!inflight.tryAcquire(64, 60, TimeUnit.SECONDS)) {
                failed(new IllegalStateException("asynchronous decisions still pending 60 s after the end"));
            }
        } catch (InterruptedException e) {
            failed(e);
        }
    }

    /** A client closed with decisions in flight: each completes once, a result or CLOSED. */
    static void closeInFlight(Random rng) {
        RateLimitClient c;
        try {
            c = RateLimitClient.connect(url, options(rng, true));
        } catch (Throwable t) {
            failed(t);
            return;
        }
        count("clients_opened");
        List<CompletableFuture<Result>> fs = new ArrayList<>();
        try {
            List<Named> ch = checkedLimiters(c);
            double t0 = now();
            for (int i = 0; i < 40; i++) {
                Named n = ch.get(rng.nextInt(ch.size()));
                String id = IDS[rng.nextInt(IDS.length)];
                fs.add(n.limiter.acquireAsync(id, 1).whenComplete((res, e) -> {
                    if (e == null) decided(res, n.name, id, t0, now());
                }));
            }
        } catch (Throwable t) {
            failed(t);
        } finally {
            c.close();
        }
        for (CompletableFuture<Result> f : fs) {
            if (!f.isDone()) {
                failed(new IllegalStateException("a decision still pending after its client closed"));
                continue;
            }
            try {
                f.join();
            } catch (Throwable t) {
                if (unwrap(t) instanceof ClientClosedException) count("closed_in_flight");
                else failed(t);
            }
        }
    }

    // ---- measurements and the run ---------------------------------------------------------------

    static long fds() throws IOException {
        try (Stream<Path> s = Files.list(Path.of("/proc/self/fd"))) {
            return s.count() - 1; // the listing's own
        }
    }

    static long heapAfterGc() {
        System.gc();
        return ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
    }

    /** fds, heap after GC and the library's threads at a quiescent point (nothing open). */
    static void quiescent(String tag) throws Exception {
        List<String> ours = new ArrayList<>();
        for (int i = 0; i < 200; i++) {
            ours.clear();
            for (Thread t : Thread.getAllStackTraces().keySet()) {
                if (t.getName().startsWith("ratelimit") || t.getName().startsWith("soak-")) ours.add(t.getName());
            }
            if (ours.isEmpty()) break;
            Thread.sleep(50); // I/O threads end with their client's close; give them a moment
        }
        long heap = heapAfterGc();
        long rss = Files.readAllLines(Path.of("/proc/self/status")).stream().filter(l -> l.startsWith("VmRSS:"))
                .mapToLong(l -> Long.parseLong(l.replaceAll("[^0-9]", ""))).findFirst().orElse(-1);
        System.out.printf("%s fds=%d heap=%d rss_kb=%d threads=%d %s%n", tag, fds(), heap, rss, Thread.activeCount(),
                String.join(",", ours));
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        url = args[0];
        double seconds = Double.parseDouble(args[1]);
        Path logdir = Path.of(args[2]);
        double interval = Double.parseDouble(args[3]);
        loadChecked(Path.of(args[4]));
        log = Files.newBufferedWriter(logdir.resolve("java-" + ProcessHandle.current().pid() + ".log"));
        Random rng = new Random();

        // warm-up: one of everything, so lazily made things exist before Q0
        try (RateLimitClient c = RateLimitClient.connect(url, options(rng, false))) {
            sharedClient = c;
            c.configureIfAbsent("soak-stored", LimiterConfig.of(Algorithm.GCRA, "10/1000ms"));
            List<Named> ch = own(c, checkedLimiters(c)), others = otherLimiters(c);
            for (int i = 0; i < 50; i++) {
                guard(() -> checkedOp(ch, rng));
                guard(() -> otherOp(others, rng));
            }
            guard(() -> primitiveOp(c, rng, Duration.ofMillis(500)));
            guard(() -> queueOp(c, rng));
            java.util.concurrent.Semaphore inflight = new java.util.concurrent.Semaphore(64);
            for (int i = 0; i < 50; i++) {
                inflight.acquire();
                asyncOp(c, ch, others, rng, inflight);
            }
            inflight.acquire(64);
            closeInFlight(rng);
            Thread t = new Thread(() -> churn(c, 1), "soak-churn");
            t.start();
            t.join();
            forget(ch);
        }
        counts.clear();
        quiescent("Q0");

        long end = System.nanoTime() + (long) (seconds * 1e9);
        RateLimitClient shared = RateLimitClient.connect(url, ClientOptions.defaults().poolSize(4));
        sharedClient = shared;
        count("clients_opened");
        List<Thread> threads = new ArrayList<>();
        threads.add(new Thread(() -> async(shared, rng.nextLong()), "soak-async"));
        threads.add(new Thread(() -> primitives(shared, rng.nextLong()), "soak-primitives"));
        Thread heap = new Thread(() -> {
            while (!stop) {
                try {
                    Thread.sleep((long) (interval * 1000));
                } catch (InterruptedException e) {
                    return;
                }
                System.out.printf("HEAP %.0f %d%n", now(), heapAfterGc());
            }
        }, "soak-heap");
        heap.setDaemon(true);
        threads.forEach(Thread::start);
        heap.start();
        List<Thread> churn = new ArrayList<>();
        while (System.nanoTime() < end) {
            churn.removeIf(t -> !t.isAlive());
            while (churn.size() < 3) {
                long seed = rng.nextLong();
                Thread t = new Thread(() -> churn(shared, seed), "soak-churn");
                t.start();
                count("threads_started");
                churn.add(t);
            }
            Thread.sleep(50);
        }
        stop = true;
        heap.interrupt();
        threads.addAll(churn);
        threads.add(heap);
        for (Thread t : threads) {
            t.join(60_000);
            if (t.isAlive()) {
                unexpected.incrementAndGet();
                System.err.println("SoakWorker: UNEXPECTED: thread " + t.getName() + " did not stop:");
                for (StackTraceElement e : t.getStackTrace()) System.err.println("    at " + e);
            }
        }
        shared.close();
        log.flush();
        quiescent("Q1"); // the log file is open at Q0 too
        log.close();
        Map<String, Long> sorted = new TreeMap<>();
        counts.forEach((k, v) -> sorted.put(k, v.sum()));
        StringBuilder sb = new StringBuilder("STATS");
        sorted.forEach((k, v) -> sb.append(' ').append(k).append('=').append(v));
        System.out.println(sb);
        for (String m : new TreeMap<>(messages).keySet()) System.out.println("ERROR_SAMPLE " + m);
        System.out.println("UNEXPECTED " + unexpected.get());
        System.out.flush();
        // halt: a thread stuck in a call must not keep the JVM alive
        Runtime.getRuntime().halt(unexpected.get() > 0 ? 1 : 0);
    }
}
