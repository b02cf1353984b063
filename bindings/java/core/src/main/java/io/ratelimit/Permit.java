package io.ratelimit;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Function;

/**
 * A held semaphore permit; {@link #close()} releases it (once). Acquired
 * blocking or asynchronously, it is the same permit: either release works.
 */
public final class Permit implements AutoCloseable {
    private final Lease lease;

    Permit(RateLimitClient client, boolean lock, String name, byte[] nameBytes, NativePermit permit) {
        this(new Lease(client, lock, name, nameBytes, permit));
    }

    Permit(Lease lease) {
        this.lease = lease;
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

    /** {@link #refresh} without blocking (see {@link Semaphore#tryAcquireAsync(Duration)} for the threading rule). */
    public CompletableFuture<Boolean> refreshAsync(Duration lease) {
        return this.lease.refreshAsync(lease);
    }

    /** Gives the permit back; false if it had already expired or been released. */
    public boolean release() {
        return lease.release();
    }

    /**
     * {@link #release} without blocking; false at once when this permit was
     * released already (by either call). Cancelling the future does not stop
     * the release.
     */
    public CompletableFuture<Boolean> releaseAsync() {
        return lease.releaseAsync();
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
            if (VirtualThreads.current()) {
                return VirtualThreads.await(refreshAsync(lease));
            }
            long ms = Native.millis("lease", lease);
            byte[] id = Native.bytes(permit.id);
            return client.call(ptr -> Native.semRefresh(ptr, lock, nameBytes, id, ms));
        }

        boolean release() {
            if (VirtualThreads.current()) {
                return VirtualThreads.await(releaseAsync()); // released at most once there too
            }
            if (!released.compareAndSet(false, true)) {
                return false;
            }
            byte[] id = Native.bytes(permit.id);
            return client.call(ptr -> Native.semRelease(ptr, lock, nameBytes, id));
        }

        CompletableFuture<Boolean> refreshAsync(Duration lease) {
            long ms;
            try {
                ms = Native.millis("lease", lease);
            } catch (RateLimitException e) {
                return CompletableFuture.failedFuture(e);
            }
            byte[] id = Native.bytes(permit.id);
            return client.submitOp(AsyncOp.flag(client),
                    (ptr, context, tag) -> Native.semRefreshAsync(ptr, context, tag, lock, nameBytes, id, ms));
        }

        CompletableFuture<Boolean> releaseAsync() {
            if (!released.compareAndSet(false, true)) {
                return CompletableFuture.completedFuture(false);
            }
            byte[] id = Native.bytes(permit.id);
            return client.submitOp(AsyncOp.flag(client),
                    (ptr, context, tag) -> Native.semReleaseAsync(ptr, context, tag, lock, nameBytes, id));
        }

        /**
         * A semaphore or lock acquire waiting on the I/O thread (timeout 0:
         * one try); {@code outcome} turns the lease, or null when none was
         * granted, into the caller's value. A grant nobody takes (the future
         * was given up while it came) is released without waiting.
         */
        static <T> CompletableFuture<T> acquireAsync(RateLimitClient client, boolean lock, String name,
                byte[] nameBytes, long max, Duration lease, Duration timeout, Function<Lease, T> outcome) {
            long timeoutMs;
            long leaseMs;
            try {
                timeoutMs = Native.millis("timeout", timeout);
                leaseMs = Native.millis("lease", lease);
            } catch (RateLimitException e) {
                return CompletableFuture.failedFuture(e);
            }
            AsyncOp<T> op = new AsyncOp<>(client, true,
                    d -> outcome.apply(!d.acquired ? null
                            : new Lease(client, lock, name, nameBytes,
                                    new NativePermit(d.permitId, d.fencingToken, leaseMs))),
                    d -> client.handle.giveBack((ptr, context, tag) -> Native.semReleaseAsync(ptr, context, tag,
                            lock, nameBytes, Native.bytes(d.permitId))));
            return client.submitOp(op, (ptr, context, tag) -> Native.semAcquireAsync(ptr, context, tag, lock,
                    nameBytes, max, leaseMs, timeoutMs));
        }
    }
}
