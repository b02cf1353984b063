package io.ratelimit;

import java.util.concurrent.CompletableFuture;

/**
 * Owns the native rl_client pointer. {@link #shutdown} (the client's close)
 * shuts it down in the core, rl_client_shutdown: every later call fails there
 * with {@link Status#CLOSED}, blocking waits stop, and when the last call in
 * flight returns the I/O thread stops (asynchronous calls complete with
 * CLOSED). The memory stays until the Cleaner runs this object (no thread can
 * hold the client any more), so calls pass the pointer without a lock.
 * Deliberately separate from {@link RateLimitClient}: the Cleaner runs this
 * object, which must not reach the client it cleans up after.
 */
final class ClientHandle implements Runnable {
    private final long ptr;
    private volatile boolean closed;
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
        return call.run(ptr);
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
        /** An acquire's timeout (a timed acquire, which a cancel withdraws); 0: one decision. */
        long timeoutMs;
    }

    /**
     * Submits one decision without waiting; never blocks and never throws: a
     * request the core refuses (invalid, or the client closing) gives a future
     * that failed already, with the exception the blocking call would throw.
     * {@code owner} (the RateLimitClient) stays reachable until completion.
     */
    CompletableFuture<Result> submit(Object owner, Decision d) {
        AsyncCalls.Pending future = d.timeoutMs != 0 ? new AsyncCalls.Waiting(owner, this)
                : new AsyncCalls.Pending(owner);
        RuntimeException failure = submitTagged(future, (ptr, context, tag) -> Native.submit(ptr, context, tag,
                d.name, d.id, d.spec, d.permits, d.op, d.maxWaitMs, d.nowMs, d.leaseMs, d.timeoutMs));
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
        long tag = async.register(future);
        try {
            s.run(ptr, async.ref, tag);
            return null;
        } catch (RuntimeException e) {
            async.forget(tag); // refused: no completion follows
            return e;
        }
    }

    /**
     * Withdraws the wait under {@code tag} (rl_cancel): it completes with
     * CANCELLED holding nothing. Never blocks. A no-op once the client shut
     * down, which completes every wait with CLOSED anyway.
     */
    void cancelWait(long tag) {
        if (!async.isPending(tag)) {
            return; // completed: AsyncOp gives back what it held
        }
        try {
            Native.cancel(ptr, tag);
        } catch (RuntimeException e) {
            // no memory for the request: the wait runs to its timeout and its
            // completion, finding the future done, gives back what it got
        }
    }

    /**
     * Gives back what a completion nobody takes holds (release a permit, push
     * a message back), without waiting for it. Refused once the client shut
     * down: a permit then ends with its lease.
     */
    void giveBack(Submit s) {
        try {
            s.run(ptr, async.ref, async.untrackedTag());
        } catch (RuntimeException e) {
            // closing (or no memory): nothing more can be done from here
        }
    }

    /**
     * Withdraws the wait behind a future {@link #submit} or {@link #submitOp}
     * returned without completing it (a virtual thread interrupted in a
     * blocking call): the core's completion then says how the wait ended.
     */
    void withdraw(CompletableFuture<?> future) {
        if (future instanceof AsyncOp) {
            cancelWait(((AsyncOp<?>) future).tag);
        } else if (future instanceof AsyncCalls.Waiting) {
            cancelWait(((AsyncCalls.Waiting) future).tag);
        }
    }

    /** Polled from C during blocking waits, on the waiting thread (a close stops them in the core). */
    boolean cancelRequested() {
        return Thread.currentThread().isInterrupted();
    }

    boolean isClosed() {
        return closed;
    }

    /**
     * The client's close, at most once: rl_client_shutdown, which never waits
     * for the calls in flight, so any thread may call it (a dependent stage
     * on the I/O thread, a call of this client's), and which completes every
     * asynchronous call with {@link Status#CLOSED} before it returns when no
     * blocking call is in flight (else when the last one returns).
     */
    void shutdown() {
        if (!closed) {
            closed = true;
            Native.shutdown(ptr);
        }
    }

    /** The Cleaner's: no thread holds the client, so no call is in flight. */
    @Override
    public void run() {
        Native.close(ptr); // joins the I/O thread, which detaches it from the JVM
        // no callback runs any more: fail what the core could not deliver
        // (nothing, normally), then drop the JNI reference
        async.failRemaining();
        async.free();
    }

    static ClientClosedException closed(Throwable cause) {
        return new ClientClosedException("client is closed", cause);
    }
}
