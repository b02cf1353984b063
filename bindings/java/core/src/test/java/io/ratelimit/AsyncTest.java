package io.ratelimit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The asynchronous decisions (rl_submit through JNI): exactness with
 * thousands in flight, the same answers and exceptions as the blocking calls,
 * close with decisions in flight, outages, and the I/O thread's life. No
 * assertion on speed; the time-outs on get() only keep a bug from hanging
 * the build.
 */
class AsyncTest extends RedisTestBase {
    static final long HANG = 60; // seconds: a future not done by then is a bug

    /**
     * A client per test (hides the class's shared one): its I/O thread and
     * connection live for one test, and asyncInFlight() counts only its own.
     */
    RateLimitClient client;

    @BeforeEach
    void openClient() {
        client = RateLimitClient.connect(redis.url());
    }

    @AfterEach
    void closeClient() {
        client.close();
    }

    @Test
    // a core bug fixed in cc975f8: the I/O connection idle for more than two
    // command timeouts was taken for stuck and dropped at the next request
    void aDecisionAfterTheConnectionWasIdle() throws Exception {
        try (RateLimitClient c = RateLimitClient.connect(redis.url(),
                ClientOptions.defaults().commandTimeout(Duration.ofMillis(200)))) {
            Limiter lim = c.limiter("async-idle", "100/minute", Algorithm.GCRA);
            assertTrue(lim.acquireAsync("u").get(HANG, TimeUnit.SECONDS).allowed());
            Thread.sleep(600); // idle for three command timeouts
            Result r = lim.acquireAsync("u").get(HANG, TimeUnit.SECONDS);
            assertTrue(r.allowed() && !r.fallback(), r.toString());
        }
    }

    // ---- exactness under concurrency ------------------------------------------

    @ParameterizedTest
    @EnumSource(Algorithm.class)
    void fiveThousandInFlightOnOneKeyAdmitExactlyTheLimit(Algorithm algorithm) throws Exception {
        int limit = 1000;
        int threads = 16;
        int perThread = 5000 / threads + 1;
        // a long period: nothing refills or slides out during the test
        Limiter lim = client.limiter("async-hot", Rate.of(limit, Duration.ofDays(1)), algorithm);
        List<CompletableFuture<Result>> all = submitFromThreads(threads, perThread, () -> lim.acquireAsync("one-key"));
        int admitted = 0;
        for (CompletableFuture<Result> f : all) {
            Result r = f.get(HANG, TimeUnit.SECONDS);
            assertFalse(r.fallback(), r.toString());
            if (r.allowed()) {
                admitted++;
            }
        }
        assertEquals(limit, admitted, algorithm + ": admitted of " + all.size());
        assertFalse(lim.peek("one-key").allowed());
        assertEquals(0, client.asyncInFlight());
    }

    /**
     * Decisions queued together go in one script call (ClientOptions.maxBatch,
     * default 16): fewer calls than decisions, exact all the same; maxBatch(1)
     * sends one call each.
     */
    @Test
    void decisionsQueuedTogetherShareScriptCalls() throws Exception {
        assertThrows(InvalidArgumentException.class,
                () -> RateLimitClient.connect(redis.url(), ClientOptions.defaults().maxBatch(0)));
        assertThrows(InvalidArgumentException.class,
                () -> RateLimitClient.connect(redis.url(), ClientOptions.defaults().maxBatch(101)));
        for (Integer maxBatch : new Integer[] {null, 1}) {
            try (RateLimitClient c = RateLimitClient.connect(redis.url(), ClientOptions.defaults().maxBatch(maxBatch))) {
                Limiter lim = c.limiter("async-batch-" + maxBatch, Rate.of(1000, Duration.ofDays(1)), Algorithm.GCRA);
                lim.acquireAsync("warm").get(HANG, TimeUnit.SECONDS); // connected, script loaded
                long before = scriptCalls();
                List<CompletableFuture<Result>> all = submitFromThreads(4, 1000, () -> lim.acquireAsync("k"));
                int admitted = 0;
                for (CompletableFuture<Result> f : all) {
                    admitted += f.get(HANG, TimeUnit.SECONDS).allowed() ? 1 : 0;
                }
                long calls = scriptCalls() - before;
                assertEquals(1000, admitted);
                if (maxBatch == null) {
                    assertTrue(calls < all.size() / 2, calls + " script calls for " + all.size());
                } else {
                    assertEquals(all.size(), calls);
                }
            }
        }
    }

