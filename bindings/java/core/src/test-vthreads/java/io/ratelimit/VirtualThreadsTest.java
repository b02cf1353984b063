package io.ratelimit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ConcurrentSkipListSet;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.IntConsumer;
import java.util.function.Supplier;
import java.util.stream.Stream;
import jdk.jfr.Recording;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordedFrame;
import jdk.jfr.consumer.RecordingFile;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Issue 42: on virtual threads every blocking call parks its virtual thread
 * instead of holding a carrier in native code. The JVM runs with two carriers
 * (the profile's -Djdk.virtualThreadScheduler.parallelism=2): while 8 virtual
 * threads wait in one kind of call, a probe virtual thread must get a carrier
 * within 50 ms. A JFR recording of the whole class must show no
 * jdk.VirtualThreadPinned event with our code on its stack.
 */
class VirtualThreadsTest extends RedisTestBase {
    private static final int WAITERS = 8;
    private static final long PROBE_LIMIT_MS = 50;
    private static Recording pinned;

    @BeforeAll
    static void twoCarriersAndARecording() throws Exception {
        assertEquals("2", System.getProperty("jdk.virtualThreadScheduler.parallelism"),
                "run on two carriers (mvn -P vthreads sets the scheduler's properties)");
        initializeOurClasses();
        pinned = new Recording();
        pinned.enable("jdk.VirtualThreadPinned").withThreshold(Duration.ZERO).withStackTrace();
        pinned.enable("jdk.ClassLoad").withThreshold(Duration.ZERO);
        pinned.start();
    }

    @AfterAll
    static void noPinningInOurCode() throws Exception {
        pinned.stop();
        Path file = Path.of(System.getProperty("vthreads.jfr", "target/vthreads-pinned.jfr"));
        pinned.dump(file);
        pinned.close();
        List<RecordedEvent> events = RecordingFile.readAllEvents(file);
        List<RecordedEvent> loads = events.stream().filter(e -> e.getEventType().getName().equals("jdk.ClassLoad"))
                .toList();
        List<String> ours = new ArrayList<>();
        int classLoading = 0;
        for (RecordedEvent e : events) {
            if (!e.getEventType().getName().equals("jdk.VirtualThreadPinned") || e.getStackTrace() == null
                    || !has(e, "io.ratelimit.")) {
                continue;
            }
            // the JDK pins a virtual thread that loads a class another thread
            // is loading (the loader's lock, taken under native frames): once
            // per class, at its first concurrent use; not a wait of ours
            if (loads.stream().anyMatch(l -> within(e, l)) || jdksOwn(e)) {
                classLoading++;
                continue;
            }
            ours.add(e.toString());
        }
        System.out.println("VirtualThreadsTest: jdk.VirtualThreadPinned while loading a class or in the JDK's own"
                + " critical sections: " + classLoading
                + "; elsewhere in io.ratelimit: " + ours.size() + " (" + file + ")");
        assertTrue(ours.isEmpty(), ours.size() + " jdk.VirtualThreadPinned event(s) in io.ratelimit: " + ours);
    }

    /**
     * Every class of ours initialized before the recording: the JDK pins a
     * virtual thread that waits for another thread's class initializer (and
     * fails to unmount it right after), at a class's first concurrent use,
     * whatever the class does; not a wait of ours.
     */
    private static void initializeOurClasses() throws Exception {
        Path classes = Path.of(Limiter.class.getProtectionDomain().getCodeSource().getLocation().toURI());
        if (!Files.isDirectory(classes)) {
            return;
        }
        try (Stream<Path> files = Files.walk(classes.resolve("io/ratelimit"))) {
            for (Path f : (Iterable<Path>) files.filter(p -> p.toString().endsWith(".class"))::iterator) {
                String name = classes.relativize(f).toString().replace('/', '.').replaceAll("\\.class$", "");
                try {
                    Class.forName(name, true, Limiter.class.getClassLoader());
                } catch (LinkageError optionalDependencyMissing) {
                    // e.g. the micrometer binder without micrometer: never used here
                }
            }
        }
    }

    /**
     * The JDK's own pins: waiting for another thread's class initializer, and
     * a failed unmount inside a critical section (HotSpot's freeze result 2,
     * pinned_cs: Continuation.pin, which only JDK internals such as JFR's
     * event writing and class initialization take; seen for a few us in
     * CompletableFuture.join at a class's first use). Code of ours that held
     * a carrier would show a native frame (3) or a monitor (4) instead.
     */
    private static boolean jdksOwn(RecordedEvent e) {
        // getString: String.valueOf(getValue(..)) would pick valueOf(char[]) and cast
        String reason = e.hasField("pinnedReason") ? e.getString("pinnedReason") : null;
        if (reason == null) {
            return false;
        }
        return reason.startsWith("Waited for initialization of ") || reason.equals("Freeze or preempt failed (2)");
    }

    /** True when the pinned event happened on the thread of the class load, during it. */
    private static boolean within(RecordedEvent pinnedEvent, RecordedEvent load) {
        return load.getThread() != null && pinnedEvent.getThread() != null
                && load.getThread().getJavaThreadId() == pinnedEvent.getThread().getJavaThreadId()
                && !load.getStartTime().isAfter(pinnedEvent.getStartTime())
                && !load.getEndTime().isBefore(pinnedEvent.getEndTime());
    }

    private static boolean has(RecordedEvent e, String typePrefix) {
        for (RecordedFrame f : e.getStackTrace().getFrames()) {
            if (f.getMethod().getType().getName().startsWith(typePrefix)) {
                return true;
            }
        }
        return false;
    }

    // ---- a free carrier while 8 virtual threads wait -------------------------------------

    @Test
    void timedAcquireOnAnExhaustedKey() throws Exception {
        Limiter lim = client.limiter("vt-timed", Rate.of(1, Duration.ofSeconds(1)), Algorithm.FIXED_WINDOW);
        assertTrue(lim.acquire("k").allowed());
        AtomicInteger admitted = new AtomicInteger();
        assertCarriersFree("tryAcquire(id, 1, 2 s)", i -> {
            if (lim.tryAcquire("k", 1, Duration.ofSeconds(2)).allowed()) {
                admitted.incrementAndGet();
            }
        }, () -> {});
        // the key frees once a second: 1 to 3 windows begin within the 2 s
        assertTrue(admitted.get() >= 1 && admitted.get() <= 3, "admitted " + admitted.get());
    }

    @Test
    void semaphoreAcquireWithATimeout() throws Exception {
        Semaphore sem = client.semaphore("vt-sem", 1, Duration.ofSeconds(30));
        Permit held = sem.acquire(Duration.ofSeconds(1));
        AtomicInteger acquired = new AtomicInteger();
        assertCarriersFree("Semaphore.tryAcquire(5 s)", i -> {
            Optional<Permit> p = sem.tryAcquire(Duration.ofSeconds(5));
            assertTrue(p.isPresent(), "waiter " + i + " got no permit");
            acquired.incrementAndGet();
            assertTrue(p.get().release());
        }, held::close);
        assertEquals(WAITERS, acquired.get());
        assertEquals(1, sem.available());
    }

    @Test
    void lockAcquire() throws Exception {
        DistributedLock lock = client.lock("vt-lock", Duration.ofSeconds(30));
        Lock held = lock.acquire(Duration.ofSeconds(1));
        Set<Long> tokens = new ConcurrentSkipListSet<>();
        assertCarriersFree("DistributedLock.acquire(5 s)", i -> {
            try (Lock l = lock.acquire(Duration.ofSeconds(5))) {
                tokens.add(l.fencingToken());
            }
        }, held::close);
        assertEquals(WAITERS, tokens.size(), "each waiter held the lock once, each with its own fencing token");
    }

    @Test
    void delayQueuePopWithATimeout() throws Exception {
        DelayQueue q = client.delayQueue("vt-q");
        Set<String> got = new ConcurrentSkipListSet<>();
        AtomicInteger messages = new AtomicInteger();
        assertCarriersFree("DelayQueue.pop(1, 5 s)", i -> {
            List<String> m = q.pop(1, Duration.ofSeconds(5));
            assertEquals(1, m.size(), "waiter " + i + ": " + m);
            messages.addAndGet(m.size());
            got.addAll(m);
        }, () -> {
            for (int i = 0; i < WAITERS; i++) {
                assertTrue(q.push("m" + i, Duration.ZERO));
            }
        });
        assertEquals(WAITERS, messages.get());
        assertEquals(WAITERS, got.size(), "no message delivered twice: " + got);
        assertEquals(0, q.size());
    }

    @Test
    void plainDecisionsWhileRedisSleeps() throws Exception {
        try (RateLimitClient slow = RateLimitClient.connect(redis.url(),
                ClientOptions.defaults().timeout(Duration.ofSeconds(5)))) {
            Limiter lim = slow.limiter("vt-plain", "1000/second", Algorithm.GCRA);
            AtomicInteger allowed = new AtomicInteger();
            whileRedisSleeps(() -> assertCarriersFree("acquire with Redis paused", i -> {
                if (lim.acquire("u" + i).allowed()) {
                    allowed.incrementAndGet();
                }
            }, () -> {}));
            assertEquals(WAITERS, allowed.get());
        }
    }

    @Test
    void aLeaseFetchWhileRedisSleeps() throws Exception {
        try (RateLimitClient slow = RateLimitClient.connect(redis.url(),
                ClientOptions.defaults().timeout(Duration.ofSeconds(5)))) {
            Limiter lim = slow.limiter("vt-lease", LimiterConfig.of(Algorithm.GCRA, "10000/second")
                    .lease(Duration.ofMillis(5000)));
            AtomicInteger allowed = new AtomicInteger();
            whileRedisSleeps(() -> assertCarriersFree("a leased acquire waiting for its block", i -> {
                if (lim.acquire("all").allowed()) {
                    allowed.incrementAndGet();
                }
            }, () -> {}));
            assertEquals(WAITERS, allowed.get());
            assertTrue(slow.stats().get("vt-lease").localAllowed() > 0, slow.stats().toString());
        }
    }

    /**
     * Everything else that makes a round trip, 8 at once with Redis paused:
     * batches, stored specs (read again: configRefresh 1 ms), a limiter made
     * of the stored spec, reset, semaphore and queue counts, releases.
     */
    @Test
    void batchesStoredSpecsAndTheOtherCallsWhileRedisSleeps() throws Exception {
        try (RateLimitClient slow = RateLimitClient.connect(redis.url(), ClientOptions.defaults()
                .timeout(Duration.ofSeconds(5)).configRefresh(Duration.ofMillis(1)))) {
            slow.configure("vt-stored", LimiterConfig.of(Algorithm.TOKEN_BUCKET, "100/second"));
            Limiter stored = slow.limiter("vt-stored");
            Limiter lim = slow.limiter("vt-batch", "100/second", Algorithm.SLIDING_WINDOW);
            Semaphore sem = slow.semaphore("vt-sem2", 3, Duration.ofSeconds(30));
            sem.acquire(Duration.ofSeconds(1));
            Permit permit = slow.semaphore("vt-sem3", 1, Duration.ofSeconds(30)).acquire(Duration.ofSeconds(1));
            DelayQueue q = slow.delayQueue("vt-q2");
            q.push("x", Duration.ofHours(1));
            List<Supplier<Object>> calls = List.of(
                    () -> lim.acquireMany(List.of("a", "b"), 1).size(),
                    () -> slow.getConfig("vt-stored").orElseThrow(),
                    () -> stored.acquire("s").allowed(),
                    () -> {
                        lim.reset("a");
                        return "reset";
                    },
                    sem::available,
                    q::size,
                    permit::release,
                    () -> slow.limiter("vt-made", "5/second", Algorithm.GCRA).name());
            List<Object> expected = List.of(2, LimiterConfig.of(Algorithm.TOKEN_BUCKET, "100/second"), true, "reset", 2L, 1L, true, "vt-made");
            Object[] answers = new Object[WAITERS];
            whileRedisSleeps(() -> assertCarriersFree("batches, stored specs and the rest with Redis paused",
                    i -> answers[i] = calls.get(i).get(), () -> {}));
            assertEquals(expected, List.of(answers));
        }
    }

    // ---- interrupts and timeouts on virtual threads ---------------------------------------

    @Test
    void anInterruptStopsEachWaitPromptlyAndKeepsTheFlag() throws Exception {
        Limiter soon = client.limiter("vt-intr", Rate.of(1, Duration.ofSeconds(20)), Algorithm.FIXED_WINDOW);
        assertTrue(soon.acquire("u").allowed());
        assertInterruptible(() -> soon.tryAcquire("u", 1, Duration.ofSeconds(30)));

        Semaphore sem = client.semaphore("vt-intr-sem", 1, Duration.ofSeconds(30));
        Permit held = sem.acquire(Duration.ofSeconds(1));
        assertInterruptible(() -> sem.acquire(Duration.ofSeconds(30)));
        held.close();
        assertEquals(1, sem.available(), "the cancelled waiter left the queue holding nothing");
        assertTrue(sem.tryAcquire().isPresent());

        DistributedLock lock = client.lock("vt-intr-lock", Duration.ofSeconds(30));
        Lock taken = lock.acquire(Duration.ofSeconds(1));
        assertInterruptible(() -> lock.acquire(Duration.ofSeconds(30)));
        taken.close();
        assertTrue(lock.tryAcquire().isPresent(), "the cancelled waiter does not hold the lock");

        DelayQueue q = client.delayQueue("vt-intr-q");
        assertInterruptible(() -> q.pop(1, Duration.ofSeconds(30)));
        assertTrue(q.push("after", Duration.ZERO));
        assertEquals(List.of("after"), q.popReady(10), "the cancelled pop took nothing");

        // one round trip does not read the flag, on any thread: it is decided and the flag stays
        Limiter plain = client.limiter("vt-intr-plain", "10/second", Algorithm.GCRA);
        AtomicReference<Object> outcome = new AtomicReference<>();
        Thread.ofVirtual().start(() -> {
            Thread.currentThread().interrupt();
            boolean allowed = plain.acquire("u").allowed();
            outcome.set(allowed && Thread.currentThread().isInterrupted());
        }).join(5000);
        assertEquals(true, outcome.get(), "decided, flag kept");
    }

    private static void assertInterruptible(Runnable blocking) throws Exception {
        AtomicReference<Throwable> thrown = new AtomicReference<>();
        AtomicReference<Boolean> flagKept = new AtomicReference<>();
        AtomicLong stoppedAt = new AtomicLong();
        Thread t = Thread.ofVirtual().unstarted(() -> {
            try {
                blocking.run();
            } catch (Throwable e) {
                thrown.set(e);
            }
            stoppedAt.set(System.nanoTime());
            flagKept.set(Thread.currentThread().isInterrupted());
        });
        t.start();
        Thread.sleep(300);
        assertTrue(t.isAlive(), "the call should still be waiting");
        long interruptedAt = System.nanoTime();
        t.interrupt();
        assertTrue(t.join(Duration.ofSeconds(5)), "still waiting after the interrupt");
        assertNotNull(thrown.get(), "expected CancelledException");
        assertInstanceOf(CancelledException.class, thrown.get());
        assertEquals(Status.CANCELLED, ((RateLimitException) thrown.get()).status());
        assertEquals("wait cancelled", thrown.get().getMessage());
        assertTrue(flagKept.get(), "the interrupt flag must stay set");
        long ms = (stoppedAt.get() - interruptedAt) / 1_000_000;
        assertTrue(ms < 500, "stopped " + ms + " ms after the interrupt");
    }

    @Test
    void timeoutsOnVirtualThreads() throws Exception {
        Semaphore sem = client.semaphore("vt-to-sem", 1, Duration.ofSeconds(30));
        Permit held = sem.acquire(Duration.ofSeconds(1));
        DistributedLock lock = client.lock("vt-to-lock", Duration.ofSeconds(30));
        Lock taken = lock.acquire(Duration.ofSeconds(1));
        Limiter hour = client.limiter("vt-to-lim", "1/hour", Algorithm.SLIDING_LOG);
        assertTrue(hour.acquire("u").allowed());
        Limiter minute = client.limiter("vt-to-min", Rate.of(1, Duration.ofSeconds(60)), Algorithm.FIXED_WINDOW);
        assertTrue(minute.acquire("u").allowed());
        DelayQueue q = client.delayQueue("vt-to-q");
        Duration timeout = Duration.ofMillis(400);
        onVirtualThread(() -> {
            assertTimedOut(timeout, () -> {
                AcquireTimeoutException e = assertThrows(AcquireTimeoutException.class, () -> sem.acquire(timeout));
                assertTrue(e.getMessage().startsWith("semaphore 'vt-to-sem': no permit within PT0.4S"), e.getMessage());
            });
            assertTimedOut(timeout, () -> assertTrue(lock.tryAcquire(timeout).isEmpty()));
            assertTimedOut(timeout, () -> assertTrue(q.pop(1, timeout).isEmpty()));
            // the next chance is past the deadline: denied at once, as on a platform thread
            for (Limiter lim : List.of(minute, hour)) {
                long start = System.nanoTime();
                assertFalse(lim.tryAcquire("u", 1, timeout).allowed());
                assertTrue((System.nanoTime() - start) / 1_000_000 < 300, lim + ": past the deadline, no wait");
            }
        });
        held.close();
        taken.close();
    }

    private static void assertTimedOut(Duration timeout, Runnable call) {
        long start = System.nanoTime();
        call.run();
        long ms = (System.nanoTime() - start) / 1_000_000;
        assertTrue(ms >= timeout.toMillis() - 5 && ms < timeout.toMillis() + 500, "returned after " + ms + " ms");
    }

    // ---- the same answers on both kinds of thread ------------------------------------------

    @Test
    void answersAndExceptionsAreThoseOfPlatformThreads() throws Exception {
        Limiter lim = client.limiter("vt-same", Rate.of(5, Duration.ofSeconds(10)).withBurst(5), Algorithm.GCRA);
        long t0 = 1_700_000_000_000L;
        List<String> platform = sequence(lim, "p", t0);
        List<String> virtual = new ArrayList<>();
        onVirtualThread(() -> virtual.addAll(sequence(lim, "v", t0)));
        assertEquals(platform, virtual);
        assertEquals(12, platform.size());

        // a stored spec: the fresh cached copy (rl_config_cached) decides as the stored spec does
        client.configure("vt-same-stored", LimiterConfig.of(Algorithm.GCRA, Rate.of(5, Duration.ofSeconds(10))));
        Limiter stored = client.limiter("vt-same-stored");
        List<String> storedPlatform = sequence(stored, "p", t0);
        List<String> storedVirtual = new ArrayList<>();
        onVirtualThread(() -> storedVirtual.addAll(sequence(stored, "v", t0)));
        assertEquals(storedPlatform, storedVirtual);
        assertEquals(platform, storedPlatform, "the same spec, stored or given");
        assertEquals(lim.key("v").replace("vt-same", "vt-same-stored"), stored.key("v"));

        List<String> failures = new ArrayList<>();
        Runnable failing = () -> {
            failures.add(describe(assertThrows(RateLimitException.class, () -> lim.acquire("nul\0id"))));
            failures.add(describe(assertThrows(RateLimitException.class, () -> lim.acquireOrThrow("p", 100))));
            failures.add(describe(assertThrows(RateLimitException.class, () -> lim.reserve("p", 9, Duration.ZERO))));
            failures.add(describe(assertThrows(RateLimitException.class, () -> client.limiter("vt-nothing"))));
        };
        failing.run();
        List<String> onPlatform = new ArrayList<>(failures);
        failures.clear();
        onVirtualThread(failing::run);
        assertEquals(onPlatform, failures);

        RateLimitClient closed = RateLimitClient.connect(redis.url());
        Limiter gone = closed.limiter("vt-closed", "1/second", Algorithm.GCRA);
        closed.close();
        AtomicReference<Throwable> onVirtual = new AtomicReference<>();
        onVirtualThread(() -> onVirtual.set(assertThrows(RateLimitException.class, () -> gone.acquire("u"))));
        Throwable onPlatformClosed = assertThrows(RateLimitException.class, () -> gone.acquire("u"));
        assertEquals(describe(onPlatformClosed), describe(onVirtual.get()));
        assertTrue(stackNames(onVirtual.get()).contains("answersAndExceptionsAreThoseOfPlatformThreads"),
                "the exception carries the caller's stack");
    }

    private static List<String> sequence(Limiter lim, String id, long t0) {
        List<String> out = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            out.add(describe(lim.at(t0 + i * 100L).acquire(id, 1)));
        }
        out.add(describe(lim.at(t0 + 900).peek(id, 1)));
        out.add(describe(lim.at(t0 + 900).reserve(id, 1, Duration.ofSeconds(5))));
        out.add(describe(lim.at(t0 + 950).refund(id, 1)));
        out.add(describe(lim.at(t0 + 950).acquireAtMost(id, 3)));
        return out;
    }

    private static String describe(Result r) {
        return r.allowed() + " " + r.limit() + " " + r.remaining() + " " + r.retryAfter() + " " + r.resetAfter() + " "
                + r.waitTime() + " " + r.granted() + " " + r.rateIndex() + " " + r.isLocal() + " " + r.fallback();
    }

    private static String describe(Throwable e) {
        return e.getClass().getName() + ": " + e.getMessage();
    }

    private static String stackNames(Throwable e) {
        StringBuilder b = new StringBuilder();
        for (StackTraceElement f : e.getStackTrace()) {
            b.append(f.getMethodName()).append(' ');
        }
        return b.toString();
    }

    // ---- helpers ---------------------------------------------------------------------------

    interface Body {
        void run() throws Exception;
    }

    /** Runs body on a virtual thread and rethrows what it threw. */
    private static void onVirtualThread(Body body) throws Exception {
        AtomicReference<Throwable> thrown = new AtomicReference<>();
        Thread t = Thread.ofVirtual().start(() -> {
            try {
                body.run();
            } catch (Throwable e) {
                thrown.set(e);
            }
        });
        assertTrue(t.join(Duration.ofSeconds(30)), "still running");
        if (thrown.get() instanceof Exception e) {
            throw e;
        } else if (thrown.get() instanceof Error e) {
            throw e;
        }
    }

    /** Body while a platform thread holds Redis in DEBUG SLEEP for 1.5 s. */
    private static void whileRedisSleeps(Body body) throws Exception {
        AtomicReference<Throwable> failed = new AtomicReference<>();
        Thread sleeper = new Thread(() -> {
            try {
                redis.command("DEBUG", "SLEEP", "1.5");
            } catch (Throwable e) {
                failed.set(e);
            }
        });
        sleeper.start();
        Thread.sleep(100); // Redis is asleep
        body.run();
        sleeper.join();
        if (failed.get() != null) {
            fail("DEBUG SLEEP failed", failed.get());
        }
    }

    /**
     * Starts WAITERS virtual threads in {@code waiter} and, once they wait,
     * starts probe virtual threads that only read the clock: each must run
     * within PROBE_LIMIT_MS. Then {@code release} lets the waiters finish.
     */
    private static void assertCarriersFree(String what, IntConsumer waiter, Body release) throws Exception {
        ConcurrentLinkedQueue<Throwable> errors = new ConcurrentLinkedQueue<>();
        List<Thread> waiters = new ArrayList<>();
        for (int i = 0; i < WAITERS; i++) {
            int id = i;
            waiters.add(Thread.ofVirtual().name("waiter-" + i).start(() -> {
                try {
                    waiter.accept(id);
                } catch (Throwable e) {
                    errors.add(e);
                }
            }));
        }
        Thread.sleep(300); // every waiter is inside its call
        List<Long> delays = new ArrayList<>();
        for (int p = 0; p < 5; p++) {
            AtomicLong ranAt = new AtomicLong();
            long startedAt = System.nanoTime();
            Thread probe = Thread.ofVirtual().name("probe").start(() -> ranAt.set(System.nanoTime()));
            assertTrue(probe.join(Duration.ofSeconds(60)), "the probe never ran");
            delays.add((ranAt.get() - startedAt) / 1_000_000);
            Thread.sleep(20);
        }
        boolean waited = waiters.stream().anyMatch(Thread::isAlive);
        release.run();
        for (Thread t : waiters) {
            if (!t.join(Duration.ofSeconds(30))) {
                fail(what + ": a waiter is still waiting");
            }
        }
        long worst = new TreeSet<>(delays).last();
        assertTrue(worst <= PROBE_LIMIT_MS, what + ": a probe virtual thread waited " + worst
                + " ms for a carrier while " + WAITERS + " virtual threads waited (probes: " + delays + " ms)");
        if (!errors.isEmpty()) {
            AssertionError e = new AssertionError(what + ": " + errors.size() + " waiter(s) failed");
            errors.forEach(e::addSuppressed);
            throw e;
        }
        assertTrue(waited, what + ": the waiters were done before the probes ended: nothing was measured");
    }
}
