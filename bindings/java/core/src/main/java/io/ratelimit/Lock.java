package io.ratelimit;

import java.time.Duration;

/** A held {@link DistributedLock}; {@link #close()} releases it (once). */
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
