package io.ratelimit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.HttpURLConnection;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Injected faults (docs/reliability.md, "Faults"): a subset of the C matrix
 * (core/tests/test_faults.c) through the binding, blocking and asynchronous.
 * A real proxy (Toxiproxy) sits between the client and Redis; Redis itself
 * is made full, flushed or read-only. Each call ends as the matrix says within
 * the timeout, Redis's count afterwards agrees with the admissions the client
 * saw (never a second consumption), and decisions come from Redis again soon
 * after the fault ends. toxiproxy-server comes from $RL_TOXIPROXY_SERVER, else
 * build/deps/toxiproxy/ (scripts/deps.sh builds it): missing, this fails.
 */
class FaultsTest {
    static final Duration TIMEOUT = Duration.ofMillis(250);
    static final long RECONNECT_MAX_MS = 100;
    static final long MARGIN_MS = 250; // scheduling, a loaded 2-core machine
    static final long WINDOW_MS = 700; // how long a fault lasts while the client calls
    static final String RATE = "1000000000/hour"; // never denies: each admission is one count in Redis

    static RedisServer redis;
    static Process toxiproxy;
    static int apiPort;
    static String proxied;

    @BeforeAll
    static void start() throws Exception {
        redis = RedisServer.start();
        String env = System.getenv("RL_TOXIPROXY_SERVER");
        Path binary = env != null && !env.isEmpty() ? Path.of(env)
                : Topology.repoRoot().resolve("build/deps/toxiproxy/toxiproxy-server");
        if (!Files.isExecutable(binary)) {
            fail("toxiproxy-server not found at " + binary + ": run scripts/deps.sh or set RL_TOXIPROXY_SERVER");
        }
        apiPort = RedisServer.freePort();
        toxiproxy = new ProcessBuilder(binary.toString(), "-host", "127.0.0.1", "-port", String.valueOf(apiPort))
                .redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (true) {
            try {
                api("GET", "/version", null);
                break;
            } catch (IOException e) {
                if (!toxiproxy.isAlive() || System.nanoTime() > deadline) {
                    fail("toxiproxy-server did not start", e);
                }
                Thread.sleep(20);
            }
        }
        String made = api("POST", "/proxies", "{\"name\":\"redis\",\"listen\":\"127.0.0.1:0\",\"upstream\":\"127.0.0.1:"
                + redis.port + "\"}");
        Matcher m = Pattern.compile("\"listen\":\"127\\.0\\.0\\.1:(\\d+)\"").matcher(made);
        assertTrue(m.find(), made);
        proxied = "redis://127.0.0.1:" + m.group(1);
    }

    @AfterAll
    static void stop() throws Exception {
        if (toxiproxy != null) {
            toxiproxy.destroy();
            toxiproxy.waitFor(5, TimeUnit.SECONDS);
        }
        if (redis != null) {
            redis.close();
        }
    }

    /** No toxics, and every connection through the proxy cut (one a blackhole dropped bytes of never recovers). */
    @AfterEach
    void heal() throws IOException {
        // cut first: a call sent between removing the toxics and the cut would reach Redis and lose its reply
        api("POST", "/proxies/redis", "{\"enabled\":false}");
        api("POST", "/reset", null); // enables it again
    }

