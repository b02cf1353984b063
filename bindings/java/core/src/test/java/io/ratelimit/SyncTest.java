package io.ratelimit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** Semaphore, lock and delay queue through the Java API. */
class SyncTest extends RedisTestBase {

    @Test
    void semaphoreCountsPermits() throws Exception {
        Semaphore sem = client.semaphore("db", 2, Duration.ofSeconds(30));
        assertEquals(2, sem.available());
        Permit a = sem.acquire(Duration.ofSeconds(1));
        Permit b = sem.tryAcquire().orElseThrow();
        assertNotEquals(a.id(), b.id());
        assertTrue(b.fencingToken() > a.fencingToken());
        assertEquals(0, sem.available());
        assertEquals(2, sem.holders());
        assertTrue(sem.tryAcquire().isEmpty());

        long start = System.nanoTime();
        RateLimitException busy = assertThrows(AcquireTimeoutException.class,
                () -> sem.acquire(Duration.ofMillis(300)));
        // busy is "not acquired", never "Redis failed": an outage handler must not catch it
        assertTrue(busy instanceof NotAcquiredException, busy.toString());
        assertFalse(busy instanceof RedisFailureException || busy instanceof TimeoutException, busy.toString());
        assertEquals(Status.ACQUIRE_TIMEOUT, busy.status());
        assertTrue(busy.getMessage().contains("PT0.3S"), busy.getMessage());
        long ms = (System.nanoTime() - start) / 1_000_000;
        assertTrue(ms >= 250 && ms < 2000, "timed out after " + ms + " ms");

        assertTrue(a.refresh(Duration.ofSeconds(60)));
        a.close();
        assertFalse(a.release(), "released once only");
        assertFalse(a.refresh(Duration.ofSeconds(1)), "a released permit cannot be refreshed");
        assertEquals(1, sem.available());
        try (Permit c = sem.acquire(Duration.ofSeconds(1))) {
            assertTrue(c.fencingToken() > b.fencingToken());
        }
        b.close();
        assertEquals(0, sem.holders());
    }

    @Test
    void waiterIsWokenWhenAPermitIsReleased() throws Exception {
        Semaphore sem = client.semaphore("wake", 1, Duration.ofSeconds(30));
        Permit held = sem.acquire(Duration.ofSeconds(1));
        CompletableFuture<Permit> waiter = CompletableFuture.supplyAsync(() -> sem.acquire(Duration.ofSeconds(10)));
        Thread.sleep(300);
        assertFalse(waiter.isDone());
        long released = System.nanoTime();
        held.close();
        Permit got = waiter.get(5, TimeUnit.SECONDS);
        long ms = (System.nanoTime() - released) / 1_000_000;
        assertTrue(ms < 900, "woken after " + ms + " ms (should be a pub/sub wake-up, not a poll)");
        got.close();
    }

    @Test
    void expiredLeaseFreesThePermit() throws Exception {
        Semaphore sem = client.semaphore("lease", 1, Duration.ofMillis(200));
        Permit p = sem.acquire(Duration.ofSeconds(1));
        Permit next = sem.acquire(Duration.ofSeconds(3)); // granted once the first lease runs out
        assertFalse(p.refresh(Duration.ofSeconds(1)));
        next.close();
    }

    @Test
    void lockIsExclusiveWithFencingTokens() throws Exception {
        DistributedLock lock = client.lock("nightly-job", Duration.ofSeconds(10));
        Lock first = lock.acquire(Duration.ofSeconds(1));
        assertEquals(32, first.token().length());
        Optional<Lock> second = lock.tryAcquire();
        assertTrue(second.isEmpty());
        RateLimitException busy = assertThrows(AcquireTimeoutException.class,
                () -> lock.acquire(Duration.ofMillis(200)));
        assertFalse(busy instanceof RedisFailureException, busy.toString());
        assertTrue(first.extend(Duration.ofSeconds(20)));
        long token = first.fencingToken();
        first.close();
        assertFalse(first.extend(Duration.ofSeconds(1)));
        try (Lock again = lock.acquire(Duration.ofSeconds(1))) {
            assertTrue(again.fencingToken() > token);
        }
        // a lock and a semaphore of the same name are different things
        try (Lock l = lock.acquire(Duration.ofSeconds(1));
                Permit p = client.semaphore("nightly-job", 1, Duration.ofSeconds(5)).acquire(Duration.ofSeconds(1))) {
            assertTrue(l.fencingToken() > 0 && p.fencingToken() > 0);
        }
    }

    @Test
    void lockLeaseExpires() throws Exception {
        DistributedLock lock = client.lock("short", Duration.ofMillis(150));
        Lock first = lock.acquire(Duration.ofSeconds(1));
        Lock second = lock.acquire(Duration.ofSeconds(3));
        assertTrue(second.fencingToken() > first.fencingToken());
        assertFalse(first.release(), "the expired owner no longer holds it");
        assertTrue(second.release());
    }

    @Test
    void delayQueueDeliversWhenDue() throws Exception {
        DelayQueue q = client.delayQueue("jobs");
        assertTrue(q.push("now-1", Duration.ZERO));
        assertTrue(q.push("now-2", Duration.ZERO));
        assertFalse(q.push("now-1", Duration.ZERO), "already queued");
        assertTrue(q.push("later", Duration.ofMillis(400)));
        assertEquals(3, q.size());
        List<String> ready = q.popReady(10);
        assertEquals(List.of("now-1", "now-2"), ready.stream().sorted().toList());
        assertTrue(q.popReady(10).isEmpty());

        long start = System.nanoTime();
        List<String> later = q.pop(10, Duration.ofSeconds(5));
        long ms = (System.nanoTime() - start) / 1_000_000;
        assertEquals(List.of("later"), later);
        assertTrue(ms >= 250 && ms < 2000, "delivered after " + ms + " ms");
        assertEquals(0, q.size());

        start = System.nanoTime();
        assertTrue(q.pop(5, Duration.ofMillis(300)).isEmpty());
        assertTrue((System.nanoTime() - start) / 1_000_000 >= 250);
    }

    @Test
    void pushWakesABlockedConsumer() throws Exception {
        DelayQueue q = client.delayQueue("wake");
        CompletableFuture<List<String>> consumer = CompletableFuture.supplyAsync(() -> q.pop(1, Duration.ofSeconds(10)));
        Thread.sleep(300);
        assertFalse(consumer.isDone());
        q.push("hello", Duration.ZERO);
        assertEquals(List.of("hello"), consumer.get(2, TimeUnit.SECONDS));
    }

    @Test
    void delayQueueMessagesKeepTheirBytes() {
        DelayQueue q = client.delayQueue("bytes");
        String odd = "a\0b – ünïcødé 😀";
        assertTrue(q.push(odd, Duration.ZERO));
        assertTrue(q.remove(odd));
        assertFalse(q.remove(odd));
        q.push(odd, Duration.ZERO);
        assertEquals(List.of(odd), q.popReady(1));
    }
}
