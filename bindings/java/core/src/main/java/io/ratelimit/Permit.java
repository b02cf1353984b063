package io.ratelimit;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicBoolean;

/** A held semaphore permit; {@link #close()} releases it (once). */
public final class Permit implements AutoCloseable {
    private final Lease lease;

    Permit(RateLimitClient client, boolean lock, String name, byte[] nameBytes, NativePermit permit) {
        this.lease = new Lease(client, lock, name, nameBytes, permit);
    }

    /** Unique permit id. */
    public String id() {
        return lease.permit.id;
    }

    /** Strictly increasing per semaphore name: pass it to the guarded resource. */
    public long fencingToken() {
        return lease.permit.fencingToken;
    }

    /** Extends the lease to {@code lease} from now; false if the permit already expired. */
    public boolean refresh(Duration lease) {
        return this.lease.refresh(lease);
    }

    /** Gives the permit back; false if it had already expired or been released. */
    public boolean release() {
        return lease.release();
    }

    @Override
    public void close() {
        lease.release();
    }

    @Override
    public String toString() {
        return "Permit{" + lease.name + ", id=" + id() + ", fencingToken=" + fencingToken() + "}";
    }

    /** What a permit and a lock handle share: release once, refresh by id. */
    static final class Lease {
        final RateLimitClient client;
        final boolean lock;
        final String name;
        final byte[] nameBytes;
        final NativePermit permit;
        private final AtomicBoolean released = new AtomicBoolean();

        Lease(RateLimitClient client, boolean lock, String name, byte[] nameBytes, NativePermit permit) {
            this.client = client;
            this.lock = lock;
            this.name = name;
            this.nameBytes = nameBytes;
            this.permit = permit;
        }

        boolean refresh(Duration lease) {
            long ms = Native.millis("lease", lease);
            byte[] id = Native.bytes(permit.id);
            return client.call(ptr -> Native.semRefresh(ptr, lock, nameBytes, id, ms));
        }

        boolean release() {
            if (!released.compareAndSet(false, true)) {
                return false;
            }
            byte[] id = Native.bytes(permit.id);
            return client.call(ptr -> Native.semRelease(ptr, lock, nameBytes, id));
        }
    }
}
