package io.ratelimit;

import static io.ratelimit.AsyncTest.HANG;
import static io.ratelimit.AsyncTest.failure;
import static io.ratelimit.AsyncTest.sameFailure;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The asynchronous semaphore, lock and delay queue (rl_submit_* waits through
 * JNI): FIFO and never above the permits, woken by the release or push,
 * timeouts, cancellation that leaves nothing held or queued and loses no
 * message, close with waits in flight, and no thread per wait. Redis is
 * looked at through a raw connection (RedisServer.command), not the code
 * under test, where it matters.
 */
class AsyncPrimitivesTest extends RedisTestBase {
    /** A wake-up through pub/sub takes milliseconds; a wait that polls (check-in every 1 s) would miss this. */
    static final long WOKEN_MS = 500;

    /** A client per test (hides the class's shared one), so asyncInFlight() and its I/O thread are its own. */
    RateLimitClient client;

    @BeforeEach
    void openClient() {
        client = RateLimitClient.connect(redis.url());
    }

    @AfterEach
    void closeClient() {
        client.close();
    }

    // ---- semaphore and lock -----------------------------------------------------------

    @Test
    void manyWaitersNeverAbovePermitsAndServedInArrivalOrder() throws Exception {
        final int waiters = 60;
        final int max = 3;
        Semaphore sem = client.semaphore("ap-fifo", max, Duration.ofSeconds(60));
        List<Permit> first = new ArrayList<>();
        for (int i = 0; i < max; i++) {
            first.add(sem.tryAcquire().orElseThrow());
        }
        ConcurrentLinkedQueue<Integer> order = new ConcurrentLinkedQueue<>();
        ConcurrentLinkedQueue<Long> fences = new ConcurrentLinkedQueue<>();
        AtomicInteger holding = new AtomicInteger();
        AtomicInteger most = new AtomicInteger();
        List<CompletableFuture<Optional<Permit>>> all = new ArrayList<>();
        for (int i = 0; i < waiters; i++) {
            int index = i;
            CompletableFuture<Optional<Permit>> f = sem.tryAcquireAsync(Duration.ofSeconds(60));
            all.add(f);
            // on the I/O thread: note the grant, hold it a little, give it back without blocking
            f.thenAccept(p -> {
                order.add(index);
                fences.add(p.orElseThrow().fencingToken());
                most.accumulateAndGet(holding.incrementAndGet(), Math::max);
                CompletableFuture.delayedExecutor(10, TimeUnit.MILLISECONDS).execute(() -> {
                    holding.decrementAndGet(); // before the release is sent: never above what Redis counts
                    p.get().releaseAsync();
                });
            });
            Thread.sleep(5); // they queue in this order
        }
        Thread.sleep(200);
        assertTrue(order.isEmpty(), "granted while all permits were held: " + order);
        // Redis's own count, sampled while they are served
        AtomicBoolean sampling = new AtomicBoolean(true);
        AtomicLong mostInRedis = new AtomicLong();
        Thread sampler = new Thread(() -> {
            while (sampling.get()) {
                try {
                    long live = (Long) redis.command("ZCARD", "rl:{ap-fifo}:semaphore"); // holders
                    mostInRedis.accumulateAndGet(live, Math::max);
                    Thread.sleep(2);
                } catch (Exception e) {
                    return;
                }
            }
        });
        sampler.start();
        for (Permit p : first) {
            assertTrue(p.release());
        }
        CompletableFuture.allOf(all.toArray(new CompletableFuture<?>[0])).get(HANG, TimeUnit.SECONDS);
        sampling.set(false);
        sampler.join();
        for (CompletableFuture<Optional<Permit>> f : all) {
            assertTrue(f.get().isPresent(), "every waiter is served");
        }
        assertTrue(most.get() >= 1 && most.get() <= max, "held at once: " + most.get());
        assertTrue(mostInRedis.get() <= max, "holders in Redis: " + mostInRedis.get());
        // the first max are woken together; beyond that, arrival order
        List<Integer> served = new ArrayList<>(order);
        assertEquals(waiters, served.size());
        for (int k = 0; k < served.size(); k++) {
            assertTrue(Math.abs(served.get(k) - k) <= max, "served out of order: " + served);
        }
        long last = first.get(max - 1).fencingToken();
        for (long fence : fences) {
            assertTrue(fence > last, "fencing tokens rise: " + fences);
            last = fence;
        }
        waitFor(() -> sem.holders() == 0, "every permit released");
        // the last release ran in Redis; its reply may still be on its way
        waitFor(() -> client.asyncInFlight() == 0, "nothing left in flight");
    }