    @ParameterizedTest
    @EnumSource(Algorithm.class)
    void explicitClockExactWithMultiplePermits(Algorithm algorithm) throws Exception {
        // one instant for every call: the limit is exact for every algorithm
        long now = 1_700_000_000_000L;
        Limiter lim = client.limiter("async-clock", Rate.of(500, Duration.ofSeconds(10)), algorithm);
        List<CompletableFuture<Result>> all = submitFromThreads(8, 200, () -> lim.at(now).acquireAsync("k", 2));
        long admitted = 0;
        for (CompletableFuture<Result> f : all) {
            if (f.get(HANG, TimeUnit.SECONDS).allowed()) {
                admitted++;
            }
        }
        assertEquals(250, admitted, algorithm.toString());
    }

    // ---- the same answers as the blocking API ----------------------------------

    @ParameterizedTest
    @EnumSource(Algorithm.class)
    void sameResultsAsTheBlockingApiForTheSameClockSequence(Algorithm algorithm) throws Exception {
        Limiter lim = client.limiter("async-same", Rate.of(5, Duration.ofSeconds(2)), algorithm);
        boolean reserves = algorithm == Algorithm.TOKEN_BUCKET || algorithm == Algorithm.LEAKY_BUCKET
                || algorithm == Algorithm.GCRA;
        long t = 1_700_000_000_000L;
        long[] steps = {0, 1, 1, 100, 0, 0, 250, 1, 400, 999, 1, 0, 2000, 3, 7, 5000, 0, 1};
        for (int i = 0; i < steps.length; i++) {
            t += steps[i];
            long permits = 1 + i % 3;
            Limiter.AtTime at = lim.at(t);
            String what = algorithm + " step " + i + " at +" + t;
            Result sync;
            Result async;
            switch (i % 4) {
                case 0:
                case 1:
                    sync = at.acquire("sync", permits);
                    async = at.acquireAsync("async", permits).get(HANG, TimeUnit.SECONDS);
                    break;
                case 2:
                    sync = at.peek("sync", permits);
                    async = at.peekAsync("async", permits).get(HANG, TimeUnit.SECONDS);
                    break;
                default:
                    if (!reserves) {
                        sync = at.acquire("sync", 1);
                        async = at.acquireAsync("async", 1).get(HANG, TimeUnit.SECONDS);
                    } else {
                        sync = at.reserve("sync", permits, Duration.ofMillis(1500));
                        async = at.reserveAsync("async", permits, Duration.ofMillis(1500)).get(HANG,
                                TimeUnit.SECONDS);
                    }
            }
            assertEquals(sync.toString(), async.toString(), what);
        }
    }

