package io.ratelimit;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;

/**
 * A distributed mutual-exclusion lock with owner and fencing tokens.
 * Thread-safe. The asynchronous calls follow {@link Semaphore}'s rules
 * (threading, cancellation).
 */
public final class DistributedLock {
    private final RateLimitClient client;
    private final String name;
    private final byte[] nameBytes;
    private final Duration lease;

    DistributedLock(RateLimitClient client, String name, Duration lease) {
        this.client = client;
        this.name = name;
        this.nameBytes = Native.name("name", name);
        this.lease = Native.notNull("lease", lease);
    }

    /** Waits up to {@code timeout}; throws {@link AcquireTimeoutException} if the lock stayed taken. */
    public Lock acquire(Duration timeout) {
        return tryAcquire(timeout).orElseThrow(() -> timedOut(timeout));
    }

    private AcquireTimeoutException timedOut(Duration timeout) {
        return new AcquireTimeoutException(
                "lock '" + name + "' not acquired within " + timeout + " (held by another owner)");
    }

    /** The lock if it is free now. */
    public Optional<Lock> tryAcquire() {
        return tryAcquire(Duration.ZERO);
    }

    /** Waits up to {@code timeout}; an interrupt stops the wait with {@link CancelledException}. */
    public Optional<Lock> tryAcquire(Duration timeout) {
        if (VirtualThreads.current()) {
            // the I/O thread waits for this caller, parked on
            CompletableFuture<Optional<Lock>> f = tryAcquireAsync(timeout);
            return VirtualThreads.awaitWait(f, () -> client.handle.withdraw(f));
        }
        long timeoutMs = Native.millis("timeout", timeout);
        long leaseMs = Native.millis("lease", lease);
        ClientHandle h = client.handle;
        NativePermit p = client.call(ptr -> Native.semAcquire(ptr, h, true, nameBytes, 1, leaseMs, timeoutMs));
        return Optional.ofNullable(p).map(np -> new Lock(new Permit.Lease(client, true, name, nameBytes, np)));
    }

    /**
     * {@link #acquire(Duration)} without blocking: the future fails with
     * {@link AcquireTimeoutException} when the lock stayed taken for
     * {@code timeout}.
     */
    public CompletableFuture<Lock> acquireAsync(Duration timeout) {
        return Permit.Lease.acquireAsync(client, true, name, nameBytes, 1, lease, timeout, l -> {
            if (l == null) {
                throw timedOut(timeout);
            }
            return new Lock(l);
        });
    }

    /** {@link #tryAcquire()} without blocking: one try, empty if the lock is taken. */
    public CompletableFuture<Optional<Lock>> tryAcquireAsync() {
        return tryAcquireAsync(Duration.ZERO);
    }

    /**
     * {@link #tryAcquire(Duration)} without blocking: waits on the I/O thread;
     * empty if the lock stayed taken. Cancel the future to withdraw.
     */
    public CompletableFuture<Optional<Lock>> tryAcquireAsync(Duration timeout) {
        return Permit.Lease.acquireAsync(client, true, name, nameBytes, 1, lease, timeout,
                l -> Optional.ofNullable(l).map(Lock::new));
    }

    public String name() {
        return name;
    }

    public Duration lease() {
        return lease;
    }
}
