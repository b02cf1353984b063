package io.ratelimit;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.ReentrantReadWriteLock;

/**
 * Owns the native rl_client pointer. Calls hold the read side of a lock for
 * as long as C may use the pointer; close takes the write side, so the client
 * is never freed under a call in flight. Blocking waits poll
 * {@link #cancelRequested()}, so a close does not wait for their timeouts.
 * Deliberately separate from {@link RateLimitClient}: the Cleaner runs this
 * object, which must not reach the client it cleans up after.
 *
 * <p>Calls take the read side with {@code tryLock}: only a close ever holds
 * the write side, and {@link #closing} is set before it is taken, so a failed
 * {@code tryLock} means "closing" and the call fails with {@link Status#CLOSED}
 * instead of queueing behind the writer. That is what keeps a close from
 * deadlocking with a dependent stage that calls again on the I/O thread: the
 * closer waits (in rl_client_close) for that thread, which must never wait
 * for the closer.
 */
final class ClientHandle implements Runnable {
    private final long ptr;
    private final ReentrantReadWriteLock lock = new ReentrantReadWriteLock();
    private final AtomicBoolean closing = new AtomicBoolean();
    final AsyncCalls async;

    interface Call<T> {
        T run(long ptr);
    }

    /** Submits one asynchronous call under {@code tag}; {@code context} is the callback's (AsyncCalls.ref). */
    interface Submit {
        void run(long ptr, long context, long tag);
    }

    ClientHandle(long ptr) {
        this.ptr = ptr;
        this.async = new AsyncCalls();
    }

    <T> T call(Call<T> call) {
        ReentrantReadWriteLock.ReadLock read = lock.readLock();
        if (closing.get() || !read.tryLock()) {
            throw closed(null);
        }
        try {
            if (closing.get()) {
                throw closed(null);
            }
            return call.run(ptr);
        } catch (CancelledException e) {
            // the wait stopped because of close(), not an interrupt
            if (closing.get()) {
                throw closed(e);
            }
            throw e;
        } finally {
            read.unlock();
        }
    }

    /** The parameters of one decision, as the core's rl_request has them. */
    static final class Decision {
        byte[] name;
        byte[] id;
        /** LimiterConfig.toNative(), or null for the stored spec. */
        long[] spec;
        long permits;
        int op;
        long maxWaitMs;
        long nowMs;
        long leaseMs;
    }

    /**
     * Submits one decision without waiting; never blocks and never throws: a
     * request the core refuses (invalid, or the client closing) gives a future
     * that failed already, with the exception the blocking call would throw.
     * {@code owner} (the RateLimitClient) stays reachable until completion.
     */
    CompletableFuture<Result> submit(Object owner, Decision d) {
        AsyncCalls.Pending future = new AsyncCalls.Pending(owner);
        RuntimeException failure = submitTagged(future, (ptr, context, tag) -> Native.submit(ptr, context, tag,
                d.name, d.id, d.spec, d.permits, d.op, d.maxWaitMs, d.nowMs, d.leaseMs));
        if (failure != null) {
            // nobody holds this future yet: no dependent stage runs here
            future.completeExceptionally(failure);
        }
        return future;
    }

    /** A semaphore, lock or queue call, as {@link #submit}: never blocks, never throws. */
    <T> CompletableFuture<T> submitOp(AsyncOp<T> op, Submit s) {
        RuntimeException failure = submitTagged(op, s);
        if (failure != null) {
            op.fail(failure); // not a withdrawal: nothing was queued
        }
        return op;
    }

    /** Registers {@code future} under a new tag and submits; the failure, or null when queued. */
    private RuntimeException submitTagged(CompletableFuture<?> future, Submit s) {
        ReentrantReadWriteLock.ReadLock read = lock.readLock();
        if (closing.get() || !read.tryLock()) {
            return closed(null);
        }
        try {
            if (closing.get()) {
                return closed(null);
            }
            long tag = async.register(future);
            try {
                s.run(ptr, async.ref, tag);
                return null;
            } catch (RuntimeException e) {
                async.forget(tag); // refused: no completion follows
                return e;
            }
        } finally {
            read.unlock();
        }
    }

    /**
     * Withdraws the wait under {@code tag} (rl_cancel): it completes with
     * CANCELLED holding nothing. Never blocks. Skipped while the client
     * closes, which completes every wait with CLOSED anyway.
     */
    void cancelWait(long tag) {
        if (!async.isPending(tag)) {
            return; // completed: AsyncOp gives back what it held
        }
        ReentrantReadWriteLock.ReadLock read = lock.readLock();
        if (closing.get() || !read.tryLock()) {
            return;
        }
        try {
            if (!closing.get()) {
                Native.cancel(ptr, tag);
            }
        } catch (RuntimeException e) {
            // no memory for the request: the wait runs to its timeout and its
            // completion, finding the future done, gives back what it got
        } finally {
            read.unlock();
        }
    }

    /**
     * Gives back what a completion nobody takes holds (release a permit, push
     * a message back), without waiting for it. Only from a completion on the
     * I/O thread: the pointer stays valid without the lock there, since
     * rl_client_close joins that thread before it frees the client, and a
     * give-back must be sent even while the close is starting. Refused once
     * the core closes: a permit then ends with its lease.
     */
    void giveBack(Submit s) {
        try {
            s.run(ptr, async.ref, async.untrackedTag());
        } catch (RuntimeException e) {
            // closing (or no memory): nothing more can be done from here
        }
    }

    /** Polled from C during blocking waits, on the waiting thread. */
    boolean cancelRequested() {
        return closing.get() || Thread.currentThread().isInterrupted();
    }

    boolean isClosed() {
        return closing.get();
    }

    /**
     * Close, at most once; waits for calls in flight (blocking ones stop within
     * ~100 ms) and completes every asynchronous decision still in flight with
     * {@link Status#CLOSED} before it returns. Called on this client's own I/O
     * thread (from a dependent stage), or from inside a call of this client
     * (a dependent stage of a decision that waited for the block this thread
     * was fetching), the close runs on a new thread instead and this returns
     * at once: neither can wait for itself.
     */
    @Override
    public void run() {
        if (!closing.compareAndSet(false, true)) {
            return;
        }
        if (async.onIoThread() || lock.getReadHoldCount() > 0) {
            Thread t = new Thread(this::closeNow, "ratelimit-close");
            t.setDaemon(true);
            t.start();
            return;
        }
        closeNow();
    }

    private void closeNow() {
        ReentrantReadWriteLock.WriteLock write = lock.writeLock();
        write.lock();
        try {
            // completes everything in flight (RL_ERR_CLOSED) on the I/O thread,
            // whose dependents find the client closing and never wait for this
            // lock; then joins the thread, which detaches it from the JVM
            Native.close(ptr);
        } finally {
            write.unlock();
        }
        // no callback runs any more: fail what the core could not deliver
        // (nothing, normally), outside the lock, then drop the JNI reference
        async.failRemaining();
        async.free();
    }

    static ClientClosedException closed(Throwable cause) {
        return new ClientClosedException("client is closed", cause);
    }
}