    @Test
    void sameExceptionsAsTheBlockingApi() throws Exception {
        Limiter lim = client.limiter("async-errors", "3/minute", Algorithm.FIXED_WINDOW);
        Limiter gcra = client.limiter("async-errors-gcra", "1/minute", Algorithm.GCRA);
        // each pair: the blocking call and its asynchronous twin
        sameFailure(() -> lim.acquire("u", 0), () -> lim.acquireAsync("u", 0));
        sameFailure(() -> lim.acquire("u", -5), () -> lim.acquireAsync("u", -5));
        sameFailure(() -> lim.peek("", 1), () -> lim.peekAsync("", 1));
        sameFailure(() -> lim.acquire(null), () -> lim.acquireAsync(null));
        sameFailure(() -> lim.acquire("a\0b"), () -> lim.acquireAsync("a\0b"));
        sameFailure(() -> lim.reserve("u", 1, Duration.ofSeconds(1)),
                () -> lim.reserveAsync("u", 1, Duration.ofSeconds(1)));
        sameFailure(() -> gcra.reserve("u", 1, null), () -> gcra.reserveAsync("u", 1, null));
        sameFailure(() -> gcra.reserve("u", 1, Duration.ofMillis(-1)),
                () -> gcra.reserveAsync("u", 1, Duration.ofMillis(-1)));
        sameFailure(() -> lim.at(-1).acquire("u", 1), () -> lim.at(-1).acquireAsync("u", 1));
        // denials the caller asked to throw
        gcra.acquire("full");
        sameFailure(() -> gcra.acquireOrThrow("full", 1), () -> gcra.acquireOrThrowAsync("full", 1));
        sameFailure(() -> gcra.reserve("full", 1, Duration.ofMillis(10)),
                () -> gcra.reserveAsync("full", 1, Duration.ofMillis(10)));
        RateLimitExceededException e = assertInstanceOf(RateLimitExceededException.class,
                failure(gcra.acquireOrThrowAsync("full", 1)));
        assertFalse(e.result().allowed());
        assertEquals(Status.DENIED, e.status());
        // and the successes
        assertTrue(lim.acquireOrThrowAsync("ok", 2).get(HANG, TimeUnit.SECONDS).allowed());
        assertEquals(Duration.ZERO, gcra.reserveAsync("free", 1, Duration.ofSeconds(1)).get(HANG, TimeUnit.SECONDS));
        Duration wait = gcra.reserveAsync("free", 1, Duration.ofMinutes(2)).get(HANG, TimeUnit.SECONDS);
        assertTrue(wait.toMillis() > 50_000, wait.toString());
    }

    @Test
    void tryAcquireAsyncWaitsLikeTheBlockingCall() throws Exception {
        Limiter lim = client.limiter("async-wait", "4/2s", Algorithm.GCRA); // one every 500 ms
        assertTrue(lim.acquire("u", 4).allowed());
        // no wait, or less than the next slot: the last denial at once
        Result none = lim.tryAcquireAsync("u", 1, Duration.ZERO).get(HANG, TimeUnit.SECONDS);
        assertFalse(none.allowed() || none.fallback(), none.toString());
        assertFalse(lim.tryAcquireAsync("u", 1, Duration.ofMillis(20)).get(HANG, TimeUnit.SECONDS).allowed());
        // long enough: admitted after the retry-after
        Result r = lim.tryAcquireAsync("u", 1, Duration.ofSeconds(20)).get(HANG, TimeUnit.SECONDS);
        assertTrue(r.allowed(), r.toString());
        // the blocking call's exceptions
        sameFailure(() -> lim.tryAcquire("u", 1, Duration.ofMillis(-1)),
                () -> lim.tryAcquireAsync("u", 1, Duration.ofMillis(-1)));
        sameFailure(() -> lim.tryAcquire("u", 1, null), () -> lim.tryAcquireAsync("u", 1, null));
        sameFailure(() -> lim.tryAcquire("u", 1, Duration.ofDays(365L * 200)),
                () -> lim.tryAcquireAsync("u", 1, Duration.ofDays(365L * 200)));
        sameFailure(() -> lim.tryAcquire("u", 0, Duration.ofSeconds(1)),
                () -> lim.tryAcquireAsync("u", 0, Duration.ofSeconds(1)));
    }

    @Test
    void tryAcquireAsyncCancelledOrClosedStopsTrying() throws Exception {
        Limiter lim = client.limiter("async-wait-cancel", "2/2s", Algorithm.GCRA); // one every 1000 ms
        assertTrue(lim.acquire("w", 2).allowed());
        CompletableFuture<Result> f = lim.tryAcquireAsync("w", 1, Duration.ofSeconds(20));
        f.cancel(false);
        Thread.sleep(1500); // past the slot a retry would have taken
        assertTrue(lim.peek("w").allowed(), "a cancelled wait took the next slot");

        assertTrue(lim.acquire("x", 2).allowed());
        CompletableFuture<Result> waiting = lim.tryAcquireAsync("x", 1, Duration.ofSeconds(20));
        client.close();
        RateLimitException e = assertInstanceOf(RateLimitException.class, failure(waiting));
        assertEquals(Status.CLOSED, e.status());
    }

