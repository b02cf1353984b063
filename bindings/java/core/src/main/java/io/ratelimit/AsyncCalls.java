package io.ratelimit;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The asynchronous calls of one client: the futures in flight, decisions
 * ({@link Pending}) and semaphore, lock and queue calls ({@link AsyncOp}),
 * each under a tag, unique per call, that goes down to {@code rl_submit*}
 * (and {@code rl_cancel}) and comes back in the completion.
 *
 * <p>Why a map of tags and not a JNI global reference per future: nothing is
 * made or deleted in JNI per call (one global reference to this object per
 * client, deleted after the close); whatever the core might fail to complete
 * is still here when the client closes, and is failed then, so no future can
 * stay pending forever; and each entry keeps its {@link RateLimitClient}
 * strongly reachable while the call is in flight, so the Cleaner never
 * closes a client under a caller that only holds the future.
 *
 * <p>{@link #complete} and {@link #completeOp} run on the client's I/O thread
 * (called from C) and complete the future there, holding no lock: dependent
 * stages registered without an executor run on that thread.
 */
final class AsyncCalls {
    /** A future in flight; {@code owner} keeps the client reachable until it completes. */
    static class Pending extends CompletableFuture<Result> {
        @SuppressWarnings("unused") // held, never read: reachability only
        private final Object owner;
        /**
         * A decision from a lease completes on the thread that submitted it,
         * inside the submit: maybe another client's I/O thread, never this one's.
         */
        final Thread submitter = Thread.currentThread();

        Pending(Object owner) {
            this.owner = owner;
        }
    }

    /**
     * A timed acquire's future (rl_submit_acquire_wait): giving up on it
     * (cancel, orTimeout...) withdraws the wait, as for an {@link AsyncOp}.
     * The core's own completion finds its tag no longer pending: nothing to withdraw.
     */
    static final class Waiting extends Pending {
        private final ClientHandle handle;
        /** Set by {@link AsyncCalls#register} before the call is submitted. */
        volatile long tag;

        Waiting(Object owner, ClientHandle handle) {
            super(owner);
            this.handle = handle;
        }

        @Override
        public boolean cancel(boolean mayInterruptIfRunning) {
            return withdrawn(super.cancel(mayInterruptIfRunning));
        }

        @Override
        public boolean completeExceptionally(Throwable ex) {
            return withdrawn(super.completeExceptionally(ex));
        }

        @Override
        public boolean complete(Result value) {
            return withdrawn(super.complete(value));
        }

        private boolean withdrawn(boolean done) {
            if (done) {
                handle.cancelWait(tag);
            }
            return done;
        }
    }

    private final ConcurrentHashMap<Long, CompletableFuture<?>> pending = new ConcurrentHashMap<>();
    private final AtomicLong nextTag = new AtomicLong();
    /**
     * The client's I/O thread, known from its first completion there. Not
     * every completion runs on it: a decision from a lease completes on the
     * submitting thread, or on the thread whose fetch of a block it waited
     * for (a blocking caller's).
     */
    private volatile Thread ioThread;
    /** The name ratelimit_jni.c's io_env gives the threads it attaches: I/O threads. */
    static final String IO_THREAD_PREFIX = "ratelimit-io-";
    /** The JNI global reference to this object: the callback's context. */
    final long ref;

    AsyncCalls() {
        this.ref = Native.asyncContext(this);
    }

    /** Registers a future before it is submitted (its completion may come before rl_submit returns). */
    long register(CompletableFuture<?> future) {
        long tag = nextTag.incrementAndGet();
        if (future instanceof AsyncOp) {
            ((AsyncOp<?>) future).tag = tag;
        } else if (future instanceof Waiting) {
            ((Waiting) future).tag = tag;
        }
        pending.put(tag, future);
        return tag;
    }

    /** A tag for a call nobody waits for (a give-back): its completion finds no future. */
    long untrackedTag() {
        return nextTag.incrementAndGet();
    }

    /** True while the call under {@code tag} has not completed. */
    boolean isPending(long tag) {
        return pending.containsKey(tag);
    }

    /** The submit failed: no completion will come for this tag. */
    void forget(long tag) {
        pending.remove(tag);
    }

    int inFlight() {
        return pending.size();
    }

    /** Learns the I/O thread from a completion that runs on it. */
    private void seen() {
        if (ioThread == null && Thread.currentThread().getName().startsWith(IO_THREAD_PREFIX)) {
            ioThread = Thread.currentThread();
        }
    }

    /** True on this client's I/O thread (where dependents of its futures run). */
    boolean onIoThread() {
        Thread t = ioThread;
        return t != null && t == Thread.currentThread();
    }

    /**
     * Called from C on the I/O thread, once per submitted decision (a decision
     * from a lease: on the submitting thread, before the submit returns, or on
     * the thread that fetched the block it waited for). Builds the
     * result or the exception exactly as the blocking path does and completes
     * the future; never throws back into C.
     */
    void complete(long tag, int status, boolean allowed, long limit, long remaining, long retryAfterMs,
            long resetAfterMs, long waitMs, boolean fallback, long granted, int rateIndex, boolean local,
            byte[] message) {
        CompletableFuture<?> f = pending.remove(tag);
        if (!(f instanceof Pending && ((Pending) f).submitter == Thread.currentThread())) {
            seen();
        }
        if (!(f instanceof Pending)) {
            return;
        }
        Pending future = (Pending) f;
        try {
            if (status == 0) {
                future.complete(new Result(allowed, limit, remaining, retryAfterMs, resetAfterMs, waitMs, fallback,
                        granted, rateIndex, local));
            } else {
                future.completeExceptionally(failure(status, message));
            }
        } catch (Throwable t) {
            // a dependent stage threw an Error (CompletableFuture catches the
            // rest): the I/O thread must go on completing the others
            if (!future.isDone()) {
                future.completeExceptionally(t);
            }
        }
    }

    /**
     * Called from C on the I/O thread, once per submitted semaphore, lock or
     * queue call (primitives_jni.c). Same rules as {@link #complete}; what the
     * completion holds goes back when the future was given up meanwhile
     * ({@link AsyncOp#completed}).
     */
    void completeOp(long tag, int status, boolean acquired, long fencingToken, String permitId, long value,
            byte[][] messages, byte[] message) {
        seen();
        CompletableFuture<?> f = pending.remove(tag);
        if (!(f instanceof AsyncOp)) {
            return;
        }
        AsyncOp<?> op = (AsyncOp<?>) f;
        try {
            AsyncOp.Done d = AsyncOp.done(acquired, permitId, fencingToken, value, messages);
            // messages taken before a failure are delivered, as the blocking pop does
            op.completed(status == 0 || d.messages.length > 0 ? null : failure(status, message), d);
        } catch (Throwable t) {
            op.fail(t); // as in complete(): the I/O thread goes on
        }
    }

    /** The exception of a failed completion: the blocking call's class and message. */
    private static RuntimeException failure(int status, byte[] message) {
        if (status == Status.CLOSED.code()) {
            return ClientHandle.closed(null);
        }
        String text = message != null ? Native.string(message) : Native.strerror(status);
        return RateLimitException.of(Status.fromCode(status), text);
    }

    /**
     * After rl_client_close returned: every completion has been delivered, so
     * this fails only what the core lost (nothing, unless the I/O thread could
     * not be attached). Safe to call more than once.
     */
    void failRemaining() {
        for (Long tag : pending.keySet()) {
            CompletableFuture<?> future = pending.remove(tag);
            if (future instanceof AsyncOp) {
                ((AsyncOp<?>) future).fail(ClientHandle.closed(null));
            } else if (future != null) {
                future.completeExceptionally(ClientHandle.closed(null));
            }
        }
    }

    /** Deletes the JNI reference; only after rl_client_close returned. */
    void free() {
        Native.asyncContextFree(ref);
    }
}