    static String api(String method, String path, String body) throws IOException {
        HttpURLConnection c = (HttpURLConnection) URI.create("http://127.0.0.1:" + apiPort + path).toURL().openConnection();
        c.setRequestMethod(method);
        c.setConnectTimeout(2000);
        c.setReadTimeout(5000);
        if (body != null) {
            c.setDoOutput(true);
            c.setRequestProperty("Content-Type", "application/json");
            try (OutputStream out = c.getOutputStream()) {
                out.write(body.getBytes(StandardCharsets.UTF_8));
            }
        }
        int status = c.getResponseCode();
        if (status / 100 != 2) {
            throw new IllegalStateException("toxiproxy " + method + " " + path + ": HTTP " + status);
        }
        try (InputStream in = c.getInputStream()) {
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
    }

    static void toxic(String type, String stream, String attributes) throws IOException {
        api("POST", "/proxies/redis/toxics", "{\"name\":\"" + type + "_" + stream + "\",\"type\":\"" + type
                + "\",\"stream\":\"" + stream + "\",\"attributes\":" + attributes + "}");
    }

    static ClientOptions options(OnRedisError policy) {
        return ClientOptions.defaults().timeout(TIMEOUT).connectTimeout(Duration.ofMillis(300))
                .reconnectMax(Duration.ofMillis(RECONNECT_MAX_MS)).poolSize(2).onRedisError(policy);
    }

    /** low <= count <= high: exact when nothing stalled */
    static void assertBetween(long low, long high, long count, String id) {
        assertTrue(low <= count && count <= high, id + ": Redis counted " + count + ", expected " + low + ".." + high);
    }

    static long count(RedisServer server, String key) throws IOException {
        Object n = server.command("HGET", key, "count");
        return n == null ? 0 : Long.parseLong((String) n);
    }

    interface Action {
        void run() throws Exception;
    }

    /**
     * What one client saw: admissions, outcomes it cannot know (timed out or
     * cut off after sending), errors; and how long the machine itself stalled
     * meanwhile (a loaded 2-core box, the JIT, GC: a call may take that much
     * longer than its bound, no more). {@code stalled}: the unknown calls
     * that lost {@link #STALLED_MS} to the machine's stalls while they ran,
     * which may have timed out because of them, whatever the fault: the
     * exact counts hold give or take those.
     */
    static final class Tally implements AutoCloseable {
        /** a fifth of the timeout: the watcher, asleep most of the time, is held up less than a caller */
        static final long STALLED_MS = TIMEOUT.toMillis() / 5;
        final OnRedisError policy;
        long calls, admitted, unknown, stalled, slowestMs;
        long slowestFailureMs; // a failed call's time, less the machine's stalls meanwhile
        long recoveredMs = -1;
        volatile long stallMs;
        final AtomicLong stalledTotalMs = new AtomicLong();
        volatile long wokeNanos = System.nanoTime();
        final List<RateLimitException> errors = new ArrayList<>();
        private final AtomicBoolean watching = new AtomicBoolean(true);
        private final Thread watcher = new Thread(() -> {
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30); // a failed test never closes it
            while (watching.get() && System.nanoTime() < end) {
                long t = System.nanoTime();
                try {
                    Thread.sleep(5);
                } catch (InterruptedException e) {
                    return;
                }
                long woke = System.nanoTime(), late = (woke - t) / 1_000_000 - 5;
                stallMs = Math.max(stallMs, late);
                stalledTotalMs.addAndGet(Math.max(0, late));
                wokeNanos = woke;
            }
        });

        /** All the lateness recorded so far, counting a stall still going on. */
        long stalledSoFar() {
            return stalledTotalMs.get() + Math.max(0, (System.nanoTime() - wokeNanos) / 1_000_000 - 5);
        }

        Tally(OnRedisError policy) {
            this.policy = policy;
            watcher.setDaemon(true);
            watcher.start();
        }

        @Override
        public void close() throws InterruptedException {
            watching.set(false);
            watcher.join();
        }

        /** True for a decision from Redis. */
        boolean outcome(long tookMs, long stalledMs, Result r, RateLimitException e) {
            calls++;
            slowestMs = Math.max(slowestMs, tookMs);
            if (e != null || r.fallback()) {
                slowestFailureMs = Math.max(slowestFailureMs, tookMs - stalledMs);
            }
            boolean uncertain = e instanceof TimeoutException || e instanceof ConnectionException;
            if (e != null) {
                // under ALLOW / DENY a timeout or a broken connection is a fallback, never an exception
                assertTrue(!uncertain || policy == OnRedisError.RAISE, e.toString());
                unknown += uncertain ? 1 : 0;
                stalled += uncertain && stalledMs >= STALLED_MS ? 1 : 0;
                errors.add(e);
                return false;
            }
            if (r.fallback()) {
                assertTrue(policy != OnRedisError.RAISE, r.toString());
                assertEquals(policy == OnRedisError.ALLOW, r.allowed(), r.toString());
                unknown++;
                stalled += stalledMs >= STALLED_MS ? 1 : 0;
                return false;
            }
            assertTrue(r.allowed(), "denied by Redis with a limit that never denies: " + r);
            admitted++;
            return true;
        }

        /** Every call within the timeout, and back to Redis by itself. */
        void bounded() throws InterruptedException {
            close();
            assertTrue(slowestMs <= TIMEOUT.toMillis() + MARGIN_MS + stallMs,
                    "a call took " + slowestMs + " ms (the machine stalled " + stallMs + " ms)");
            assertTrue(recoveredMs >= 0, "no decision from Redis within 3 s of the fault's end");
            assertTrue(recoveredMs <= TIMEOUT.toMillis() + RECONNECT_MAX_MS + MARGIN_MS + stallMs,
                    "back after " + recoveredMs + " ms");
        }
    }

