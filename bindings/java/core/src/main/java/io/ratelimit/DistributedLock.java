package io.ratelimit;

import java.time.Duration;
import java.util.Optional;

/** A distributed mutual-exclusion lock with owner and fencing tokens. Thread-safe. */
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
        return tryAcquire(timeout).orElseThrow(() -> new AcquireTimeoutException(
                "lock '" + name + "' not acquired within " + timeout + " (held by another owner)"));
    }

    /** The lock if it is free now. */
    public Optional<Lock> tryAcquire() {
        return tryAcquire(Duration.ZERO);
    }

    /** Waits up to {@code timeout}; an interrupt stops the wait with {@link CancelledException}. */
    public Optional<Lock> tryAcquire(Duration timeout) {
        long timeoutMs = Native.millis("timeout", timeout);
        long leaseMs = Native.millis("lease", lease);
        ClientHandle h = client.handle;
        NativePermit p = client.call(ptr -> Native.semAcquire(ptr, h, true, nameBytes, 1, leaseMs, timeoutMs));
        return Optional.ofNullable(p).map(np -> new Lock(new Permit.Lease(client, true, name, nameBytes, np)));
    }

    public String name() {
        return name;
    }

    public Duration lease() {
        return lease;
    }
}
