package io.ratelimit;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;

/**
 * A held {@link DistributedLock}; {@link #close()} releases it (once).
 * Acquired blocking or asynchronously, either release works.
 */
public final class Lock implements AutoCloseable {
    private final Permit.Lease lease;

    Lock(Permit.Lease lease) {
        this.lease = lease;
    }

    /** The owner token. */
    public String token() {
        return lease.permit.id;
    }

    /** Strictly increasing per lock name: pass it to the guarded resource. */
    public long fencingToken() {
        return lease.permit.fencingToken;
    }

    /** Extends the lease to {@code lease} from now; false if the lock was lost (expired). */
    public boolean extend(Duration lease) {
        return this.lease.refresh(lease);
    }

    /** {@link #extend} without blocking. */
    public CompletableFuture<Boolean> extendAsync(Duration lease) {
        return this.lease.refreshAsync(lease);
    }

    /** {@link #release} without blocking; false at once when released already (by either call). */
    public CompletableFuture<Boolean> releaseAsync() {
        return lease.releaseAsync();
    }

    /** Releases the lock; false if it had already expired or been released. */
    public boolean release() {
        return lease.release();
    }

    @Override
    public void close() {
        lease.release();
    }

    @Override
    public String toString() {
        return "Lock{" + lease.name + ", fencingToken=" + fencingToken() + "}";
    }
}