    /**
     * One client through one fault: a decision before it (the script gets
     * loaded), calls while it lasts, then calls until Redis decides again.
     * Returns the Redis key of the fixed window it counted in.
     */
    static String run(String url, OnRedisError policy, boolean async, String id, Tally tally, Action inject,
            Action clear) throws Exception {
        try (RateLimitClient client = RateLimitClient.connect(url, options(policy))) {
            Limiter lim = client.limiter("faults", RATE, Algorithm.FIXED_WINDOW);
            assertTrue(once(lim, async, id, tally), "no decision from Redis before the fault");
            inject.run();
            long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(WINDOW_MS);
            while (System.nanoTime() < end) {
                once(lim, async, id, tally);
                Thread.sleep(10);
            }
            clear.run();
            long cleared = System.nanoTime();
            while (System.nanoTime() - cleared < TimeUnit.SECONDS.toNanos(3)) {
                if (once(lim, async, id, tally)) {
                    tally.recoveredMs = (System.nanoTime() - cleared) / 1_000_000;
                    break;
                }
                Thread.sleep(10);
            }
            return lim.key(id);
        }
    }

    static boolean once(Limiter lim, boolean async, String id, Tally tally) throws Exception {
        long t = System.nanoTime(), stalled = tally.stalledSoFar();
        Result r = null;
        RateLimitException error = null;
        try {
            // a hang fails here (5 s), not at the build's time limit
            r = async ? lim.acquireAsync(id).get(5, TimeUnit.SECONDS) : lim.acquire(id);
        } catch (RateLimitException e) {
            error = e;
        } catch (ExecutionException e) {
            if (!(e.getCause() instanceof RateLimitException)) {
                throw e;
            }
            error = (RateLimitException) e.getCause();
        }
        return tally.outcome((System.nanoTime() - t) / 1_000_000, tally.stalledSoFar() - stalled, r, error);
    }

    @Test
    void aLateReplyRanOnceAndTimesOut() throws Exception {
        // the call went out whole and ran; its reply comes after the timeout:
        // a timeout (or the policy), and never a second send
        for (Object[] c : new Object[][] {{OnRedisError.RAISE, false}, {OnRedisError.DENY, true}}) {
            OnRedisError policy = (OnRedisError) c[0];
            boolean async = (Boolean) c[1];
            String id = "late-" + policy + "-" + async;
            Tally t = new Tally(policy);
            String key = run(proxied, policy, async, id, t, () -> toxic("latency", "downstream", "{\"latency\":800}"),
                    () -> api("POST", "/reset", null));
            t.bounded();
            assertTrue(t.unknown > 0, id);
            t.errors.forEach(e -> assertTrue(e instanceof TimeoutException, e.toString()));
            assertBetween(t.admitted + t.unknown - t.stalled, t.admitted + t.unknown, count(redis, key), id);
        }
    }

    @Test
    void aReplyTricklingInTimesOut() throws Exception {
        // a byte every 30 ms: each read gets something, the reply never comes whole in time
        for (boolean async : new boolean[] {false, true}) {
            String id = "drip-" + async;
            Tally t = new Tally(OnRedisError.RAISE);
            String key = run(proxied, OnRedisError.RAISE, async, id, t,
                    () -> toxic("slicer", "downstream", "{\"average_size\":1,\"size_variation\":0,\"delay\":30000}"),
                    () -> api("POST", "/reset", null));
            t.bounded();
            assertFalse(t.errors.isEmpty(), id);
            t.errors.forEach(e -> assertTrue(e instanceof TimeoutException, e.toString()));
            assertBetween(t.admitted + t.unknown - t.stalled, t.admitted + t.unknown, count(redis, key), id);
        }
    }