    @Test
    void oneEntityPerCallAndNothingLeftInFlight() throws Exception {
        Limiter lim = client.limiter("async-many", "2/hour", Algorithm.SLIDING_LOG);
        List<CompletableFuture<Result>> all = new ArrayList<>();
        for (int i = 0; i < 3000; i++) {
            all.add(lim.acquireAsync("user-" + (i % 1000)));
        }
        CompletableFuture.allOf(all.toArray(new CompletableFuture<?>[0])).get(HANG, TimeUnit.SECONDS);
        for (int i = 0; i < all.size(); i++) {
            assertEquals(i < 2000, all.get(i).get().allowed(), "call " + i);
        }
        assertEquals(0, client.asyncInFlight());
    }

    // ---- threads ------------------------------------------------------------------

    @Test
    void dependentStagesRunOnTheIoThreadAndMayChainCalls() throws Exception {
        try (RateLimitClient c = RateLimitClient.connect(redis.url(),
                ClientOptions.defaults().commandTimeout(Duration.ofSeconds(30)))) {
            Limiter lim = c.limiter("async-chain", "100/hour", Algorithm.TOKEN_BUCKET);
            redis.command("CLIENT", "PAUSE", "20000", "WRITE");
            CompletableFuture<String> where;
            CompletableFuture<Result> second;
            try {
                // registered before the reply can come: runs on the I/O thread
                where = lim.acquireAsync("u").thenApply(r -> Thread.currentThread().getName());
                // a chain that calls again from the I/O thread
                second = lim.acquireAsync("u").thenCompose(r -> lim.acquireAsync("u", 3));
            } finally {
                redis.command("CLIENT", "UNPAUSE");
            }
            assertTrue(where.get(HANG, TimeUnit.SECONDS).startsWith("ratelimit-io-"), where.get());
            assertEquals(95, second.get(HANG, TimeUnit.SECONDS).remaining());
            Thread io = ioThreads().get(0);
            assertTrue(io.isDaemon());
        }
    }

