package io.ratelimit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.params.provider.ValueSource;

/** Smoke tests through redis+sentinel:// and redis+cluster:// against the servers of tests/topology. */
@ExtendWith(Topology.Extension.class)
class SentinelClusterTest {
    static final String[] TOPOLOGIES = {Topology.SENTINEL, Topology.CLUSTER};
    static final String PREFIX = "jtopo-" + UUID.randomUUID();
    static Topology topo;
    static final List<RateLimitClient> clients = new ArrayList<>();

    @BeforeAll
    static void servers(Topology topology) {
        topo = topology.require(TOPOLOGIES);
        for (String t : TOPOLOGIES) {
            clients.add(RateLimitClient.connect(topo.url(t),
                    ClientOptions.defaults().prefix(PREFIX).timeout(Duration.ofSeconds(2))));
        }
    }

    @AfterAll
    static void close() {
        clients.forEach(RateLimitClient::close);
    }

    @Test
    void aSentinelThatRequiresAUser() {
        String url = topo.sentinelAclUrl();
        ClientOptions raise = ClientOptions.defaults().prefix(PREFIX).onRedisError(OnRedisError.RAISE);
        try (RateLimitClient c = RateLimitClient.connect(url, raise)) {
            assertTrue(c.limiter("acl-" + UUID.randomUUID(), "5/s", Algorithm.GCRA).acquire("u").allowed());
        }
        String password = url.replaceAll(".*sentinel_password=", "");
        for (String bad : new String[] {url.replaceAll("sentinel_username=[^&]*&", ""),
                url.replaceAll("sentinel_username=[^&]*&", "sentinel_username=nobody&")}) {
            ConnectionException e = assertThrows(ConnectionException.class, () -> RateLimitClient.connect(bad, raise));
            assertTrue(e.getMessage().contains("WRONGPASS"), e.getMessage());
            assertFalse(e.getMessage().contains(password), e.getMessage());
        }
    }

    private static RateLimitClient client(String topology) {
        return clients.get(List.of(TOPOLOGIES).indexOf(topology));
    }

    static Stream<Arguments> topologiesAndAlgorithms() {
        return Stream.of(TOPOLOGIES).flatMap(t -> Stream.of(Algorithm.values()).map(a -> Arguments.of(t, a)));
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("topologiesAndAlgorithms")
    void eightThreadsOnOneKeyAdmitExactlyTheLimit(String topology, Algorithm algorithm) throws Exception {
        int limit = 20;
        int threads = 8;
        Limiter lim = client(topology).limiter("hot-" + UUID.randomUUID(), Rate.of(limit, Duration.ofDays(1)),
                algorithm);
        AtomicInteger admitted = new AtomicInteger();
        AtomicInteger denied = new AtomicInteger();
        ConcurrencyTest.runThreads(threads, i -> {
            for (int n = 0; n < 5; n++) {
                Result r = lim.acquire("one-key");
                assertFalse(r.fallback(), r.toString());
                (r.allowed() ? admitted : denied).incrementAndGet();
            }
        });
        assertEquals(limit, admitted.get());
        assertEquals(threads * 5 - limit, denied.get());
    }

    @ParameterizedTest
    @ValueSource(strings = {Topology.SENTINEL, Topology.CLUSTER})
    void batchesOverManyKeys(String topology) {
        // in a cluster the ids hash to slots on every master: one call, one pipeline per node
        Limiter lim = client(topology).limiter("many-" + UUID.randomUUID(), "2/hour", Algorithm.SLIDING_WINDOW);
        List<String> ids = new ArrayList<>();
        for (int i = 0; i < 60; i++) {
            ids.add("id-" + i);
        }
        for (int round = 0; round < 3; round++) {
            List<Result> rs = lim.acquireMany(ids, 1);
            assertEquals(ids.size(), rs.size());
            for (Result r : rs) {
                assertEquals(round < 2, r.allowed(), "round " + round + ": " + r);
                assertFalse(r.fallback());
            }
        }
        assertTrue(lim.key("id-1").contains("{"), "a hash-tagged key: " + lim.key("id-1"));
    }

    @ParameterizedTest
    @ValueSource(strings = {Topology.SENTINEL, Topology.CLUSTER})
    void semaphoreAcquireAndRelease(String topology) throws Exception {
        Semaphore sem = client(topology).semaphore("sem-" + UUID.randomUUID(), 2, Duration.ofSeconds(30));
        Permit a = sem.acquire(Duration.ofSeconds(2));
        Permit b = sem.acquire(Duration.ofSeconds(2));
        assertTrue(b.fencingToken() > a.fencingToken());
        assertEquals(2, sem.holders());
        assertEquals(0, sem.available());
        assertFalse(sem.tryAcquire().isPresent());
        assertTrue(a.release());
        assertFalse(a.release(), "released twice");
        assertEquals(1, sem.available());
        // a waiter is woken by a release (pub/sub, sharded in a cluster)
        AtomicInteger got = new AtomicInteger();
        Thread waiter = new Thread(() -> sem.tryAcquire(Duration.ofSeconds(10)).ifPresent(p -> {
            got.incrementAndGet();
            p.release();
        }));
        Permit c = sem.acquire(Duration.ofSeconds(2));
        waiter.start();
        Thread.sleep(100);
        long t0 = System.nanoTime();
        assertTrue(c.release());
        waiter.join(10_000);
        assertEquals(1, got.get());
        assertTrue(System.nanoTime() - t0 < 5_000_000_000L);
        assertTrue(b.release());
        assertEquals(0, sem.holders());
    }

    @ParameterizedTest
    @ValueSource(strings = {Topology.SENTINEL, Topology.CLUSTER})
    void lockAcquireAndRelease(String topology) {
        DistributedLock lock = client(topology).lock("lock-" + UUID.randomUUID(), Duration.ofSeconds(30));
        Lock held = lock.acquire(Duration.ofSeconds(2));
        assertFalse(lock.tryAcquire().isPresent(), "the lock is held");
        assertTrue(held.extend(Duration.ofSeconds(30)));
        assertTrue(held.release());
        Optional<Lock> again = lock.tryAcquire();
        assertTrue(again.isPresent());
        assertTrue(again.get().fencingToken() > held.fencingToken());
        assertTrue(again.get().release());
    }

    @ParameterizedTest
    @ValueSource(strings = {Topology.SENTINEL, Topology.CLUSTER})
    void delayQueuePushAndPop(String topology) {
        DelayQueue q = client(topology).delayQueue("q-" + UUID.randomUUID());
        assertTrue(q.push("m1", Duration.ZERO));
        assertTrue(q.push("m2", Duration.ofMillis(200)));
        assertEquals(2, q.size());
        List<String> got = new ArrayList<>(q.popReady(10));
        assertEquals(List.of("m1"), got);
        List<String> later = q.pop(10, Duration.ofSeconds(5));
        assertEquals(List.of("m2"), later);
        assertEquals(0, q.size());
    }
}