    @Test
    void aProxyThatNeverAnswersFallsBack() throws Exception {
        // fresh connections the proxy takes and nothing answers: the policy decides, nothing reaches Redis
        for (boolean async : new boolean[] {false, true}) {
            String id = "blackhole-" + async;
            Tally t = new Tally(OnRedisError.ALLOW);
            String key = run(proxied, OnRedisError.ALLOW, async, id, t, () -> {
                redis.command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes");
                toxic("timeout", "upstream", "{\"timeout\":0}");
            }, this::heal);
            t.bounded();
            assertTrue(t.unknown > 0 && t.errors.isEmpty(), id);
            assertBetween(t.admitted, t.admitted + t.stalled, count(redis, key), id);
        }
    }

    @Test
    void refusedFailsFastAndRecovers() throws Exception {
        for (boolean async : new boolean[] {false, true}) {
            String id = "refused-" + async;
            Tally t = new Tally(OnRedisError.RAISE);
            String key = run(proxied, OnRedisError.RAISE, async, id, t,
                    () -> api("POST", "/proxies/redis", "{\"enabled\":false}"), () -> api("POST", "/reset", null));
            t.bounded();
            // fast: no failed call waits a connect timeout (300 ms), besides
            // what the machine stalled meanwhile
            assertTrue(t.slowestFailureMs < 300, "a failed call took " + t.slowestFailureMs + " ms");
            t.errors.forEach(e -> assertTrue(e instanceof ConnectionException, e.toString()));
            assertBetween(t.admitted, t.admitted + t.stalled, count(redis, key), id);
        }
    }

    @Test
    void outOfMemoryIsARedisErrorUnderEveryPolicy() throws Exception {
        // an error reply: the script wrote nothing, and onRedisError does not apply
        for (boolean async : new boolean[] {false, true}) {
            String id = "oom-" + async;
            Tally t = new Tally(OnRedisError.ALLOW);
            String key;
            try {
                key = run(redis.url(), OnRedisError.ALLOW, async, id, t, () -> {
                    redis.command("CONFIG", "SET", "maxmemory-policy", "noeviction");
                    redis.command("CONFIG", "SET", "maxmemory", "1");
                }, () -> redis.command("CONFIG", "SET", "maxmemory", "0"));
            } finally {
                redis.command("CONFIG", "SET", "maxmemory", "0");
            }
            t.bounded();
            assertFalse(t.errors.isEmpty(), id);
            assertEquals(t.stalled, t.unknown, "only the machine's stalls may time a call out here");
            t.errors.forEach(e -> assertTrue(e instanceof RedisErrorException && e.getMessage().contains("OOM"), e.toString()));
            assertBetween(t.admitted, t.admitted + t.stalled, count(redis, key), id);
        }
    }

    @Test
    void scriptFlushUnderLoadReloadsInvisibly() throws Exception {
        // NOSCRIPT proves the script did not run: loaded and sent again, no error, counted once
        for (boolean async : new boolean[] {false, true}) {
            String id = "flush-" + async;
            AtomicBoolean flushing = new AtomicBoolean(true);
            Thread flusher = new Thread(() -> {
                while (flushing.get()) {
                    try {
                        redis.command("SCRIPT", "FLUSH");
                        Thread.sleep(20);
                    } catch (IOException | InterruptedException e) {
                        return;
                    }
                }
            });
            Tally t = new Tally(OnRedisError.RAISE);
            String key;
            try {
                key = run(redis.url(), OnRedisError.RAISE, async, id, t, flusher::start, () -> flushing.set(false));
            } finally {
                flushing.set(false);
                flusher.join();
            }
            t.bounded();
            // no error but a timeout the machine's stalls explain
            assertEquals(t.unknown, t.errors.size(), () -> t.errors.get(0).toString());
            assertEquals(t.stalled, t.unknown, () -> t.errors.get(0).toString());
            assertTrue(t.admitted > 20, t.admitted + " admitted");
            assertBetween(t.admitted, t.admitted + t.stalled, count(redis, key), id);
        }
    }