    @Test
    void wokenByTheReleaseNotByPolling() throws Exception {
        DistributedLock lock = client.lock("ap-woken", Duration.ofSeconds(60));
        Semaphore sem = client.semaphore("ap-woken-sem", 1, Duration.ofSeconds(60));
        // several rounds: a wait polling once a second would miss the bound in some
        for (int round = 0; round < 4; round++) {
            Lock held = lock.acquire(Duration.ZERO);
            AtomicLong doneAt = new AtomicLong();
            CompletableFuture<Lock> f = lock.acquireAsync(Duration.ofSeconds(20));
            f.whenComplete((l, e) -> doneAt.set(System.nanoTime()));
            Thread.sleep(300 + 150 * round); // it tried, subscribed and sleeps; a different phase each round
            assertFalse(f.isDone());
            long releasedAt = System.nanoTime();
            assertTrue(held.release());
            Lock got = f.get(HANG, TimeUnit.SECONDS);
            long tookMs = TimeUnit.NANOSECONDS.toMillis(doneAt.get() - releasedAt);
            assertTrue(tookMs < WOKEN_MS, "lock: woken " + tookMs + " ms after the release");
            assertTrue(got.fencingToken() > held.fencingToken());
            assertTrue(got.releaseAsync().get(HANG, TimeUnit.SECONDS));

            Permit p = sem.acquire(Duration.ZERO);
            CompletableFuture<Permit> g = sem.acquireAsync(Duration.ofSeconds(20));
            g.whenComplete((l, e) -> doneAt.set(System.nanoTime()));
            Thread.sleep(300 + 150 * round);
            assertFalse(g.isDone());
            releasedAt = System.nanoTime();
            assertTrue(p.releaseAsync().get(HANG, TimeUnit.SECONDS));
            g.get(HANG, TimeUnit.SECONDS).close();
            tookMs = TimeUnit.NANOSECONDS.toMillis(doneAt.get() - releasedAt);
            assertTrue(tookMs < WOKEN_MS, "semaphore: woken " + tookMs + " ms after the release");
        }
    }

    @Test
    void completionsRunOnTheIoThread() throws Exception {
        Semaphore sem = client.semaphore("ap-thread", 1, Duration.ofSeconds(60));
        Permit held = sem.acquire(Duration.ZERO);
        // the dependent is registered while the acquire surely waits
        CompletableFuture<String> name = sem.tryAcquireAsync(Duration.ofSeconds(20))
                .thenApply(p -> {
                    p.orElseThrow().releaseAsync(); // calling again from there: queued, not blocking
                    return Thread.currentThread().getName();
                });
        Thread.sleep(100);
        assertFalse(name.isDone());
        assertTrue(held.release());
        assertTrue(name.get(HANG, TimeUnit.SECONDS).startsWith("ratelimit-io-"), name.get());
        waitFor(() -> sem.available() == 1, "released from the I/O thread");
    }

