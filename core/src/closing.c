/* Closing a client while other threads call it, in two steps as shutdown(2)
 * and close(2), or SQLite's sqlite3_close_v2 and its zombie handle.
 * rl_client_shutdown refuses new calls; when the last call in flight returns
 * (at once when none is) that thread gives the leases back, stops the I/O
 * thread and closes the pooled connections. The memory stays until
 * rl_client_close, which waits for that work and for every call, then frees.
 * Why two steps: a binding cannot make "read the pointer, then enter the
 * core" atomic against another thread's close without a guard of its own,
 * unless the memory outlives the close. With them, a binding's close() shuts
 * down and its object's deallocation (no thread can hold the pointer any
 * more) closes.
 *
 * The calls in flight are counted in one word per client whose low bits are
 * the closing state, so that leaving and claiming the last call's work are
 * one atomic step: a thread that left touches the client no more, unless it
 * claimed the work. Counted at each public entry (RL_IN_FLIGHT): one atomic
 * add in and one compare-and-swap out, uncontended on one thread. */
#include <time.h>

#include "internal.h"

#define CLOSING 1 /* rl_client_shutdown ran: new calls are refused */
#define SHUT 2    /* the work after the last call is claimed by one thread */
#define ONE_CALL 4

/* Calls in flight on this thread (of any client). One made inside another
 * (rl_acquire_wait's decisions, a stored spec read while deciding, a
 * completion callback run by a blocking caller) is not refused: calls in
 * flight run on to their end. */
static __thread int depth;

/* Leaves one call (or the shutdown's own count): 1 when this thread is the
 * last after a shutdown and is to do the work. */
static int leave(rl_client *c)
{
    int64_t w = __atomic_load_n(&c->calls, __ATOMIC_RELAXED), next;
    int claim;
    do {
        claim = w - ONE_CALL == CLOSING;
        next = claim ? CLOSING | SHUT : w - ONE_CALL;
    } while (!__atomic_compare_exchange_n(&c->calls, &w, next, 1, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
    return claim;
}

/* No call in flight after a shutdown. Completion callbacks may run on this
 * thread meanwhile (the I/O thread's, when called from one: it stops after
 * the callback returns, rl_async_free joins it). */
static void shut_down(rl_client *c)
{
    rl_leases_end(c, NULL, NULL, RL_LEASES_GIVE_BACK_NOW); /* bounded by the command timeout */
    rl_async_stop(c);
    pthread_mutex_lock(&c->topology);
    for (int i = 0; i < c->node_count; i++) {
        rl_node *node = c->nodes[i];
        pthread_mutex_lock(&node->mutex);
        for (int k = 0; k < node->idle_count; k++) rl_conn_close(node->idle[k]);
        node->open_count -= node->idle_count;
        node->idle_count = 0;
        pthread_mutex_unlock(&node->mutex);
    }
    pthread_mutex_unlock(&c->topology);
    __atomic_store_n(&c->shut_down, 1, __ATOMIC_RELEASE);
}

int rl_call_begin(rl_client *c)
{
    int64_t w = __atomic_add_fetch(&c->calls, ONE_CALL, __ATOMIC_SEQ_CST);
    if ((w & CLOSING) && !depth) {
        if (leave(c)) shut_down(c);
        return rl_fail(RL_ERR_CLOSED, "client is closed");
    }
    depth++;
    return RL_OK;
}

void rl_call_end(rl_client *c)
{
    depth--;
    if (leave(c)) shut_down(c);
}

void rl_call_scope_end(rl_client **c)
{
    if (*c) rl_call_end(*c);
}

int rl_client_shutdown(rl_client *c, int stop_waits)
{
    if (!c) return 0;
    /* counted while it touches the client: a concurrent rl_client_close waits */
    __atomic_add_fetch(&c->calls, ONE_CALL, __ATOMIC_SEQ_CST);
    if (stop_waits) __atomic_store_n(&c->stop_waits, 1, __ATOMIC_RELAXED);
    __atomic_fetch_or(&c->calls, CLOSING, __ATOMIC_SEQ_CST);
    if (!leave(c)) return __atomic_load_n(&c->shut_down, __ATOMIC_ACQUIRE);
    shut_down(c);
    return 1;
}

void rl_client_close(rl_client *c)
{
    if (!c) return;
    rl_client_shutdown(c, 1);
    /* the waits stopped: each call returns within the command timeout */
    for (;;) {
        int64_t w = __atomic_load_n(&c->calls, __ATOMIC_SEQ_CST);
        if (w == CLOSING && __atomic_compare_exchange_n(&c->calls, &w, CLOSING | SHUT, 0, __ATOMIC_SEQ_CST,
                                                        __ATOMIC_RELAXED))
            shut_down(c); /* a forked child's, whose parent had calls in flight (rl_calls_start_afresh) */
        else if (w < ONE_CALL && __atomic_load_n(&c->shut_down, __ATOMIC_ACQUIRE))
            break;
        struct timespec ms = {0, 1000000L};
        nanosleep(&ms, NULL);
    }
    rl_fork_untrack(&c->fork_hooks);
    rl_client_free(c);
}

void rl_calls_start_afresh(rl_client *c)
{
    /* the parent's callers did not come along, nor a shutdown under way in
     * one of them (the child's rl_client_close does it again) */
    int done = __atomic_load_n(&c->shut_down, __ATOMIC_RELAXED);
    c->calls = (c->calls & CLOSING) | (done ? SHUT : 0);
}

int rl_waits_stopped(const rl_client *c)
{
    return __atomic_load_n(&c->stop_waits, __ATOMIC_RELAXED) ? rl_fail(RL_ERR_CLOSED, "client is closed") : RL_OK;
}

int rl_client_sleep(rl_client *c, int64_t ms, const rl_wait *wait)
{
    int rc;
    for (int64_t end = rl_now_ms() + ms, left; (left = end - rl_now_ms()) > 0;)
        if ((rc = rl_waits_stopped(c)) || (rc = rl_sleep(left < 50 ? left : 50, wait))) return rc;
    return rl_waits_stopped(c);
}
