package io.ratelimit;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;

/**
 * A fair (FIFO) distributed counting semaphore. Permits expire after the
 * lease unless refreshed, so a crashed holder cannot block the others for
 * good. Thread-safe.
 *
 * <h2>Asynchronous calls</h2>
 * {@link #acquireAsync(Duration)}, {@link #tryAcquireAsync(Duration)},
 * {@link Permit#releaseAsync()}, {@link Permit#refreshAsync(Duration)} (and
 * the same on {@link DistributedLock}, {@link Lock} and {@link DelayQueue})
 * give the blocking calls' answers without blocking, and without holding
 * any thread while they wait: the client's I/O thread waits for every caller
 * (woken by the release or push through Redis pub/sub, keeping its place in
 * the semaphore's FIFO queue), as for {@link Limiter#acquireAsync(String, long)}.
 * <ul>
 * <li>They never throw: what the blocking call throws (same class, same
 * message) fails the future; a permit not acquired in time is an empty
 * {@code Optional}, or {@link AcquireTimeoutException} from
 * {@code acquireAsync}. {@link RateLimitClient#close()} fails every call in
 * flight with {@link ClientClosedException} before it returns.</li>
 * <li><b>Threading</b>: futures complete on the I/O thread, so dependent
 * stages added without an executor run on it: keep them short and never
 * block in them (see {@link Limiter}); pass an executor for anything
 * longer.</li>
 * <li><b>Cancelling</b> a waiting acquire or pop ({@code cancel(true)},
 * {@code orTimeout}, or completing it yourself) withdraws the wait: it
 * leaves the queue, and a permit granted or messages taken while the reply
 * was on its way are released or pushed back, so nothing is held for a
 * future nobody reads. Cancel the future these methods return: a dependent
 * stage's cancellation does not reach it. Cancelling a release, refresh or
 * push only stops waiting for its answer.</li>
 * <li>A permit acquired asynchronously is an ordinary {@link Permit}:
 * {@code release()}, {@code releaseAsync()} and {@code close()} all work,
 * once.</li>
 * </ul>
 */
public final class Semaphore {
    private final RateLimitClient client;
    private final String name;
    private final byte[] nameBytes;
    private final long permits;
    private final Duration lease;

    Semaphore(RateLimitClient client, String name, long permits, Duration lease) {
        this.client = client;
        this.name = name;
        this.nameBytes = Native.name("name", name);
        this.permits = permits;
        this.lease = Native.notNull("lease", lease);
    }

    /** Waits up to {@code timeout} for a permit; throws {@link AcquireTimeoutException} if none came. */
    public Permit acquire(Duration timeout) {
        return tryAcquire(timeout).orElseThrow(() -> timedOut(timeout));
    }

    private AcquireTimeoutException timedOut(Duration timeout) {
        return new AcquireTimeoutException(
                "semaphore '" + name + "': no permit within " + timeout + " (all " + permits + " taken)");
    }

    /** A permit if one is free now. */
    public Optional<Permit> tryAcquire() {
        return tryAcquire(Duration.ZERO);
    }

    /**
     * Waits up to {@code timeout}, queued fairly behind earlier waiters. An
     * interrupt stops the wait promptly with {@link CancelledException}
     * (the thread keeps its interrupt flag).
     */
    public Optional<Permit> tryAcquire(Duration timeout) {
        if (VirtualThreads.current()) {
            // the I/O thread waits in the queue for this caller, parked on
            CompletableFuture<Optional<Permit>> f = tryAcquireAsync(timeout);
            return VirtualThreads.awaitWait(f, () -> client.handle.withdraw(f));
        }
        long timeoutMs = Native.millis("timeout", timeout);
        long leaseMs = Native.millis("lease", lease);
        ClientHandle h = client.handle;
        NativePermit p = client.call(
                ptr -> Native.semAcquire(ptr, h, false, nameBytes, permits, leaseMs, timeoutMs));
        return Optional.ofNullable(p).map(np -> new Permit(client, false, name, nameBytes, np));
    }

    /**
     * {@link #acquire(Duration)} without blocking: the future fails with
     * {@link AcquireTimeoutException} when no permit came within
     * {@code timeout} (see the class comment).
     */
    public CompletableFuture<Permit> acquireAsync(Duration timeout) {
        return Permit.Lease.acquireAsync(client, false, name, nameBytes, permits, lease, timeout, l -> {
            if (l == null) {
                throw timedOut(timeout);
            }
            return new Permit(l);
        });
    }

    /** {@link #tryAcquire()} without blocking: one try, empty if no permit is free. */
    public CompletableFuture<Optional<Permit>> tryAcquireAsync() {
        return tryAcquireAsync(Duration.ZERO);
    }

    /**
     * {@link #tryAcquire(Duration)} without blocking: waits on the I/O
     * thread, queued fairly behind earlier waiters (blocking or not); empty
     * if none came within {@code timeout}. Cancel the future to withdraw.
     */
    public CompletableFuture<Optional<Permit>> tryAcquireAsync(Duration timeout) {
        return Permit.Lease.acquireAsync(client, false, name, nameBytes, permits, lease, timeout,
                l -> Optional.ofNullable(l).map(Permit::new));
    }

    /** Permits free right now. */
    public long available() {
        if (permits > 0 && VirtualThreads.current()) { // 0 would ask for the holders: the core's range check must say no
            return info(permits);
        }
        return client.call(ptr -> Native.semAvailable(ptr, nameBytes, permits));
    }

    /** Live holders right now. */
    public long holders() {
        if (VirtualThreads.current()) {
            return info(0);
        }
        return client.call(ptr -> Native.semHolders(ptr, nameBytes));
    }

    /** rl_submit_semaphore_info on a virtual thread, parked on: the permits available of max, or the holders (0). */
    private long info(long max) {
        return VirtualThreads.await(client.submitOp(new AsyncOp<>(client, false, d -> d.value, d -> {}),
                (ptr, context, tag) -> Native.semInfoAsync(ptr, context, tag, nameBytes, max)));
    }

    public String name() {
        return name;
    }

    public long permits() {
        return permits;
    }

    public Duration lease() {
        return lease;
    }
}
