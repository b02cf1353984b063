package io.ratelimit;

import java.time.Duration;
import java.util.Optional;

/**
 * A fair (FIFO) distributed counting semaphore. Permits expire after the
 * lease unless refreshed, so a crashed holder cannot block the others for
 * good. Thread-safe.
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
        return tryAcquire(timeout).orElseThrow(() -> new AcquireTimeoutException(
                "semaphore '" + name + "': no permit within " + timeout + " (all " + permits + " taken)"));
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
        long timeoutMs = Native.millis("timeout", timeout);
        long leaseMs = Native.millis("lease", lease);
        ClientHandle h = client.handle;
        NativePermit p = client.call(
                ptr -> Native.semAcquire(ptr, h, false, nameBytes, permits, leaseMs, timeoutMs));
        return Optional.ofNullable(p).map(np -> new Permit(client, false, name, nameBytes, np));
    }

    /** Permits free right now. */
    public long available() {
        return client.call(ptr -> Native.semAvailable(ptr, nameBytes, permits));
    }

    /** Live holders right now. */
    public long holders() {
        return client.call(ptr -> Native.semHolders(ptr, nameBytes));
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
