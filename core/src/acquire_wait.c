/* The timed acquire: decide and, while denied, decide again after the
 * denial's retry_after_ms, never past the deadline. One rule (next_try)
 * for both forms: rl_acquire_wait sleeps between its tries; the tries of
 * rl_submit_acquire_wait are rl_submit calls spaced by the I/O thread's
 * timer, where the wait sits among the others (waits.c: cancel, close).
 * A stored spec is the one the client's cache has at each try, in both
 * (rl_config_resolve; its two halves on the I/O thread). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "async.h"

/* What both forms refuse before anything is sent. */
static int check_wait(const rl_request *request, int64_t timeout_ms)
{
    int rc;
    if (request->op != RL_OP_ACQUIRE) return rl_fail(RL_ERR_INVALID, "only acquire can wait");
    if ((rc = rl_check_range("timeout_ms", timeout_ms, 0, RL_MAX_PERIOD_MS))) return rc;
    if (timeout_ms > 0 && request->now_ms)
        return rl_fail(RL_ERR_INVALID, "now cannot be combined with timeout (an explicit clock never advances)");
    return RL_OK;
}

/* After a try: the pause before the next one (ms), or -1 when r is the
 * answer: admitted, the on_error policy's, or its next chance comes past
 * the deadline, so waiting cannot help. */
static void timed_step(rl_async *a, rl_areq *r);

static int64_t next_try(const rl_result *r, int64_t left_ms)
{
    if (r->allowed || r->fallback || r->retry_after_ms > left_ms) return -1;
    return r->retry_after_ms > 0 ? r->retry_after_ms : 1;
}

int rl_acquire_wait(rl_client *client, const rl_request *request, const rl_wait *wait, rl_result *out)
{
    RL_IN_FLIGHT(client);
    int64_t timeout = wait ? wait->timeout_ms : 0, deadline, pause;
    int rc;

    if (!request || !out) return rl_fail(RL_ERR_INVALID, "request and out must not be NULL");
    if ((rc = check_wait(request, timeout))) return rc;
    deadline = rl_now_ms() + timeout;
    for (;;) {
        if ((rc = rl_execute(client, request, 1, out))) return rc;
        if ((pause = next_try(out, deadline - rl_now_ms())) < 0) return RL_OK;
        if ((rc = rl_client_sleep(client, pause, wait))) return rc;
    }
}

int rl_submit_acquire_wait(rl_client *c, const rl_request *request, int64_t timeout_ms, uint64_t tag,
                           const rl_target *target)
{
    RL_IN_FLIGHT(c);
    rl_request resolved;
    int rc;

    rl_clear_error();
    if (!c || !request || !target) return rl_fail(RL_ERR_INVALID, "client, request and target must not be NULL");
    if ((target->fn == NULL) == (target->queue == NULL))
        return rl_fail(RL_ERR_INVALID, "a target is a callback or a completion queue (exactly one)");
    if ((rc = check_wait(request, timeout_ms))) return rc;
    if (request->stored_spec) {
        /* the first try's, here, as rl_submit would: the later ones look
         * again (spec_lookup). Unreadable: rl_submit applies the policy. */
        if (rl_resolve_stored(c, request, &resolved)) return rl_submit(c, request, tag, target);
        request = &resolved;
    }
    if ((rc = rl_validate_request(request))) return rc;
    rl_areq *r = rl_async_req_new(REQ_DECISION);
    rl_await *w = r ? (r->wait = calloc(1, sizeof *w)) : NULL;
    if (!w || !(w->name = strdup(request->name)) || !(w->id = strdup(request->id))) {
        if (r) rl_async_req_free(r);
        return rl_fail(RL_ERR_NOMEM, "out of memory");
    }
    r->tag = tag;
    r->target = *target;
    w->request = *request;
    w->request.name = w->name;
    w->request.id = w->id;
    w->timed = timed_step;
    w->stored = request == &resolved;
    w->until_ms = rl_now_ms() + timeout_ms;
    if (target->queue && (rc = rl_completions_reserve(target->queue))) {
        rl_async_req_free(r);
        return rc;
    }
    r->reserved = target->queue != NULL;
    /* the I/O thread sends its first try: a cancel after this returns finds it */
    if ((rc = rl_async_send(c, r)) && target->queue) rl_completions_unreserve(target->queue);
    return rc;
}

/* ---- on the I/O thread --------------------------------------------------------- */

/* A try's completion, on the thread that completed it (the I/O thread, or
 * a lease's): its outcome goes back to the I/O thread with r. */
static void tried(void *ctx, const rl_completion *c)
{
    rl_areq *r = ctx;
    rl_async *a = r->wait->async;
    r->decided_status = c->status;
    r->result = c->result;
    snprintf(r->failure, sizeof r->failure, "%s", c->error);
    if (pthread_equal(pthread_self(), a->thread) && a->stopping) {
        timed_step(a, r); /* closing: what was submitted is failed already */
        return;
    }
    /* even while closing: the I/O thread fails what is submitted when it stops */
    pthread_mutex_lock(&a->mutex);
    list_push(&a->submitted, r);
    int sleeping = a->sleeping;
    a->sleeping = 0;
    pthread_mutex_unlock(&a->mutex);
    if (sleeping) rl_async_wake(a);
}