    @Test
    void timesOutNotAcquiredAndOutOfTheQueue() throws Exception {
        Semaphore sem = client.semaphore("ap-timeout", 1, Duration.ofSeconds(60));
        DistributedLock lock = client.lock("ap-timeout-lock", Duration.ofSeconds(60));
        Permit held = sem.acquire(Duration.ZERO);
        Lock heldLock = lock.acquire(Duration.ZERO);
        long start = System.nanoTime();
        Optional<Permit> none = sem.tryAcquireAsync(Duration.ofMillis(300)).get(HANG, TimeUnit.SECONDS);
        long tookMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        assertTrue(none.isEmpty());
        assertTrue(tookMs >= 300, "gave up after " + tookMs + " ms");
        assertTrue(lock.tryAcquireAsync(Duration.ofMillis(200)).get(HANG, TimeUnit.SECONDS).isEmpty());
        // timeout 0: one try, at once
        assertTrue(sem.tryAcquireAsync().get(HANG, TimeUnit.SECONDS).isEmpty());
        assertTrue(lock.tryAcquireAsync().get(HANG, TimeUnit.SECONDS).isEmpty());
        // acquireAsync: the blocking call's exception and message
        sameFailure(() -> sem.acquire(Duration.ofMillis(100)), () -> sem.acquireAsync(Duration.ofMillis(100)));
        sameFailure(() -> lock.acquire(Duration.ofMillis(100)), () -> lock.acquireAsync(Duration.ofMillis(100)));
        // the leave follows the completion
        waitFor(() -> queued("ap-timeout", "semaphore") == 0, "the timed-out waiters left the queue");
        waitFor(() -> queued("ap-timeout-lock", "lock") == 0, "the timed-out lock waiters left the queue");
        assertEquals(1, sem.holders());
        assertTrue(held.release());
        assertTrue(heldLock.release());
    }

    @Test
    void cancelLeavesNoHolderAndNoQueuedWaiter() throws Exception {
        Semaphore sem = client.semaphore("ap-cancel", 1, Duration.ofSeconds(60));
        Permit held = sem.acquire(Duration.ZERO);
        CompletableFuture<Optional<Permit>> f = sem.tryAcquireAsync(Duration.ofSeconds(30));
        waitFor(() -> queued("ap-cancel", "semaphore") == 1, "the waiter is queued");
        assertTrue(f.cancel(true));
        assertTrue(f.isCancelled());
        assertThrows(CancellationException.class, () -> f.get(HANG, TimeUnit.SECONDS));
        waitFor(() -> queued("ap-cancel", "semaphore") == 0, "the cancelled waiter left the queue");
        waitFor(() -> client.asyncInFlight() == 0, "the core completed the cancelled wait");

        // orTimeout gives up the same way
        CompletableFuture<Permit> g = sem.acquireAsync(Duration.ofSeconds(30));
        g.orTimeout(300, TimeUnit.MILLISECONDS);
        assertInstanceOf(TimeoutException.class, failure(g));
        waitFor(() -> queued("ap-cancel", "semaphore") == 0, "the timed-out future's waiter left the queue");
        waitFor(() -> client.asyncInFlight() == 0, "the core completed the withdrawn wait");

        // the permit freed now goes to nobody: both waits are gone
        assertTrue(held.release());
        Thread.sleep(300);
        assertEquals(0, sem.holders());
        assertEquals(1, sem.available());

        // the lock, too
        DistributedLock lock = client.lock("ap-cancel-lock", Duration.ofSeconds(60));
        Lock heldLock = lock.acquire(Duration.ZERO);
        CompletableFuture<Lock> l = lock.acquireAsync(Duration.ofSeconds(30));
        waitFor(() -> queued("ap-cancel-lock", "lock") == 1, "the lock waiter is queued");
        assertTrue(l.cancel(true));
        waitFor(() -> queued("ap-cancel-lock", "lock") == 0, "the cancelled lock waiter left the queue");
        assertTrue(heldLock.release());
        Thread.sleep(300);
        assertTrue(lock.tryAcquire().isPresent(), "the cancelled waiter took the lock");
    }

