package io.ratelimit;

import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.ReentrantReadWriteLock;

/**
 * Owns the native rl_client pointer. Calls hold the read side of a lock for
 * as long as C may use the pointer; close takes the write side, so the client
 * is never freed under a call in flight. Blocking waits poll
 * {@link #cancelRequested()}, so a close does not wait for their timeouts.
 * Deliberately separate from {@link RateLimitClient}: the Cleaner runs this
 * object, which must not reach the client it cleans up after.
 */
final class ClientHandle implements Runnable {
    private final long ptr;
    private final ReentrantReadWriteLock lock = new ReentrantReadWriteLock();
    private final AtomicBoolean closing = new AtomicBoolean();

    interface Call<T> {
        T run(long ptr);
    }

    ClientHandle(long ptr) {
        this.ptr = ptr;
    }

    <T> T call(Call<T> call) {
        ReentrantReadWriteLock.ReadLock read = lock.readLock();
        read.lock();
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

    /** Polled from C during blocking waits, on the waiting thread. */
    boolean cancelRequested() {
        return closing.get() || Thread.currentThread().isInterrupted();
    }

    boolean isClosed() {
        return closing.get();
    }

    /** Close, at most once; waits for calls in flight (blocking ones stop within ~100 ms). */
    @Override
    public void run() {
        if (!closing.compareAndSet(false, true)) {
            return;
        }
        ReentrantReadWriteLock.WriteLock write = lock.writeLock();
        write.lock();
        try {
            Native.close(ptr);
        } finally {
            write.unlock();
        }
    }

    private static RateLimitException closed(Throwable cause) {
        return new RateLimitException(Status.CLOSED, "client is closed", cause);
    }
}
