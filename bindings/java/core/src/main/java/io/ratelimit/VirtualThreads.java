package io.ratelimit;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;

/**
 * The blocking API on virtual threads (Java 21+). A virtual thread inside a
 * native call holds its carrier (one per core) for as long as the call lasts,
 * so there a blocking call is its asynchronous twin waited on, which parks
 * the virtual thread (Lettuce's synchronous API is its asynchronous core
 * waited on). Platform threads keep the direct native path.
 *
 * <p>The few calls the core has no asynchronous form for (connect, the
 * stored-spec calls, batches, a lease give-back, close, and a decision whose
 * stored spec must be read first) run on a platform thread of a small cached
 * pool while the virtual thread parks: each is one round trip bounded by the
 * command timeout, and rare.
 */
final class VirtualThreads {
    /** Thread.isVirtual, looked up once: null before Java 21 (this code compiles with --release 17). */
    private static final MethodHandle IS_VIRTUAL = isVirtual();

    private VirtualThreads() {}

    private static MethodHandle isVirtual() {
        try {
            return MethodHandles.publicLookup().findVirtual(Thread.class, "isVirtual",
                    MethodType.methodType(boolean.class));
        } catch (NoSuchMethodException | IllegalAccessException e) {
            return null;
        }
    }

    /** True on a virtual thread; a constant-folded false before Java 21. */
    static boolean current() {
        MethodHandle isVirtual = IS_VIRTUAL;
        if (isVirtual == null) {
            return false;
        }
        try {
            return (boolean) isVirtual.invokeExact(Thread.currentThread());
        } catch (Throwable t) {
            throw new AssertionError("Thread.isVirtual failed", t);
        }
    }

    /**
     * Waits for one round trip without reading the interrupt flag, as the
     * native call does (CompletableFuture.join parks a virtual thread and
     * keeps the flag); throws what the blocking call would.
     */
    static <T> T await(CompletableFuture<T> future) {
        try {
            return future.join();
        } catch (CompletionException e) {
            throw rethrown(e.getCause());
        }
    }

    /**
     * Waits for a wait (a timed acquire, a semaphore or lock acquire, a pop)
     * that an interrupt stops. On an interrupt {@code withdraw} asks the core
     * to end the wait (rl_cancel), and the core's completion says how it
     * ended, exactly as the native wait polling the flag does:
     * {@link CancelledException} holding nothing, or what was decided before
     * the cancel reached it. The interrupt flag stays set either way.
     */
    static <T> T awaitWait(CompletableFuture<T> future, Runnable withdraw) {
        try {
            return future.get();
        } catch (InterruptedException e) {
            withdraw.run();
            Thread.currentThread().interrupt();
            return await(future);
        } catch (ExecutionException e) {
            throw rethrown(e.getCause());
        }
    }

    /**
     * Runs a call the core can only make blocking on a platform thread while
     * this virtual thread parks (uninterruptibly, as the native call would run).
     */
    static <T> T offload(Supplier<T> call) {
        return await(CompletableFuture.supplyAsync(call, Offload.POOL));
    }

    /** The failure as the blocking call throws it: the same object, with the caller's stack. */
    private static RuntimeException rethrown(Throwable failure) {
        if (failure instanceof Error) {
            throw (Error) failure;
        }
        // made on the I/O or a pool thread for this call alone: give it this
        // thread's stack, as the blocking call's exception has
        failure.fillInStackTrace();
        if (failure instanceof RuntimeException) {
            return (RuntimeException) failure;
        }
        return new IllegalStateException(failure); // the core's failures are all RateLimitExceptions
    }

    /** Made on first use: a platform thread never needs it. */
    private static final class Offload {
        private static final AtomicInteger COUNT = new AtomicInteger();
        // unbounded like the blocking pool's callers it stands in for: a queue
        // here would make a call wait past its own command timeout
        static final ExecutorService POOL = new ThreadPoolExecutor(0, Integer.MAX_VALUE, 10, TimeUnit.SECONDS,
                new SynchronousQueue<>(), r -> {
                    Thread t = new Thread(r, "ratelimit-blocking-" + COUNT.incrementAndGet());
                    t.setDaemon(true);
                    return t;
                });
    }
}
