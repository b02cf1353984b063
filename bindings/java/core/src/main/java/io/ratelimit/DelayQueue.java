package io.ratelimit;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * Messages delivered after a delay; each message is its own id (pushing one
 * already queued changes nothing) and no two consumers ever get the same one.
 * Thread-safe. The asynchronous calls follow {@link Semaphore}'s rules
 * (threading, cancellation): a cancelled pop loses no message.
 */
public final class DelayQueue {
    private final RateLimitClient client;
    private final String name;
    private final byte[] nameBytes;

    DelayQueue(RateLimitClient client, String name) {
        this.client = client;
        this.name = name;
        this.nameBytes = Native.name("queue", name);
    }

    /** Schedules {@code message} after {@code delay}; false if it was already queued. */
    public boolean push(String message, Duration delay) {
        if (VirtualThreads.current()) {
            return VirtualThreads.await(pushAsync(message, delay));
        }
        byte[] bytes = Native.bytes(message);
        long ms = Native.millis("delay", delay);
        return client.call(ptr -> Native.queuePush(ptr, nameBytes, bytes, ms));
    }

    /** Takes up to {@code max} messages that are due now. */
    public List<String> popReady(int max) {
        if (VirtualThreads.current()) {
            return VirtualThreads.await(popReadyAsync(max));
        }
        return strings(client.call(ptr -> Native.queuePop(ptr, null, nameBytes, max, 0)));
    }

    /**
     * Takes up to {@code max} due messages, waiting up to {@code timeout} for
     * one (blocking in Redis, no polling); empty if none came. An interrupt
     * stops the wait with {@link CancelledException}.
     */
    public List<String> pop(int max, Duration timeout) {
        if (VirtualThreads.current()) {
            // the I/O thread waits for a push, parked on
            CompletableFuture<List<String>> f = popAsync(max, timeout);
            return VirtualThreads.awaitWait(f, () -> client.handle.withdraw(f));
        }
        long ms = Native.millis("timeout", timeout);
        ClientHandle h = client.handle;
        return strings(client.call(ptr -> Native.queuePop(ptr, h, nameBytes, max, ms)));
    }

    /** {@link #push} without blocking. Cancelling the future does not stop the push. */
    public CompletableFuture<Boolean> pushAsync(String message, Duration delay) {
        byte[] bytes = Native.bytes(message);
        long ms;
        try {
            ms = Native.millis("delay", delay);
        } catch (RateLimitException e) {
            return CompletableFuture.failedFuture(e);
        }
        return client.submitOp(AsyncOp.flag(client),
                (ptr, context, tag) -> Native.queuePushAsync(ptr, context, tag, nameBytes, bytes, ms));
    }

    /** {@link #popReady} without blocking. */
    public CompletableFuture<List<String>> popReadyAsync(int max) {
        return submitPop(max, 0);
    }

    /**
     * {@link #pop} without blocking: waits on the I/O thread, woken by a
     * push; empty if nothing came within {@code timeout}. Cancel the future
     * to withdraw: messages taken meanwhile go back to the queue, due at once.
     */
    public CompletableFuture<List<String>> popAsync(int max, Duration timeout) {
        long ms;
        try {
            ms = Native.millis("timeout", timeout);
        } catch (RateLimitException e) {
            return CompletableFuture.failedFuture(e);
        }
        return submitPop(max, ms);
    }

    /** A pop waiting on the I/O thread; messages nobody takes (given up meanwhile) go back, due at once. */
    private CompletableFuture<List<String>> submitPop(int max, long timeoutMs) {
        AsyncOp<List<String>> op = new AsyncOp<>(client, true, d -> strings(d.messages), d -> {
            for (byte[] m : d.messages) {
                client.handle.giveBack(
                        (ptr, context, tag) -> Native.queuePushAsync(ptr, context, tag, nameBytes, m, 0));
            }
        });
        return client.submitOp(op,
                (ptr, context, tag) -> Native.queuePopAsync(ptr, context, tag, nameBytes, max, timeoutMs));
    }

    /** Messages queued, due or not. */
    public long size() {
        if (VirtualThreads.current()) {
            return VirtualThreads.await(client.submitOp(new AsyncOp<>(client, false, d -> d.value, d -> {}),
                    (ptr, context, tag) -> Native.queueSizeAsync(ptr, context, tag, nameBytes)));
        }
        return client.call(ptr -> Native.queueSize(ptr, nameBytes));
    }

    /** Removes a queued message; false if it was not there. */
    public boolean remove(String message) {
        byte[] bytes = Native.bytes(message);
        if (VirtualThreads.current()) {
            return VirtualThreads.await(client.submitOp(new AsyncOp<>(client, false, d -> d.value == 1, d -> {}),
                    (ptr, context, tag) -> Native.queueRemoveAsync(ptr, context, tag, nameBytes, bytes)));
        }
        return client.call(ptr -> Native.queueRemove(ptr, nameBytes, bytes));
    }

    public String name() {
        return name;
    }

    private static List<String> strings(byte[][] messages) {
        List<String> out = new ArrayList<>(messages.length);
        for (byte[] m : messages) {
            out.add(Native.string(m));
        }
        return out;
    }
}
