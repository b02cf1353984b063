package io.ratelimit;

import java.util.concurrent.CompletableFuture;

/**
 * The future of one asynchronous semaphore, lock or delay-queue call, in
 * flight under its tag in {@link AsyncCalls} and completed on the client's
 * I/O thread ({@link AsyncCalls#completeOp}), as decisions are.
 *
 * <p>A wait (acquire, pop) is withdrawn when the caller gives up on its
 * future: {@code cancel}, {@code orTimeout} (which calls
 * {@code completeExceptionally}) or any completion but the binding's call
 * {@code rl_cancel} for the tag, and the core ends the wait holding nothing
 * (out of the semaphore's queue; a permit granted meanwhile released,
 * messages taken meanwhile pushed back). When the reply was already on its
 * way, the completion finds the future done and {@code giveBack} returns
 * what it holds. Giving up on a call of one round trip (release, refresh,
 * push) only stops waiting for it, as for decisions.
 */
final class AsyncOp<T> extends CompletableFuture<T> {
    /** What a completion carries. */
    static final class Done {
        final boolean acquired;
        /** The permit id / owner token when acquired, else null. */
        final String permitId;
        final long fencingToken;
        /** Release, refresh, extend, push: 1 done, 0 not. */
        final long value;
        /** A pop's messages; never null. */
        final byte[][] messages;

        Done(boolean acquired, String permitId, long fencingToken, long value, byte[][] messages) {
            this.acquired = acquired;
            this.permitId = permitId;
            this.fencingToken = fencingToken;
            this.value = value;
            this.messages = messages;
        }

        boolean holdsSomething() {
            return acquired || messages.length > 0;
        }
    }

    /** The caller's value; may throw (a permit not acquired by {@code acquireAsync}). */
    interface Outcome<T> {
        T apply(Done d);
    }

    /** Returns what a completion nobody takes holds; runs on the I/O thread, must not block. */
    interface GiveBack {
        void run(Done d);
    }

    private static final byte[][] NO_MESSAGES = new byte[0][];

    /** Keeps the client reachable while in flight; its handle cancels and gives back. */
    private final RateLimitClient owner;
    private final boolean wait;
    private final Outcome<T> outcome;
    private final GiveBack giveBack;
    /** Set by {@link AsyncCalls#register} before the call is submitted. */
    volatile long tag;

    AsyncOp(RateLimitClient owner, boolean wait, Outcome<T> outcome, GiveBack giveBack) {
        this.owner = owner;
        this.wait = wait;
        this.outcome = outcome;
        this.giveBack = giveBack;
    }

    /** Release, refresh, extend, push: true when done. */
    static AsyncOp<Boolean> flag(RateLimitClient owner) {
        return new AsyncOp<>(owner, false, d -> d.value == 1, d -> {});
    }

    static Done done(boolean acquired, String permitId, long fencingToken, long value, byte[][] messages) {
        return new Done(acquired, permitId, fencingToken, value, messages == null ? NO_MESSAGES : messages);
    }

    /**
     * The core's completion, on the I/O thread: {@code failure} null for a
     * result. A failed call holds nothing (the core gave it back), except
     * messages a pop took before failing, which AsyncCalls delivers as a
     * result, as the blocking pop does.
     */
    void completed(RuntimeException failure, Done d) {
        if (failure != null) {
            super.completeExceptionally(failure);
            return;
        }
        boolean taken;
        try {
            taken = super.complete(outcome.apply(d));
        } catch (RuntimeException e) {
            super.completeExceptionally(e);
            taken = false;
        }
        // done already: cancelled while the reply was on its way
        if (!taken && d.holdsSomething()) {
            giveBack.run(d);
        }
    }

    /** Refused at submission, or lost at close: nothing was granted. */
    void fail(Throwable failure) {
        super.completeExceptionally(failure);
    }

    @Override
    public boolean cancel(boolean mayInterruptIfRunning) {
        boolean cancelled = super.cancel(mayInterruptIfRunning);
        if (cancelled) {
            withdraw();
        }
        return cancelled;
    }

    /** By anyone but the core's completion (orTimeout among them): the caller gave up. */
    @Override
    public boolean completeExceptionally(Throwable ex) {
        boolean done = super.completeExceptionally(ex);
        if (done) {
            withdraw();
        }
        return done;
    }

    /** By anyone but the core's completion (completeOnTimeout among them): the caller gave up. */
    @Override
    public boolean complete(T value) {
        boolean done = super.complete(value);
        if (done) {
            withdraw();
        }
        return done;
    }

    private void withdraw() {
        if (wait) {
            owner.handle.cancelWait(tag);
        }
    }
}