    @Test
    void cancelRacingAGrantNeverLeavesAPermitNobodyHolds() throws Exception {
        Semaphore sem = client.semaphore("ap-race", 1, Duration.ofSeconds(60));
        Semaphore other = client.semaphore("ap-race-other", 1, Duration.ofSeconds(60));
        int granted = 0;
        int cancelled = 0;
        for (int i = 0; i < 40; i++) {
            CompletableFuture<Optional<Permit>> f;
            if (i % 2 == 0) {
                // cancelled from the caller, racing the grant's reply
                f = sem.tryAcquireAsync(Duration.ofSeconds(5));
                f.cancel(true);
            } else {
                // cancelled on the I/O thread just before the grant's completion is
                // delivered (both replies usually come in one read): the binding,
                // not the core, finds the grant for a cancelled future
                CompletableFuture<Optional<Permit>> before = other.tryAcquireAsync(Duration.ofSeconds(5));
                f = sem.tryAcquireAsync(Duration.ofSeconds(5));
                CompletableFuture<Optional<Permit>> target = f;
                before.thenAccept(p -> {
                    target.cancel(true);
                    p.orElseThrow().releaseAsync();
                }).get(HANG, TimeUnit.SECONDS);
            }
            if (f.isCancelled()) {
                cancelled++;
            } else {
                granted++;
                assertTrue(f.get(HANG, TimeUnit.SECONDS).orElseThrow().release());
            }
            waitFor(() -> sem.holders() == 0 && other.holders() == 0, "nobody holds a permit");
            waitFor(() -> client.asyncInFlight() == 0, "nothing in flight");
        }
        assertEquals(40, granted + cancelled);
        assertTrue(cancelled > 0, "no cancel won a race");
        assertEquals(0, queued("ap-race", "semaphore"));
    }

    @Test
    void asyncAndBlockingReleaseAreInterchangeable() throws Exception {
        Semaphore sem = client.semaphore("ap-mixed", 2, Duration.ofSeconds(60));
        Permit a = sem.acquireAsync(Duration.ofSeconds(5)).get(HANG, TimeUnit.SECONDS);
        Permit b = sem.acquire(Duration.ZERO);
        assertTrue(b.fencingToken() > a.fencingToken());
        assertTrue(a.refreshAsync(Duration.ofSeconds(30)).get(HANG, TimeUnit.SECONDS));
        assertTrue(a.refresh(Duration.ofSeconds(30)));
        assertTrue(a.release(), "an async permit, released blocking");
        assertFalse(a.releaseAsync().get(HANG, TimeUnit.SECONDS), "released once");
        assertTrue(b.releaseAsync().get(HANG, TimeUnit.SECONDS), "a blocking permit, released async");
        assertFalse(b.release());
        assertFalse(b.refreshAsync(Duration.ofSeconds(30)).get(HANG, TimeUnit.SECONDS), "released: gone");
        assertEquals(0, sem.holders());

        DistributedLock lock = client.lock("ap-mixed-lock", Duration.ofSeconds(60));
        Lock l = lock.tryAcquireAsync().get(HANG, TimeUnit.SECONDS).orElseThrow();
        assertTrue(lock.tryAcquireAsync().get(HANG, TimeUnit.SECONDS).isEmpty(), "mutual exclusion");
        assertTrue(l.extendAsync(Duration.ofSeconds(30)).get(HANG, TimeUnit.SECONDS));
        l.close();
        Lock m = lock.acquire(Duration.ZERO);
        assertTrue(m.fencingToken() > l.fencingToken());
        assertTrue(m.releaseAsync().get(HANG, TimeUnit.SECONDS));
        assertFalse(m.extendAsync(Duration.ofSeconds(30)).get(HANG, TimeUnit.SECONDS));
    }

