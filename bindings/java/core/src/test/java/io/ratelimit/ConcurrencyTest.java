package io.ratelimit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

class ConcurrencyTest extends RedisTestBase {
    static final int THREADS = 32;

    @ParameterizedTest
    @EnumSource(Algorithm.class)
    void thirtyTwoThreadsOnOneKeyNeverOverAdmit(Algorithm algorithm) throws Exception {
        int limit = 100;
        // a long period: nothing refills or slides out during the test
        Limiter lim = client.limiter("hot", Rate.of(limit, Duration.ofDays(1)), algorithm); // no window boundary mid-test
        AtomicInteger admitted = new AtomicInteger();
        AtomicInteger denied = new AtomicInteger();
        runThreads(THREADS, i -> {
            for (int n = 0; n < 8; n++) {
                if (lim.acquire("one-key").allowed()) {
                    admitted.incrementAndGet();
                } else {
                    denied.incrementAndGet();
                }
            }
        });
        assertEquals(limit, admitted.get(), algorithm.toString());
        assertEquals(THREADS * 8 - limit, denied.get());
    }

    /** Overlapping blocking callers share batch calls in the core; interrupting some of them, over and over,
     *  changes nothing for the others, and the count stays exact. */
    @Test
    void interruptedCallersLeaveCombinedOnesUnaffected() throws Exception {
        int limit = 500;
        Limiter lim = client.limiter("combined", Rate.of(limit, Duration.ofDays(1)), Algorithm.GCRA);
        AtomicInteger admitted = new AtomicInteger();
        AtomicInteger decided = new AtomicInteger();
        List<Thread> targets = new ArrayList<>();
        Thread interrupter = new Thread(() -> {
            while (!Thread.currentThread().isInterrupted()) {
                synchronized (targets) {
                    targets.forEach(Thread::interrupt);
                }
                sleep(1);
            }
        });
        interrupter.start();
        try {
            runThreads(16, i -> {
                if (i % 4 == 0) {
                    synchronized (targets) {
                        targets.add(Thread.currentThread());
                    }
                }
                for (int n = 0; n < 50; n++) {
                    Thread.interrupted(); // a plain decision neither waits nor reads the flag
                    if (lim.acquire("one-key").allowed()) {
                        admitted.incrementAndGet();
                    }
                    decided.incrementAndGet();
                }
            });
        } finally {
            interrupter.interrupt();
            interrupter.join();
        }
        assertEquals(16 * 50, decided.get());
        assertEquals(limit, admitted.get());
    }

    @Test
    void semaphoreNeverHasMoreHoldersThanPermits() throws Exception {
        Semaphore sem = client.semaphore("pool", 3, Duration.ofSeconds(10));
        AtomicInteger inside = new AtomicInteger();
        AtomicInteger most = new AtomicInteger();
        AtomicInteger served = new AtomicInteger();
        runThreads(12, i -> {
            for (int n = 0; n < 3; n++) {
                try (Permit p = sem.acquire(Duration.ofSeconds(20))) {
                    int now = inside.incrementAndGet();
                    most.accumulateAndGet(now, Math::max);
                    sleep(5);
                    inside.decrementAndGet();
                    served.incrementAndGet();
                }
            }
        });
        assertEquals(36, served.get());
        assertTrue(most.get() <= 3, "max holders " + most.get());
        assertEquals(0, sem.holders());
    }

