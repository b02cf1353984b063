/* Blocking callers that overlap share the I/O thread's batch calls. While
 * another blocking call is in flight on the client, a plain decision goes to
 * the asynchronous engine, which sends what is submitted together as one
 * batch call of limit.lua (Redis's cost per decision falls by about half),
 * and its caller waits for its own completion until its own deadline. A
 * caller alone keeps the direct round trip on a pooled connection: no
 * hand-off, no added latency. docs/benchmarks.md says why this and not flat
 * combining on a connection. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "async.h"

/* One caller's decision in the engine; the caller may leave (its deadline
 * passed, its thread cancelled) before the completion comes: the last of
 * the two to let go frees it. */
typedef struct {
    pthread_mutex_t mutex;
    pthread_cond_t completed;
    int refs; /* the caller, and the completion still due */
    int done;
    rl_completion completion;
} waiter;

/* w->mutex held: lets go of one reference, and of the mutex */
static void let_go(void *arg)
{
    waiter *w = arg;
    int last = --w->refs == 0;
    pthread_mutex_unlock(&w->mutex);
    if (!last) return;
    pthread_cond_destroy(&w->completed);
    pthread_mutex_destroy(&w->mutex);
    free(w);
}

/* on the I/O thread */
static void complete(void *ctx, const rl_completion *completion)
{
    waiter *w = ctx;
    pthread_mutex_lock(&w->mutex);
    w->completion = *completion;
    w->done = 1;
    pthread_cond_signal(&w->completed);
    let_go(w);
}

typedef struct {
    waiter *w;
    rl_client *client;
} leaving;

/* a caller cancelled while waiting (w->mutex held): it is no longer in
 * flight, and its completion finds nobody */
static void cancelled(void *arg)
{
    leaving *l = arg;
    __atomic_fetch_sub(&l->client->blocking_calls, 1, __ATOMIC_RELAXED);
    let_go(l->w);
}

/* Waits for w's completion until deadline_ms; 1 if it came (w->mutex held
 * either way). */
static int wait_for(rl_client *c, waiter *w, int64_t deadline_ms)
{
    leaving l = {w, c};
    pthread_mutex_lock(&w->mutex);
    pthread_cleanup_push(cancelled, &l);
    for (int64_t left; !w->done && (left = deadline_ms - rl_now_ms()) > 0;) {
        struct timespec until = rl_realtime_after((int)left);
        pthread_cond_timedwait(&w->completed, &w->mutex, &until);
    }
    pthread_cleanup_pop(0);
    return w->done;
}

/* The pool's server (standalone, sentinel) is behind: its callers keep the
 * pool's one call at a time, and the call that comes back in time says so. */
static int pool_behind(rl_client *c)
{
    if (c->url.mode == RL_MODE_CLUSTER) return 0;
    pthread_mutex_lock(&c->topology);
    rl_node *master = c->master; /* nodes live as long as the client */
    pthread_mutex_unlock(&c->topology);
    if (!master) return 0;
    pthread_mutex_lock(&master->mutex);
    int behind = master->behind;
    pthread_mutex_unlock(&master->mutex);
    return behind;
}

int rl_combine_decide(rl_client *c, const rl_request *req, rl_result *result, rl_outcome *outcome)
{
    if (pool_behind(c)) return RL_ERR_BACKLOG;
    rl_areq *r = rl_async_req_new(REQ_DECISION);
    if (r) rl_build_decision(&r->cmd, c, req);
    if (!r || r->cmd.failed) {
        if (r) rl_async_req_free(r);
        return rl_fail(RL_ERR_NOMEM, "out of memory");
    }
    waiter *w = calloc(1, sizeof *w);
    if (!w) {
        rl_async_req_free(r);
        return rl_fail(RL_ERR_NOMEM, "out of memory");
    }
    pthread_mutex_init(&w->mutex, NULL);
    pthread_cond_init(&w->completed, NULL);
    w->refs = 2;
    /* not counted by the engine (stats.entry NULL): rl_execute_each counts it */
    r->target.fn = complete;
    r->target.ctx = w;
    r->blocking = 1;
    r->capacity = rl_spec_capacity(&req->spec);
    r->permits = req->permits;
    int64_t deadline_ms = rl_now_ms() + c->options.command_timeout_ms;
    /* a thread cancelled may leave in the wait only, where it lets go of w */
    int cancel_state;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
    int rc = rl_async_send(c, r); /* on failure r is freed: no completion due */
    if (rc) {
        pthread_mutex_lock(&w->mutex);
        w->refs = 1;
        let_go(w);
        pthread_setcancelstate(cancel_state, NULL);
        return rc;
    }
    pthread_setcancelstate(cancel_state, NULL);
    if (wait_for(c, w, deadline_ms)) {
        /* the engine applied the on_error policy already (result.fallback) */
        outcome->status = w->completion.status;
        snprintf(outcome->error, sizeof outcome->error, "%s", w->completion.error);
        *result = w->completion.result;
        if (outcome->status || result->fallback) rl_fail(outcome->status, "%s", outcome->error);
    } else {
        /* the engine completes it later, to nobody: nothing is sent again */
        outcome->status = rl_fail(RL_ERR_TIMEOUT, "no reply within %d ms", c->options.command_timeout_ms);
        snprintf(outcome->error, sizeof outcome->error, "%s", rl_errmsg());
    }
    let_go(w);
    return RL_OK;
}