    @Test
    void sameExceptionsAsTheBlockingCalls() throws Exception {
        Semaphore sem = client.semaphore("ap-errors", 1, Duration.ofSeconds(60));
        Semaphore zero = client.semaphore("ap-errors-zero", 0, Duration.ofSeconds(60));
        Semaphore noLease = client.semaphore("ap-errors-lease", 1, Duration.ZERO);
        DistributedLock lock = client.lock("ap-errors-lock", Duration.ofSeconds(60));
        DelayQueue q = client.delayQueue("ap-errors-q");
        sameFailure(() -> sem.tryAcquire(Duration.ofMillis(-1)), () -> sem.tryAcquireAsync(Duration.ofMillis(-1)));
        sameFailure(() -> sem.tryAcquire(null), () -> sem.tryAcquireAsync(null));
        sameFailure(() -> sem.tryAcquire(Duration.ofDays(365L * 2000)),
                () -> sem.tryAcquireAsync(Duration.ofDays(365L * 2000)));
        sameFailure(() -> zero.tryAcquire(), () -> zero.tryAcquireAsync());
        sameFailure(() -> noLease.tryAcquire(), () -> noLease.tryAcquireAsync());
        sameFailure(() -> lock.acquire(Duration.ofMillis(-5)), () -> lock.acquireAsync(Duration.ofMillis(-5)));
        Permit p = sem.acquire(Duration.ZERO);
        sameFailure(() -> p.refresh(Duration.ofMillis(-1)), () -> p.refreshAsync(Duration.ofMillis(-1)));
        sameFailure(() -> p.refresh(null), () -> p.refreshAsync(null));
        sameFailure(() -> q.pop(0, Duration.ofSeconds(1)), () -> q.popAsync(0, Duration.ofSeconds(1)));
        sameFailure(() -> q.pop(1, Duration.ofMillis(-1)), () -> q.popAsync(1, Duration.ofMillis(-1)));
        sameFailure(() -> q.popReady(-3), () -> q.popReadyAsync(-3));
        sameFailure(() -> q.push(null, Duration.ZERO), () -> q.pushAsync(null, Duration.ZERO));
        sameFailure(() -> q.push("m", Duration.ofMillis(-1)), () -> q.pushAsync("m", Duration.ofMillis(-1)));
        sameFailure(() -> q.push("m", null), () -> q.pushAsync("m", null));
    }

    @Test
    void refreshWithAZeroLeaseSameMessageAsTheBlockingCall() throws Exception {
        Permit p = client.semaphore("ap-errors-zero-lease", 1, Duration.ofSeconds(60)).acquire(Duration.ZERO);
        sameFailure(() -> p.refresh(Duration.ZERO), () -> p.refreshAsync(Duration.ZERO));
        Lock l = client.lock("ap-errors-zero-lease-lock", Duration.ofSeconds(60)).acquire(Duration.ZERO);
        sameFailure(() -> l.extend(Duration.ZERO), () -> l.extendAsync(Duration.ZERO));
    }

    // ---- delay queue ----------------------------------------------------------------------

