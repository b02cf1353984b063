/* Calls in flight on a client and the waits that stop when it shuts down
 * (closing.c: the closing work, run by whichever thread leaves last).
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

#ifdef __GLIBC__
/* glibc cancels a thread by unwinding its frames (the core builds with
 * -fexceptions): a call's cleanup attributes run and it leaves. */
#define DEFER_CANCEL() ((void)0)
#define RESTORE_CANCEL() ((void)0)
#else
/* musl, macOS, winpthreads run only pthread_cleanup_push's handlers: a
 * thread cancelled inside a call would stay counted in it, holding what it
 * held. Cancellation waits until the outermost call has returned. */
static __thread int cancel_state;
#define DEFER_CANCEL() pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state)
#define RESTORE_CANCEL() pthread_setcancelstate(cancel_state, &cancel_state)
#endif

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

int rl_call_begin(rl_client *c)
{
    int64_t w = __atomic_add_fetch(&c->calls, ONE_CALL, __ATOMIC_SEQ_CST);
    if ((w & CLOSING) && !depth) {
        if (leave(c)) c->closing_work(c);
        return rl_fail(RL_ERR_CLOSED, "client is closed");
    }
    if (depth++ == 0) DEFER_CANCEL();
    return RL_OK;
}

void rl_call_end(rl_client *c)
{
    depth--;
    if (leave(c)) c->closing_work(c);
    if (depth == 0) RESTORE_CANCEL();
}

void rl_call_scope_end(rl_client **c)
{
    if (*c) rl_call_end(*c);
}

/* rl_client_shutdown: new calls are refused from now on. 1 when this thread
 * is to do the closing work (no call was in flight). */
int rl_calls_refuse(rl_client *c, int stop_waits)
{
    /* counted while it touches the client: a concurrent rl_client_close waits */
    __atomic_add_fetch(&c->calls, ONE_CALL, __ATOMIC_SEQ_CST);
    if (stop_waits) __atomic_store_n(&c->stop_waits, 1, __ATOMIC_RELAXED);
    __atomic_fetch_or(&c->calls, CLOSING, __ATOMIC_SEQ_CST);
    return leave(c);
}

/* rl_client_close: until no call is in flight and the closing work is done. */
void rl_calls_wait_out(rl_client *c)
{
    for (;;) {
        int64_t w = __atomic_load_n(&c->calls, __ATOMIC_SEQ_CST);
        if (w == CLOSING && __atomic_compare_exchange_n(&c->calls, &w, CLOSING | SHUT, 0, __ATOMIC_SEQ_CST,
                                                        __ATOMIC_RELAXED))
            c->closing_work(c); /* a forked child's, whose parent had calls in flight (rl_calls_start_afresh) */
        else if (w < ONE_CALL && __atomic_load_n(&c->shut_down, __ATOMIC_ACQUIRE))
            break;
        struct timespec ms = {0, 1000000L};
        nanosleep(&ms, NULL);
    }
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

int rl_sleep(int64_t ms, const rl_wait *wait)
{
    int64_t end = rl_now_ms() + ms;
    for (;;) {
        if (wait && wait->cancel && wait->cancel(wait->cancel_ctx))
            return rl_fail(RL_ERR_CANCELLED, "wait cancelled");
        int64_t left = end - rl_now_ms();
        if (left <= 0) return RL_OK;
        if (left > 50) left = 50;
        struct timespec ts = {0, (long)left * 1000000L};
        nanosleep(&ts, NULL);
    }
}
