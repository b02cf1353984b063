package io.ratelimit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.ratelimit.micrometer.RateLimitMetrics;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.LongUnaryOperator;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** Leases (LimiterConfig.lease): local decisions, the bound under many callers, give-back. */
class LeaseTest extends RedisTestBase {
    private static final LimiterConfig HOT = LimiterConfig.of(Algorithm.GCRA, "1000000/second");
    /** Nothing comes back with time: remaining rises only by a give-back. */
    private static final LimiterConfig DAY = LimiterConfig.of(Algorithm.FIXED_WINDOW, "1000000/day");

    // ---- validation -------------------------------------------------------------------

    @Test
    void leaseIsValidatedWhenTheConfigIsBuilt() throws Exception {
        assertTrue(HOT.lease().isEmpty(), "off by default");
        for (Duration bad : new Duration[] {Duration.ZERO, Duration.ofMillis(-1), Duration.ofNanos(999_999),
            Duration.ofHours(1).plusMillis(1), Duration.ofDays(365 * 1000)}) {
            InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> HOT.lease(bad),
                    bad.toString());
            assertTrue(e.getMessage().contains("lease"), e.getMessage());
        }
        assertThrows(InvalidArgumentException.class, () -> HOT.lease(null));
        assertEquals(Duration.ofMillis(1), HOT.lease(Duration.ofNanos(1_500_000)).lease().get(), "whole ms");
        assertEquals(Duration.ofHours(1), HOT.lease(Duration.ofHours(1)).lease().get());
        LimiterConfig leased = HOT.lease(Duration.ofMillis(50));
        assertEquals(Duration.ofMillis(50), leased.perClient().initialTokens(3).lease().get(), "kept by each step");
        assertTrue(leased.toString().endsWith(" lease 50ms"), leased.toString());
        assertFalse(leased.equals(HOT));
        assertEquals(leased, HOT.lease(Duration.ofMillis(50)));
        assertEquals(leased.hashCode(), HOT.lease(Duration.ofMillis(50)).hashCode());
        assertEquals(0, redis.dbsize(), "nothing sent");
    }

    @Test
    void theLeaseIsNotPartOfTheStoredSpec() {
        client.configure("stored", HOT.lease(Duration.ofMillis(50)));
        assertEquals(HOT, client.getConfig("stored").get());
        // a leasing limiter and a plain one agree with the stored spec
        client.limiter("stored", HOT.lease(Duration.ofSeconds(2)));
        client.limiter("stored", HOT);
    }

    @Test
    void aStoredSpecTakesALeaseToo() throws Exception {
        assertThrows(InvalidArgumentException.class, () -> client.limiter("stored-lease", Duration.ZERO));
        client.configure("stored-lease", HOT);
        try (RateLimitClient c = RateLimitClient.connect(redis.url())) {
            Limiter lim = c.limiter("stored-lease", Duration.ofSeconds(1));
            assertEquals(Duration.ofSeconds(1), lim.lease().get());
            assertTrue(lim.toString().endsWith("stored spec lease 1000ms}"), lim.toString());
            assertTrue(c.limiter("stored-lease").lease().isEmpty());
            long scripts0 = scriptCalls();
            int local = 0;
            for (int i = 0; i < 1000; i++) {
                local += lim.acquire("k").isLocal() ? 1 : 0;
            }
            assertTrue(local >= 900, local + " of 1000 local");
            assertTrue(scriptCalls() - scripts0 <= 50, (scriptCalls() - scripts0) + " script calls");
        }
    }

    @Test
    void resultSaysWhetherItWasLocal() {
        Result r = new Result(true, 10, 9, -1, 100, 0, false, 1, 0, true);
        assertTrue(r.isLocal());
        assertTrue(r.toString().endsWith(", local}"), r.toString());
        assertFalse(new Result(true, 10, 9, -1, 100, 0, false, 1, 0, false).toString().contains("local"));
    }

    // ---- local decisions --------------------------------------------------------------

    @Test
    void aHotKeyIsDecidedLocallyWithFarFewerScriptCalls() throws Exception {
        try (RateLimitClient c = RateLimitClient.connect(redis.url())) {
            Limiter lim = c.limiter("hot", HOT.lease(Duration.ofSeconds(1)));
            long scripts0 = scriptCalls();
            int n = 4000;
            int local = 0;
            for (int i = 0; i < n; i++) {
                Result r = lim.acquire("k");
                assertTrue(r.allowed(), r.toString());
                local += r.isLocal() ? 1 : 0;
            }
            long scripts = scriptCalls() - scripts0;
            LimiterStats s = c.stats().get("hot");
            assertEquals(n, s.allowed(), s.toString());
            assertEquals(local, s.localAllowed(), s.toString());
            assertTrue(local >= n * 0.9, local + " of " + n + " local");
            assertTrue(s.leaseCalls() >= 1 && s.leaseCalls() <= scripts, s + " vs " + scripts + " script calls");
            assertTrue(scripts * 20 <= n, scripts + " script calls for " + n + " decisions");
        }
    }

    @Test
    void everyAcquireFormCarriesTheLease() throws Exception {
        try (RateLimitClient c = RateLimitClient.connect(redis.url())) {
            Limiter lim = c.limiter("forms", HOT.lease(Duration.ofSeconds(1)));
            for (int i = 0; i < 1000; i++) {
                lim.acquire("k"); // the block grows
            }
            long scripts0 = scriptCalls();
            List<Result> results = new ArrayList<>();
            for (int i = 0; i < 20; i++) {
                results.add(lim.acquireAtMost("k", 2));
                results.add(lim.tryAcquire("k", 1, Duration.ofMillis(100)));
                results.add(lim.acquireAsync("k").get(10, TimeUnit.SECONDS));
                results.add(lim.acquireAtMostAsync("k", 2).get(10, TimeUnit.SECONDS));
                results.add(lim.tryAcquireAsync("k", 1, Duration.ofMillis(100)).get(10, TimeUnit.SECONDS));
                results.addAll(lim.acquireMany(List.of("k", "k", "k"), 1));
                for (Outcome o : c.executeEach(List.of(Request.acquire(lim, "k", 1), Request.acquire(lim, "k", 1)))) {
                    results.add(o.result());
                }
            }
            long local = results.stream().filter(r -> r.allowed() && r.isLocal()).count();
            assertTrue(local >= results.size() * 0.8, local + " of " + results.size() + " local: " + results);
            assertTrue(scriptCalls() - scripts0 <= results.size() / 10, (scriptCalls() - scripts0) + " script calls");
            // peek, refund and reset still ask Redis
            assertFalse(lim.peek("k").isLocal());
        }
    }

    @Test
    void meteredSeparately() throws Exception {
        try (RateLimitClient c = RateLimitClient.connect(redis.url())) {
            Limiter lim = c.limiter("metered", HOT.lease(Duration.ofSeconds(1)));
            for (int i = 0; i < 500; i++) {
                lim.acquire("k");
            }
            SimpleMeterRegistry registry = new SimpleMeterRegistry();
            new RateLimitMetrics(c).bindTo(registry);
            LimiterStats s = c.stats().get("metered");
            FunctionCounter localAllowed = registry.get("ratelimit.local.decisions").tag("limiter", "metered")
                    .tag("outcome", "allowed").functionCounter();
            FunctionCounter localDenied = registry.get("ratelimit.local.decisions").tag("limiter", "metered")
                    .tag("outcome", "denied").functionCounter();
            FunctionCounter leaseCalls = registry.get("ratelimit.lease.calls").tag("limiter", "metered")
                    .functionCounter();
            assertEquals(s.localAllowed(), (long) localAllowed.count());
            assertEquals(0, (long) localDenied.count());
            assertEquals(s.leaseCalls(), (long) leaseCalls.count());
            assertTrue(s.localAllowed() > 0 && s.leaseCalls() > 0, s.toString());
        }
    }

    @Test
    void aDenialIsRememberedWithItsFields() {
        Limiter lim = client.limiter("deny", LimiterConfig.of(Algorithm.GCRA, "5/minute").lease(Duration.ofSeconds(5)));
        Result last;
        do {
            last = lim.acquire("k");
        } while (last.allowed());
        Result again = lim.acquire("k");
        assertFalse(again.allowed());
        assertTrue(again.isLocal(), "from memory: " + again);
        assertEquals(0, again.granted());
        assertTrue(again.retryAfter().toMillis() > 0 && again.retryAfter().compareTo(last.retryAfter()) <= 0,
                last + " then " + again);
        assertTrue(client.stats().get("deny").localDenied() >= 1);
    }

    // ---- never over-admit -------------------------------------------------------------

    /** One admission: System.nanoTime() before the call and after its result was seen. */
    private record Admission(long before, long after) {}

    @ParameterizedTest
    @EnumSource(value = Algorithm.class, names = {"GCRA", "TOKEN_BUCKET", "SLIDING_LOG"})
    void manyThreadsAndAsyncCallersNeverAdmitMoreThanTheBound(Algorithm algorithm) throws Exception {
        int limit = 100;
        long periodMs = 500;
        LimiterConfig config = LimiterConfig.of(algorithm, Rate.ofMillis(limit, periodMs, 0));
        ConcurrentLinkedQueue<Admission> admitted = new ConcurrentLinkedQueue<>();
        ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
        long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(5 * periodMs);
        try (RateLimitClient leasing = RateLimitClient.connect(redis.url());
                RateLimitClient plain = RateLimitClient.connect(redis.url())) {
            Limiter leased = leasing.limiter("bound", config.lease(Duration.ofMillis(50)));
            Limiter asked = plain.limiter("bound", config);
            List<Thread> threads = new ArrayList<>();
            for (int t = 0; t < 10; t++) {
                Limiter lim = t < 8 ? leased : asked; // 8 leasing threads, 2 that ask Redis every time
                threads.add(new Thread(() -> {
                    try {
                        while (System.nanoTime() < end) {
                            long before = System.nanoTime();
                            if (lim.acquire("k").allowed()) {
                                admitted.add(new Admission(before, System.nanoTime()));
                            }
                        }
                    } catch (Throwable e) {
                        failures.add(e);
                    }
                }));
            }
            threads.add(new Thread(() -> { // 64 asynchronous acquires in flight at a time
                try {
                    while (System.nanoTime() < end) {
                        List<CompletableFuture<Result>> wave = new ArrayList<>();
                        for (int i = 0; i < 64; i++) {
                            long before = System.nanoTime();
                            wave.add(leased.acquireAsync("k").whenComplete((r, e) -> {
                                if (r != null && r.allowed()) {
                                    admitted.add(new Admission(before, System.nanoTime()));
                                }
                            }));
                        }
                        CompletableFuture.allOf(wave.toArray(new CompletableFuture[0])).get(10, TimeUnit.SECONDS);
                    }
                } catch (Throwable e) {
                    failures.add(e);
                }
            }));
            threads.forEach(Thread::start);
            for (Thread t : threads) {
                t.join(30_000);
            }
            assertTrue(failures.isEmpty(), failures.toString());
            LimiterStats s = leasing.stats().get("bound");
            assertTrue(s.localAllowed() + s.localDenied() > 0, "no local decision: " + s);
        }
        List<Admission> all = new ArrayList<>(admitted);
        // the key saturated: at least half of what 5 periods allow went through
        assertTrue(all.size() >= limit * 5 / 2, all.size() + " admitted");
        // Redis's clock counts whole ms: 2 ms of slack for its rounding
        long slack = TimeUnit.MILLISECONDS.toNanos(2);
        long period = TimeUnit.MILLISECONDS.toNanos(periodMs);
        LongUnaryOperator most = algorithm == Algorithm.SLIDING_LOG
                // at most limit in any interval shorter than the period
                ? span -> span + slack < period ? limit : Long.MAX_VALUE
                // at most burst + rate x t in any interval t
                : span -> limit + (limit * (span + slack) + period - 1) / period;
        assertBound(all, most);
    }

    /**
     * For every set of admissions that surely happened within one interval
     * (from the earliest "before" to the latest "after"), no more than
     * most(its length). Never fails for a correct limiter, whatever the
     * round trips' length: a real admission lies between its before and after.
     */
    private static void assertBound(List<Admission> all, LongUnaryOperator most) {
        all.sort((x, y) -> Long.compare(x.before(), y.before()));
        for (int i = 0; i < all.size(); i++) {
            long start = all.get(i).before();
            List<Long> afters = new ArrayList<>(all.size() - i);
            for (int j = i; j < all.size(); j++) {
                afters.add(all.get(j).after());
            }
            Collections.sort(afters);
            for (int k = 0; k < afters.size(); k++) {
                long span = afters.get(k) - start;
                long count = k + 1;
                if (count > most.applyAsLong(span)) {
                    throw new AssertionError(count + " admissions within " + span / 1000 + " us; at most "
                            + most.applyAsLong(span) + " allowed");
                }
            }
        }
    }

    // ---- give-back ----------------------------------------------------------------------

    @Test
    void closingTheLimiterGivesBack() throws Exception {
        try (RateLimitClient c = RateLimitClient.connect(redis.url())) {
            Limiter lim = c.limiter("back", DAY.lease(Duration.ofSeconds(10)));
            Limiter observer = client.limiter("back", DAY);
            long held = heldAfterUse(lim, observer);
            long calls = c.stats().get("back").leaseCalls();
            lim.close();
            assertTrue(observer.peek("k").remaining() > held, "remaining did not rise");
            assertTrue(c.stats().get("back").leaseCalls() > calls, "no give-back call");
            assertTrue(lim.acquire("k").allowed(), "still usable after close");
            lim.close();
        }
    }

    @Test
    void closingTheClientGivesBack() throws Exception {
        Limiter observer = client.limiter("back", DAY);
        long held;
        Limiter lim;
        try (RateLimitClient c = RateLimitClient.connect(redis.url())) {
            lim = c.limiter("back", DAY.lease(Duration.ofSeconds(10)));
            held = heldAfterUse(lim, observer);
        }
        assertTrue(observer.peek("k").remaining() > held, "remaining did not rise");
        lim.close(); // nothing left to give back: no exception either
    }

    @Test
    void inAnOutageTheBlockInHandDecidesAndCloseDoesNotThrow() throws Exception {
        RedisServer own = RedisServer.start();
        try (RateLimitClient c = RateLimitClient.connect(own.url(),
                ClientOptions.defaults().timeout(Duration.ofMillis(500)))) {
            Limiter lim = c.limiter("outage", DAY.lease(Duration.ofSeconds(10)));
            heldAfterUse(lim, lim);
            own.close();
            Result r = lim.acquire("k");
            assertTrue(r.allowed() && r.isLocal(), "the block in hand decides: " + r);
            assertTimeoutPreemptively(Duration.ofSeconds(5), lim::close); // the give-back is dropped
        } finally {
            own.close();
        }
    }

    /**
     * Takes permits through lim (its block grows: 1, 2, 4 ... so 201 ends
     * inside one) and returns what observer then sees remaining.
     */
    private static long heldAfterUse(Limiter lim, Limiter observer) {
        for (int i = 0; i < 201; i++) {
            assertTrue(lim.acquire("k").allowed());
        }
        return observer.peek("k").remaining();
    }

    // ---- where completions run -----------------------------------------------------------

    /** Runs body on a new thread of that name and waits for it; what it throws is rethrown. */
    private static void onThread(String name, Runnable body) throws Exception {
        Throwable[] failure = new Throwable[1];
        Thread t = new Thread(() -> {
            try {
                body.run();
            } catch (Throwable e) {
                failure[0] = e;
            }
        }, name);
        t.start();
        t.join(10_000);
        if (failure[0] != null) {
            throw new AssertionError(failure[0]);
        }
    }

    @Test
    void onlyACompletionOnAnIoThreadThatDidNotSubmitItMarksTheIoThread() throws Exception {
        AsyncCalls calls = new AsyncCalls();
        try {
            AsyncCalls.Pending[] pending = new AsyncCalls.Pending[1];
            long[] tag = new long[1];
            Runnable submit = () -> {
                pending[0] = new AsyncCalls.Pending(null);
                tag[0] = calls.register(pending[0]);
            };
            Runnable complete = () -> {
                calls.complete(tag[0], 0, true, 10, 9, -1, 100, 0, false, 1, 0, true, null);
                assertTrue(pending[0].join().isLocal());
            };
            // decided from a lease inside the submit, on another client's I/O thread
            onThread("ratelimit-io-901", () -> {
                submit.run();
                complete.run();
                assertFalse(calls.onIoThread());
            });
            // waited for a block a blocking caller fetched: completed on that caller's thread
            submit.run();
            onThread("blocking-caller", () -> {
                complete.run();
                assertFalse(calls.onIoThread());
            });
            // the I/O thread's own completion
            submit.run();
            onThread("ratelimit-io-902", () -> {
                complete.run();
                assertTrue(calls.onIoThread());
            });
        } finally {
            calls.free();
        }
    }

    @Test
    void aCloseFromInsideACallGoesOnWithoutWaitingForItself() throws Exception {
        RateLimitClient c = RateLimitClient.connect(redis.url());
        Limiter lim = c.limiter("inside", HOT.lease(Duration.ofSeconds(1)));
        lim.acquire("k");
        // as a stage of a decision completed on a blocking caller's thread, inside its call
        assertTimeoutPreemptively(Duration.ofSeconds(10), () -> c.call(ptr -> {
            c.close();
            return null;
        }));
        assertTrue(c.isClosed());
        assertThrows(ClientClosedException.class, () -> lim.acquire("k"));
    }
}