    @Test
    void popWokenByThePush() throws Exception {
        DelayQueue q = client.delayQueue("ap-pop");
        assertEquals(List.of(), q.popReadyAsync(10).get(HANG, TimeUnit.SECONDS));
        for (int round = 0; round < 3; round++) {
            AtomicLong doneAt = new AtomicLong();
            CompletableFuture<List<String>> f = q.popAsync(10, Duration.ofSeconds(20));
            f.whenComplete((m, e) -> doneAt.set(System.nanoTime()));
            Thread.sleep(300 + 200 * round);
            assertFalse(f.isDone());
            long pushedAt = System.nanoTime();
            assertTrue(q.push("a\0b-" + round, Duration.ZERO));
            assertEquals(List.of("a\0b-" + round), f.get(HANG, TimeUnit.SECONDS));
            long tookMs = TimeUnit.NANOSECONDS.toMillis(doneAt.get() - pushedAt);
            assertTrue(tookMs < WOKEN_MS, "woken " + tookMs + " ms after the push");
        }
        // pushAsync: false for a message already queued; a delayed one comes when due
        assertTrue(q.pushAsync("later", Duration.ofMillis(400)).get(HANG, TimeUnit.SECONDS));
        assertFalse(q.pushAsync("later", Duration.ofMillis(400)).get(HANG, TimeUnit.SECONDS));
        assertEquals(List.of(), q.popReadyAsync(10).get(HANG, TimeUnit.SECONDS));
        long start = System.nanoTime();
        assertEquals(List.of("later"), q.popAsync(10, Duration.ofSeconds(20)).get(HANG, TimeUnit.SECONDS));
        assertTrue(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start) >= 300);
        // nothing within the timeout
        assertEquals(List.of(), q.popAsync(10, Duration.ofMillis(200)).get(HANG, TimeUnit.SECONDS));
        // popReadyAsync takes what is due, up to max
        for (int i = 0; i < 5; i++) {
            q.push("m" + i, Duration.ZERO);
        }
        assertEquals(3, q.popReadyAsync(3).get(HANG, TimeUnit.SECONDS).size());
        assertEquals(2, q.popReadyAsync(10).get(HANG, TimeUnit.SECONDS).size());
    }

    @Test
    void cancelledPopLosesNoMessage() throws Exception {
        DelayQueue q = client.delayQueue("ap-pop-cancel");
        // cancelled while it sleeps: a later push stays for someone else
        CompletableFuture<List<String>> f = q.popAsync(10, Duration.ofSeconds(30));
        Thread.sleep(200);
        assertTrue(f.cancel(true));
        waitFor(() -> client.asyncInFlight() == 0, "the core completed the cancelled pop");
        assertTrue(q.push("kept", Duration.ZERO));
        Thread.sleep(200);
        assertEquals(1, q.size());

        // racing a due message, from the caller and from the I/O thread: the
        // message is received, or back in the queue; never lost
        DelayQueue other = client.delayQueue("ap-pop-cancel-other");
        int received = 0;
        for (int i = 0; i < 40; i++) {
            CompletableFuture<List<String>> pop;
            if (i % 2 == 0) {
                pop = q.popAsync(10, Duration.ofSeconds(5));
                pop.cancel(true);
            } else {
                assertTrue(other.push("x", Duration.ZERO));
                CompletableFuture<List<String>> before = other.popAsync(10, Duration.ofSeconds(5));
                pop = q.popAsync(10, Duration.ofSeconds(5));
                CompletableFuture<List<String>> target = pop;
                before.thenRun(() -> target.cancel(true)).get(HANG, TimeUnit.SECONDS);
                assertEquals(List.of("x"), before.get(HANG, TimeUnit.SECONDS));
            }
            if (!pop.isCancelled()) {
                assertEquals(List.of("kept"), pop.get(HANG, TimeUnit.SECONDS));
                received++;
                assertTrue(q.push("kept", Duration.ZERO));
            }
            waitFor(() -> client.asyncInFlight() == 0, "nothing in flight");
            waitFor(() -> q.size() == 1, "the message is back in the queue");
        }
        assertTrue(received < 40, "no cancel won a race");
        assertEquals(List.of("kept"), q.popReady(10));

        // orTimeout on a pop: withdrawn too
        CompletableFuture<List<String>> g = q.popAsync(10, Duration.ofSeconds(30)).orTimeout(200, TimeUnit.MILLISECONDS);
        assertInstanceOf(TimeoutException.class, failure(g));
        waitFor(() -> client.asyncInFlight() == 0, "the core completed the withdrawn pop");
        assertTrue(q.push("after", Duration.ZERO));
        Thread.sleep(200);
        assertEquals(List.of("after"), q.popReady(10));
    }

    // ---- close, threads --------------------------------------------------------------------

    @Test
    void closeCompletesEveryWaitWithClosed() throws Exception {
        RateLimitClient c = RateLimitClient.connect(redis.url());
        Lock held = client.lock("ap-close", Duration.ofSeconds(60)).acquire(Duration.ZERO);
        DistributedLock lock = c.lock("ap-close", Duration.ofSeconds(60));
        Semaphore sem = c.semaphore("ap-close-sem", 1, Duration.ofSeconds(60));
        Permit semHeld = client.semaphore("ap-close-sem", 1, Duration.ofSeconds(60)).acquire(Duration.ZERO);
        DelayQueue q = c.delayQueue("ap-close-q");
        List<CompletableFuture<?>> all = new ArrayList<>();
        List<CompletableFuture<String>> dependents = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            all.add(lock.acquireAsync(Duration.ofSeconds(60)));
            all.add(sem.tryAcquireAsync(Duration.ofSeconds(60)));
            all.add(q.popAsync(1, Duration.ofSeconds(60)));
        }
        for (CompletableFuture<?> f : all) {
            // a dependent that calls the closing client again: must not deadlock
            dependents.add(f.handle((r, e) -> {
                try {
                    q.popReady(1);
                    return "called";
                } catch (RateLimitException again) {
                    return again.status().toString();
                }
            }));
        }
        Thread.sleep(300); // all waiting
        assertEquals(30, c.asyncInFlight());
        c.close();
        for (CompletableFuture<?> f : all) {
            assertTrue(f.isDone(), "done before close returned");
            ClientClosedException e = assertInstanceOf(ClientClosedException.class, failure(f));
            assertEquals(Status.CLOSED, e.status());
            assertEquals("client is closed", e.getMessage());
        }
        for (CompletableFuture<String> d : dependents) {
            assertEquals("CLOSED", d.getNow("pending"));
        }
        assertEquals(0, c.asyncInFlight());
        // after: refused at once, same exception
        assertInstanceOf(ClientClosedException.class, failure(lock.acquireAsync(Duration.ofSeconds(1))));
        assertInstanceOf(ClientClosedException.class, failure(q.pushAsync("m", Duration.ZERO)));
        assertTrue(held.release());
        assertTrue(semHeld.release());
    }

    @Test
    void noThreadPerWait() throws Exception {
        Semaphore sem = client.semaphore("ap-threads", 1, Duration.ofSeconds(60));
        DelayQueue q = client.delayQueue("ap-threads-q");
        Permit held = sem.acquire(Duration.ZERO);
        // warm up: the I/O thread, its subscriber, the JDK's delayer
        assertTrue(sem.tryAcquireAsync().get(HANG, TimeUnit.SECONDS).isEmpty());
        CompletableFuture.delayedExecutor(1, TimeUnit.MILLISECONDS).execute(() -> {});
        Thread.sleep(100);
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        int before = threads.getThreadCount();
        List<CompletableFuture<?>> all = new ArrayList<>();
        for (int i = 0; i < 250; i++) {
            all.add(sem.tryAcquireAsync(Duration.ofSeconds(60)));
            all.add(q.popAsync(1, Duration.ofSeconds(60)));
        }
        int most = before;
        for (int i = 0; i < 10; i++) {
            Thread.sleep(100);
            most = Math.max(most, threads.getThreadCount());
        }
        assertEquals(500, client.asyncInFlight());
        for (CompletableFuture<?> f : all) {
            assertFalse(f.isDone());
        }
        assertTrue(most <= before + 2, "threads: " + before + " before, " + most + " during 500 waits");
        waitFor(() -> queued("ap-threads", "semaphore") == 250, "250 waiters queued");
        for (CompletableFuture<?> f : all) {
            f.cancel(true);
        }
        waitFor(() -> client.asyncInFlight() == 0, "every wait withdrawn");
        waitFor(() -> queued("ap-threads", "semaphore") == 0, "no waiter left in the queue");
        assertTrue(held.release());
        Thread.sleep(200);
        assertEquals(0, sem.holders());
    }

    // ---- helpers ----------------------------------------------------------------------------

    /** Waiters in a semaphore's (or lock's) queue, read from Redis directly. */
    static long queued(String name, String kind) {
        try {
            return (Long) redis.command("ZCARD", "rl:{" + name + "}:" + kind + ":queue");
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }

    /** Polls {@code condition} for up to 5 s; what the core does after a completion takes a round trip. */
    static void waitFor(BooleanSupplier condition, String what) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                fail("not within 5 s: " + what);
            }
            Thread.sleep(10);
        }
    }
}