    @Test
    void closeWhileOtherThreadsCallIsSafe() throws Exception {
        RateLimitClient shared = RateLimitClient.connect(redis.url());
        Limiter lim = shared.limiter("closing", "1000000/hour", Algorithm.TOKEN_BUCKET);
        Limiter exhausted = shared.limiter("closing-wait", "1/hour", Algorithm.GCRA);
        exhausted.acquire("w");
        ConcurrentLinkedQueue<Throwable> unexpected = new ConcurrentLinkedQueue<>();
        AtomicInteger closedSeen = new AtomicInteger();
        AtomicInteger calls = new AtomicInteger();
        CountDownLatch running = new CountDownLatch(THREADS);
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < THREADS; t++) {
            int id = t;
            Thread th = new Thread(() -> {
                running.countDown();
                try {
                    while (true) {
                        if (id % 8 == 0) {
                            // a blocking wait in flight must stop at close, not run its 30 s
                            exhausted.tryAcquire("w", 1, Duration.ofSeconds(30));
                        } else {
                            lim.acquire("k" + (id % 4));
                        }
                        calls.incrementAndGet();
                    }
                } catch (RateLimitException e) {
                    if (e.status() == Status.CLOSED) {
                        closedSeen.incrementAndGet();
                    } else {
                        unexpected.add(e);
                    }
                } catch (Throwable e) {
                    unexpected.add(e);
                }
            });
            th.start();
            threads.add(th);
        }
        running.await();
        Thread.sleep(300);
        long start = System.nanoTime();
        shared.close();
        long closeMs = (System.nanoTime() - start) / 1_000_000;
        for (Thread th : threads) {
            th.join(5000);
            assertFalse(th.isAlive(), "a caller did not return after close");
        }
        assertTrue(unexpected.isEmpty(), () -> "unexpected: " + unexpected);
        assertEquals(THREADS, closedSeen.get());
        assertTrue(calls.get() > THREADS, "calls made before close: " + calls.get());
        assertTrue(closeMs < 2000, "close took " + closeMs + " ms");
        assertTrue(shared.isClosed());
        ClientClosedException after = assertThrows(ClientClosedException.class, () -> lim.acquire("k0"));
        assertEquals(Status.CLOSED, after.status());
        assertTrue(after instanceof RedisFailureException);
        shared.close(); // twice is a no-op
    }

    @Test
    void interruptStopsTryAcquirePromptlyAndKeepsTheFlag() throws Exception {
        Limiter lim = client.limiter("intr", "1/hour", Algorithm.SLIDING_LOG);
        assertTrue(lim.acquire("u").allowed());
        // retry_after is an hour: use a limiter whose retry fits in the timeout
        Limiter soon = client.limiter("intr-soon", Rate.of(1, Duration.ofSeconds(20)), Algorithm.FIXED_WINDOW);
        assertTrue(soon.acquire("u").allowed());
        assertInterruptible(() -> soon.tryAcquire("u", 1, Duration.ofSeconds(30)));
        Semaphore sem = client.semaphore("intr-sem", 1, Duration.ofSeconds(30));
        Permit held = sem.acquire(Duration.ofSeconds(1));
        assertInterruptible(() -> sem.acquire(Duration.ofSeconds(30)));
        held.close();
        DelayQueue q = client.delayQueue("intr-q");
        assertInterruptible(() -> q.pop(1, Duration.ofSeconds(30)));
        // the cancelled waiter left the semaphore queue: the permit is free again
        assertEquals(1, sem.available());
        assertFalse(lim.acquire("u").allowed());
    }

    private static void assertInterruptible(Runnable blocking) throws Exception {
        AtomicReference<Throwable> thrown = new AtomicReference<>();
        AtomicReference<Boolean> flagKept = new AtomicReference<>();
        AtomicReference<Long> stoppedAt = new AtomicReference<>();
        Thread t = new Thread(() -> {
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
        t.join(5000);
        assertFalse(t.isAlive());
        assertNotNull(thrown.get(), "expected CancelledException");
        assertTrue(thrown.get() instanceof CancelledException, thrown.get().toString());
        assertEquals(Status.CANCELLED, ((RateLimitException) thrown.get()).status());
        assertTrue(flagKept.get(), "the interrupt flag must stay set");
        long ms = (stoppedAt.get() - interruptedAt) / 1_000_000;
        assertTrue(ms < 500, "stopped " + ms + " ms after the interrupt");
    }

    static void runThreads(int n, Consumer<Integer> body) throws Exception {
        CyclicBarrier start = new CyclicBarrier(n);
        ConcurrentLinkedQueue<Throwable> errors = new ConcurrentLinkedQueue<>();
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            int id = i;
            Thread t = new Thread(() -> {
                try {
                    start.await(10, TimeUnit.SECONDS);
                    body.accept(id);
                } catch (Throwable e) {
                    errors.add(e);
                }
            });
            t.start();
            threads.add(t);
        }
        for (Thread t : threads) {
            t.join(60_000);
            if (t.isAlive()) {
                fail("thread still running");
            }
        }
        if (!errors.isEmpty()) {
            AssertionError e = new AssertionError(errors.size() + " thread(s) failed");
            errors.forEach(e::addSuppressed);
            throw e;
        }
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