    @Test
    void aServerDemotedToAReplicaAnswersReadonly() throws Exception {
        // the server the client uses becomes a replica: every write is refused
        // at once (a standalone client does not look elsewhere), under every
        // policy, until it is promoted again
        redis.command("CONFIG", "SET", "repl-diskless-sync-delay", "0"); // else the first sync waits 5 s
        for (boolean async : new boolean[] {false, true}) {
            try (RedisServer server = RedisServer.start()) {
                String id = "readonly-" + async;
                Tally t = new Tally(OnRedisError.DENY);
                String key = run(server.url(), OnRedisError.DENY, async, id, t, () -> {
                    // the sync is loaded from the socket: no dump.rdb left in the working directory
                    server.command("CONFIG", "SET", "repl-diskless-load", "swapdb");
                    server.command("REPLICAOF", "127.0.0.1", String.valueOf(redis.port));
                    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
                    while (!"connected".equals(((List<?>) server.command("ROLE")).get(3))) {
                        assertTrue(System.nanoTime() < deadline, "the replica did not sync");
                        Thread.sleep(10);
                    }
                }, () -> server.command("REPLICAOF", "NO", "ONE"));
                t.bounded();
                assertFalse(t.errors.isEmpty(), id);
                assertEquals(t.stalled, t.unknown, "only the machine's stalls may time a call out here");
                t.errors.forEach(e -> assertTrue(
                        e instanceof RedisErrorException && e.getMessage().startsWith("READONLY"), e.toString()));
                // the warm-up's permit went with the full sync; the master never had the key
                assertNotNull(key);
                assertBetween(t.admitted - 1, t.admitted - 1 + t.stalled, count(server, key), id);
            }
        }
    }

    /** The bytes of a fresh id's fixed-window reply (RESP2, 8 integers): the same for every fresh id. */
    static int freshReplyBytes(long limit, long periodMs) {
        long[] values = {1, limit, limit - 1, -1, periodMs, 0, 1, 0};
        int bytes = "*8\r\n".length();
        for (long v : values) {
            bytes += (":" + v + "\r\n").length();
        }
        return bytes;
    }