    @Test
    void oneIoThreadPerClientDetachedWhenItCloses() throws Exception {
        int before = ioThreads().size();
        for (int round = 0; round < 5; round++) {
            List<RateLimitClient> clients = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                clients.add(RateLimitClient.connect(redis.url()));
            }
            for (RateLimitClient c : clients) {
                // many callers, many decisions: still one thread per client
                Limiter lim = c.limiter("async-threads", "1000000/hour", Algorithm.GCRA);
                List<CompletableFuture<Result>> all = submitFromThreads(4, 250, () -> lim.acquireAsync("u"));
                CompletableFuture.allOf(all.toArray(new CompletableFuture<?>[0])).get(HANG, TimeUnit.SECONDS);
            }
            assertEquals(before + 3, ioThreads().size(), "one I/O thread per client: " + ioThreads());
            // blocking calls do not start one
            try (RateLimitClient sync = RateLimitClient.connect(redis.url())) {
                sync.limiter("async-threads", "10/s", Algorithm.GCRA).acquire("u");
                assertEquals(before + 3, ioThreads().size());
            }
            for (RateLimitClient c : clients) {
                c.close();
            }
            // rl_client_close joined the thread; its end detached it
            assertEquals(before, ioThreads().size(), "after close: " + ioThreads());
        }
    }

    // ---- close -----------------------------------------------------------------

    @Test
    void closeCompletesEveryDecisionInFlightWithClosed() throws Exception {
        RateLimitClient c = RateLimitClient.connect(redis.url(),
                ClientOptions.defaults().commandTimeout(Duration.ofSeconds(30)));
        Limiter lim = c.limiter("async-close", "1000000/hour", Algorithm.GCRA);
        lim.acquireAsync("warm").get(HANG, TimeUnit.SECONDS); // the I/O thread is up
        List<CompletableFuture<Result>> all = new ArrayList<>();
        List<CompletableFuture<String>> dependents = new ArrayList<>();
        // Redis holds every write for a while: the decisions are surely in flight
        redis.command("CLIENT", "PAUSE", "20000", "WRITE");
        try {
            for (int i = 0; i < 500; i++) {
                CompletableFuture<Result> f = lim.acquireAsync("u" + i);
                all.add(f);
                // a dependent that calls the closing client again: must not deadlock
                dependents.add(f.handle((r, e) -> {
                    try {
                        lim.acquire("again");
                        return "called";
                    } catch (RateLimitException again) {
                        return again.status().toString();
                    }
                }));
            }
            assertEquals(500, c.asyncInFlight());
            c.close();
            // done before close returned, every one with the closed exception
            for (CompletableFuture<Result> f : all) {
                assertTrue(f.isDone());
                RateLimitException e = assertInstanceOf(RateLimitException.class, failure(f));
                assertEquals(Status.CLOSED, e.status());
                assertEquals("client is closed", e.getMessage());
            }
            for (CompletableFuture<String> d : dependents) {
                assertEquals("CLOSED", d.getNow("pending"));
            }
            assertEquals(0, c.asyncInFlight());
            // after: refused at once, same exception
            RateLimitException after = assertInstanceOf(RateLimitException.class, failure(lim.acquireAsync("u")));
            assertEquals(Status.CLOSED, after.status());
            assertEquals("client is closed", after.getMessage());
        } finally {
            redis.command("CLIENT", "UNPAUSE");
        }
    }

    @Test
    void aPendingFutureKeepsItsClientFromTheCleaner() throws Exception {
        CompletableFuture<Result> f;
        redis.command("CLIENT", "PAUSE", "20000", "WRITE");
        try {
            // the client and its limiter are unreachable as soon as this returns
            f = forgottenClient(redis.url()).acquireAsync("u");
            for (int i = 0; i < 5; i++) {
                System.gc();
                Thread.sleep(20);
            }
        } finally {
            redis.command("CLIENT", "UNPAUSE");
        }
        // not failed with CLOSED by a Cleaner run: the pending future held the client
        assertTrue(f.get(HANG, TimeUnit.SECONDS).allowed());
    }

    private static Limiter forgottenClient(String url) {
        return RateLimitClient.connect(url, ClientOptions.defaults().commandTimeout(Duration.ofSeconds(30)))
                .limiter("async-forgotten", "10/minute", Algorithm.GCRA);
    }

    @Test
    void closeUnderConcurrentSubmitsLeavesNothingPending() throws Exception {
        for (int round = 0; round < 5; round++) {
            // 32,000 in flight on a loaded machine: a reply may take over the default second
            RateLimitClient c = RateLimitClient.connect(redis.url(),
                    ClientOptions.defaults().commandTimeout(Duration.ofSeconds(30)));
            Limiter lim = c.limiter("async-close-race", "1000000/hour", Algorithm.SLIDING_WINDOW);
            ConcurrentLinkedQueue<CompletableFuture<Result>> all = new ConcurrentLinkedQueue<>();
            ConcurrentLinkedQueue<Throwable> thrown = new ConcurrentLinkedQueue<>();
            AtomicInteger completed = new AtomicInteger();
            int threads = 8;
            CountDownLatch started = new CountDownLatch(threads);
            List<Thread> submitters = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                Thread th = new Thread(() -> {
                    started.countDown();
                    try {
                        for (int i = 0; i < 4000; i++) {
                            CompletableFuture<Result> f = lim.acquireAsync("u" + (i % 50));
                            f.whenComplete((r, e) -> completed.incrementAndGet());
                            all.add(f);
                        }
                    } catch (Throwable e) {
                        thrown.add(e); // acquireAsync never throws
                    }
                });
                th.start();
                submitters.add(th);
            }
            started.await();
            while (completed.get() < 2000) {
                Thread.sleep(1);
            }
            c.close();
            for (Thread th : submitters) {
                th.join();
            }
            assertTrue(thrown.isEmpty(), thrown.toString());
            int results = 0;
            int closed = 0;
            for (CompletableFuture<Result> f : all) {
                assertTrue(f.isDone(), "a future left pending after close");
                if (f.isCompletedExceptionally()) {
                    RateLimitException e = assertInstanceOf(RateLimitException.class, failure(f));
                    assertEquals(Status.CLOSED, e.status(), e.toString());
                    closed++;
                } else {
                    assertTrue(f.get().allowed());
                    results++;
                }
            }
            assertEquals(threads * 4000, results + closed);
            assertTrue(results >= 2000 && closed > 0, results + " results, " + closed + " closed");
            assertEquals(0, c.asyncInFlight());
        }
    }

    @Test
    void closeFromADependentStageOnTheIoThread() throws Exception {
        RateLimitClient c = RateLimitClient.connect(redis.url(),
                ClientOptions.defaults().commandTimeout(Duration.ofSeconds(30)));
        Limiter lim = c.limiter("async-close-self", "1000/minute", Algorithm.FIXED_WINDOW);
        lim.acquireAsync("warm").get(HANG, TimeUnit.SECONDS);
        AtomicReference<String> closer = new AtomicReference<>();
        List<CompletableFuture<Result>> others = new ArrayList<>();
        CompletableFuture<Result> first;
        CompletableFuture<Void> closing;
        redis.command("CLIENT", "PAUSE", "20000", "WRITE");
        try {
            first = lim.acquireAsync("u");
            closing = first.thenRun(() -> {
                closer.set(Thread.currentThread().getName());
                c.close(); // on the I/O thread: handed to another thread, returns at once
            });
            for (int i = 0; i < 100; i++) {
                others.add(lim.acquireAsync("v" + i));
            }
        } finally {
            redis.command("CLIENT", "UNPAUSE");
        }
        // closing first: a thread waiting in first.get() as first completes
        // may run first's dependents itself (CompletableFuture's waiters help)
        closing.get(HANG, TimeUnit.SECONDS);
        assertTrue(closer.get().startsWith("ratelimit-io-"), closer.get());
        assertTrue(first.get(HANG, TimeUnit.SECONDS).allowed());
        for (CompletableFuture<Result> f : others) {
            try {
                assertNotNull(f.get(HANG, TimeUnit.SECONDS)); // replied before the close got there
            } catch (ExecutionException e) {
                assertEquals(Status.CLOSED, ((RateLimitException) e.getCause()).status());
            }
        }
        assertTrue(c.isClosed());
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(HANG);
        while (c.asyncInFlight() > 0 && System.nanoTime() < deadline) {
            Thread.sleep(5);
        }
        assertEquals(0, c.asyncInFlight());
    }

    // ---- outages -------------------------------------------------------------------

    @Test
    void redisDownWithAllowCompletesWithTheFallback() throws Exception {
        try (RateLimitClient c = deadClient(OnRedisError.ALLOW)) {
            Limiter lim = c.limiter("async-outage", "5/minute", Algorithm.GCRA);
            Result sync = lim.acquire("u");
            List<CompletableFuture<Result>> all = submitFromThreads(4, 2500, () -> lim.acquireAsync("u"));
            for (CompletableFuture<Result> f : all) {
                Result r = f.get(HANG, TimeUnit.SECONDS);
                assertTrue(r.allowed() && r.fallback(), r.toString());
                assertEquals(sync.toString(), r.toString());
            }
        }
    }

    @Test
    void redisDownWithDenyAndRaiseMatchTheBlockingPath() throws Exception {
        try (RateLimitClient c = deadClient(OnRedisError.DENY)) {
            Limiter lim = c.limiter("async-outage", "5/minute", Algorithm.SLIDING_LOG);
            Result sync = lim.peek("u");
            for (int i = 0; i < 200; i++) {
                Result r = lim.peekAsync("u").get(HANG, TimeUnit.SECONDS);
                assertTrue(!r.allowed() && r.fallback(), r.toString());
                assertEquals(sync.toString(), r.toString());
            }
        }
        // RAISE: a client made while Redis was up, then Redis goes away
        RedisServer doomed = RedisServer.start();
        try (RateLimitClient c = RateLimitClient.connect(doomed.url())) {
            Limiter lim = c.limiter("async-outage", "5/minute", Algorithm.TOKEN_BUCKET);
            assertTrue(lim.acquireAsync("u").get(HANG, TimeUnit.SECONDS).allowed());
            doomed.close();
            RateLimitException syncError = null;
            try {
                lim.acquire("u");
            } catch (RateLimitException e) {
                syncError = e;
            }
            assertNotNull(syncError);
            for (int i = 0; i < 50; i++) {
                Throwable e = failure(lim.acquireAsync("u"));
                assertSame(syncError.getClass(), e.getClass(), e.toString());
                assertTrue(e instanceof ConnectionException || e instanceof TimeoutException, e.toString());
            }
        } finally {
            doomed.close();
        }
    }

    // ---- helpers -------------------------------------------------------------------

    /** A client of a loopback port nothing listens on. */
    static RateLimitClient deadClient(OnRedisError policy) throws Exception {
        return RateLimitClient.connect("redis://127.0.0.1:" + RedisServer.freePort(),
                ClientOptions.defaults().onRedisError(policy));
    }

    /** Starts the calls from {@code threads} threads at once; the futures of all. */
    static List<CompletableFuture<Result>> submitFromThreads(int threads, int each,
            Supplier<CompletableFuture<Result>> call) throws Exception {
        ConcurrentLinkedQueue<CompletableFuture<Result>> all = new ConcurrentLinkedQueue<>();
        ConcurrentLinkedQueue<Throwable> errors = new ConcurrentLinkedQueue<>();
        CyclicBarrier start = new CyclicBarrier(threads);
        List<Thread> list = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            Thread th = new Thread(() -> {
                try {
                    start.await();
                    for (int i = 0; i < each; i++) {
                        all.add(call.get());
                    }
                } catch (Throwable e) {
                    errors.add(e);
                }
            });
            th.start();
            list.add(th);
        }
        for (Thread th : list) {
            th.join();
        }
        if (!errors.isEmpty()) {
            fail("a submitting thread failed", errors.peek());
        }
        return new ArrayList<>(all);
    }

    /** The exception a future failed with (unwrapped); fails the test if it succeeded. */
    static Throwable failure(CompletableFuture<?> f) throws Exception {
        try {
            Object v = f.get(HANG, TimeUnit.SECONDS);
            throw new AssertionError("expected a failure, got " + v);
        } catch (ExecutionException e) {
            return e.getCause();
        }
    }

    /** The blocking call throws; its twin's future fails with the same class and message. */
    static void sameFailure(Runnable sync, Supplier<CompletableFuture<?>> async) throws Exception {
        RuntimeException expected = null;
        try {
            sync.run();
        } catch (RuntimeException e) {
            expected = e;
        }
        assertNotNull(expected, "the blocking call did not throw");
        CompletableFuture<?> f;
        try {
            f = async.get();
        } catch (RuntimeException e) {
            throw new AssertionError("the asynchronous call threw instead of failing its future", e);
        }
        Throwable actual = failure(f);
        assertSame(expected.getClass(), actual.getClass(), actual.toString());
        // a denial's message says how long to wait, which moved on between the calls
        assertEquals(expected.getMessage().replaceAll("after \\d+ ms", "after N ms"),
                actual.getMessage().replaceAll("after \\d+ ms", "after N ms"));
        if (expected instanceof RateLimitException) {
            assertEquals(((RateLimitException) expected).status(), ((RateLimitException) actual).status());
        }
    }

    /** The live I/O threads (ratelimit-io-N) of every client. */
    static List<Thread> ioThreads() {
        List<Thread> out = new ArrayList<>();
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (t.getName().startsWith("ratelimit-io-") && t.isAlive()) {
                out.add(t);
            }
        }
        return out;
    }
}