static void timed_try(rl_async *a, rl_areq *r)
{
    rl_target target = {tried, r, NULL};
    /* decided from a lease (tried at once), or queued; else not queued */
    int rc = rl_submit(a->client, &r->wait->request, r->tag, &target);
    if (rc) rl_async_finish(a, r, rc, NULL);
}

/* A stored spec's read in flight and the waits it is for: one read per
 * name at a time, however many waits find the cache stale together. */
struct rl_spec_read {
    struct rl_spec_read *next; /* on rl_async.spec_reads */
    rl_areq *waits;            /* chained by rl_await.joined */
    char name[];
};

/* The read came back (status, reply), or failed: taken in (the client's
 * cache), then each wait's next try goes out under the spec, or the wait
 * ends as a try that failed would. */
static void spec_read(rl_async *a, void *ctx, int status, const redisReply *reply)
{
    struct rl_spec_read *read = ctx, **p = &a->spec_reads;
    rl_spec spec;
    char failure[200];
    while (*p != read) p = &(*p)->next;
    *p = read->next;
    int rc = rl_config_read_done(a->client, read->name, status, reply, &spec);
    snprintf(failure, sizeof failure, "%s", rc ? rl_errmsg() : "");
    for (rl_areq *r = read->waits, *next; r; r = next) {
        rl_await *w = r->wait;
        next = w->joined;
        w->joined = NULL;
        if (!rc) w->request.spec = spec;
        if (!rc && !w->cancelled && !a->stopping) {
            timed_try(a, r);
            continue;
        }
        /* cancelled or closing meanwhile: the last try's denial stands */
        r->decided_status = rc;
        snprintf(r->failure, sizeof r->failure, "%s", failure);
        timed_step(a, r);
    }
    free(read);
}

/* A later try of a stored spec: under the spec as the cache has it now,
 * or once it is read again (stale), the I/O thread waiting for nobody. */
static void spec_lookup(rl_async *a, rl_areq *r)
{
    rl_await *w = r->wait;
    struct rl_spec_read *read = a->spec_reads;
    rl_areq *command;
    int rc;
    if (rl_config_cache_lookup(a->client, w->name, &w->request.spec, &rc)) {
        if (rc) rl_async_finish(a, r, rc, NULL);
        else timed_try(a, r);
        return;
    }
    while (read && strcmp(read->name, w->name)) read = read->next;
    if (read) {
        w->joined = read->waits;
        read->waits = r;
        return;
    }
    size_t len = strlen(w->name);
    if (!(read = malloc(sizeof *read + len + 1)) || !(command = rl_async_req_new(REQ_READ))) {
        free(read);
        rl_async_finish(a, r, rl_fail(RL_ERR_NOMEM, "out of memory"), NULL);
        return;
    }
    memcpy(read->name, w->name, len + 1);
    read->waits = r;
    w->joined = NULL;
    command->read_done = spec_read;
    command->read_ctx = read;
    command->deadline_ms = rl_now_ms() + a->client->options.command_timeout_ms;
    rl_config_read_command(&command->cmd, a->client, w->name);
    if (command->cmd.failed) {
        rl_async_req_free(command);
        free(read);
        rl_async_finish(a, r, rl_fail(RL_ERR_NOMEM, "out of memory building a command"), NULL);
        return;
    }
    read->next = a->spec_reads;
    a->spec_reads = read;
    rl_async_dispatch(a, command); /* it may complete here, at once */
}

/* New (linked among the waits already), back from a try (it completes, or
 * sleeps until its next), or its sleep is over (the next try goes out). */
static void timed_step(rl_async *a, rl_areq *r)
{
    rl_await *w = r->wait;
    if (!w->async) { /* its spec was resolved as it was submitted */
        w->async = a;
        timed_try(a, r);
        return;
    }
    if (w->sleeping) {
        w->sleeping = 0;
        if (w->stored) spec_lookup(a, r);
        else timed_try(a, r);
        return;
    }
    int status = r->decided_status;
    int64_t now = rl_now_ms(), pause = status ? -1 : next_try(&r->result, w->until_ms - now);
    if (pause >= 0 && !w->cancelled && !a->stopping) {
        r->retry_at_ms = now + pause;
        w->sleeping = 1;
        list_push(&a->sleepers, r);
        return;
    }
    /* a try admitted (or failed) stands, cancelled or not: a decision is not undone */
    if (pause >= 0) status = a->stopping ? rl_fail(RL_ERR_CLOSED, "the client was closed")
                                          : rl_fail(RL_ERR_CANCELLED, "wait cancelled");
    else if (status) rl_fail(status, "%s", r->failure);
    r->decided = 1;
    rl_async_finish(a, r, status, NULL);
}