    @Test
    void aBatchCutPartWayReportsWhatRedisDecided() throws Exception {
        // both requests reach Redis; the proxy passes the first reply, then
        // stalls (slicer: a pause after each reply) or cuts (limit_data).
        // Two calls (maxBatch 1): the first's decision is reported. One batch
        // call (maxBatch 2): its one reply is cut, both fail (or the policy's).
        int size = freshReplyBytes(1000000000L, 3600000L);
        for (int round = 0; round < 8; round++) {
            int maxBatch = 1 + round / 4;
            boolean stall = round % 2 == 0;
            OnRedisError policy = round / 2 % 2 == 0 ? OnRedisError.RAISE : OnRedisError.DENY;
            String prefix = "batch-" + stall + "-" + policy + "-" + maxBatch + "-";
            boolean batched = maxBatch > 1;
            try (RateLimitClient client = RateLimitClient.connect(proxied, options(policy).maxBatch(maxBatch))) {
                Limiter lim = client.limiter("faults", RATE, Algorithm.FIXED_WINDOW);
                Result warm = lim.acquire(prefix + "warm"); // the scripts loaded, a connection open
                assertEquals(999999999L, warm.remaining());
                assertEquals(Duration.ofHours(1), warm.resetAfter());
                if (stall) {
                    toxic("slicer", "downstream", "{\"average_size\":" + size + ",\"size_variation\":0,\"delay\":"
                            + TIMEOUT.toMillis() * 3000 + "}");
                } else {
                    toxic("limit_data", "downstream", "{\"bytes\":" + (size + 3) + "}");
                }
                List<String> ids = List.of(prefix + "a", prefix + "b");
                long t = System.nanoTime();
                List<Outcome> each = lim.acquireManyEach(ids, 1);
                long took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t);
                if (!batched) {
                    Result first = each.get(0).result();
                    assertTrue(first != null && first.allowed() && !first.fallback(), each.toString());
                    assertEquals(999999999L, first.remaining());
                }
                for (Outcome failed : batched ? each : each.subList(1, 2)) {
                    if (policy == OnRedisError.RAISE) {
                        Class<?> expected = stall ? TimeoutException.class : ConnectionException.class;
                        assertTrue(expected.isInstance(failed.error()), each.toString());
                    } else {
                        assertTrue(failed.result().fallback() && !failed.result().allowed(), each.toString());
                    }
                }
                assertTrue(took <= TIMEOUT.toMillis() + MARGIN_MS, took + " ms");
                heal();
                // the second ran too: a request cut short may have consumed
                assertEquals(1, count(redis, lim.key(ids.get(0))));
                assertEquals(1, count(redis, lim.key(ids.get(1))));
                for (Result r : lim.acquireMany(List.of(prefix + "a", prefix + "c"), 1)) {
                    assertFalse(r.fallback());
                }
            }
        }
    }

    @Test
    void aServerBehindGetsOneBlockingCallAtATime() throws Exception {
        // every reply 500 ms late: once a call timed out the server is behind,
        // and four threads send it one call at a time; the others fail at
        // once with BacklogException (never sent), or the policy decides
        for (OnRedisError policy : new OnRedisError[] {OnRedisError.RAISE, OnRedisError.ALLOW}) {
            try (RateLimitClient client = RateLimitClient.connect(proxied, options(policy).poolSize(4).maxInFlight(20))) {
                Limiter lim = client.limiter("faults", RATE, Algorithm.FIXED_WINDOW);
                String id = "backlog-" + policy;
                assertTrue(lim.acquire(id).allowed());
                toxic("latency", "upstream", "{\"latency\":500}");
                List<Object> outcomes = Collections.synchronizedList(new ArrayList<>());
                AtomicBoolean stop = new AtomicBoolean();
                List<Thread> threads = new ArrayList<>();
                for (int i = 0; i < 4; i++) {
                    Thread th = new Thread(() -> {
                        while (!stop.get()) {
                            long t = System.nanoTime();
                            Object outcome;
                            try {
                                outcome = lim.acquire(id);
                            } catch (RateLimitException e) {
                                outcome = e;
                            }
                            outcomes.add(new Object[] {outcome, (System.nanoTime() - t) / 1_000_000});
                        }
                    });
                    th.start();
                    threads.add(th);
                }
                Thread.sleep(1000);
                stop.set(true);
                for (Thread th : threads) {
                    th.join(5000);
                }
                // not sent: BacklogException, or (allow) a fallback before the timeout could have run out
                long notSent = 0, slowNotSent = 0;
                for (Object o : outcomes) {
                    Object outcome = ((Object[]) o)[0];
                    boolean fast = (Long) ((Object[]) o)[1] < TIMEOUT.toMillis();
                    if (outcome instanceof BacklogException) {
                        assertEquals(Status.BACKLOG, ((BacklogException) outcome).status());
                        assertTrue(((BacklogException) outcome).getMessage().startsWith("not sent"), outcome.toString());
                        notSent++;
                        slowNotSent += fast ? 0 : 1;
                    } else if (outcome instanceof Result) {
                        assertEquals(policy == OnRedisError.ALLOW, ((Result) outcome).fallback(), outcome.toString());
                        notSent += fast ? 1 : 0;
                    } else {
                        assertInstanceOf(TimeoutException.class, outcome, policy.toString());
                    }
                }
                assertTrue(notSent > outcomes.size() / 2, policy + ": " + notSent + " of " + outcomes.size());
                assertEquals(0, slowNotSent);
                api("POST", "/reset", null);
            }
        }
        assertEquals(Status.BACKLOG, Status.fromCode(-9));
        assertInstanceOf(BacklogException.class, RateLimitException.of(Status.BACKLOG, "not sent"));
        assertInstanceOf(RedisFailureException.class, RateLimitException.of(Status.BACKLOG, "not sent"));
    }
}
