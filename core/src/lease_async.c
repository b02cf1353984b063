/* Leases on the asynchronous path (rl_submit; the Python asyncio and Java
 * async calls): a decision from a block completes at once, on the
 * submitting thread; a submission finding a fetch in progress is parked on
 * the entry and completed when it ends; one that needs a block fetches it
 * through the I/O thread, whose reply (or failure) ends the fetch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "async.h"
#include "lease.h"

static void deliver(rl_client *c, const rl_parked *p, int status, const char *error, rl_result *res)
{
    rl_completion done;
    memset(&done, 0, sizeof done);
    if (rl_unreachable(status) && c->options.on_error != RL_ON_ERROR_RAISE) {
        rl_fallback_result(c, p->capacity, p->permits, res);
        status = RL_OK; /* the message still says what went wrong */
    }
    done.tag = p->tag;
    done.status = status;
    if (status == RL_OK) done.result = *res;
    if (error && *error) snprintf(done.error, sizeof done.error, "%s", error);
    rl_stats_end(&p->stats, status, &done.result);
    if (p->target.queue) rl_completions_push(p->target.queue, &done);
    else p->target.fn(p->target.ctx, &done);
}

static int start_async_fetch(rl_client *c, rl_lease *e, rl_parked *p, int64_t want, int submitting);
static int fetch_ended(rl_async *a, rl_areq *r, int status, const redisReply *reply);

/* p's request, sent as without a lease. */
static void start_plain(rl_client *c, const rl_lease *e, const rl_parked *p)
{
    rl_areq *r = rl_async_req_new(REQ_DECISION);
    int rc = r ? RL_OK : rl_fail(RL_ERR_NOMEM, "out of memory");
    if (r) {
        rl_request req;
        rl_lease_request(e, &req, p->op, p->permits, 0);
        rl_build_decision(&r->cmd, c, &req);
        r->tag = p->tag;
        r->target = p->target;
        r->reserved = p->target.queue != NULL;
        r->permits = p->permits;
        r->capacity = p->capacity;
        r->stats = p->stats;
        if (r->cmd.failed) {
            rl_async_req_free(r);
            rc = rl_fail(RL_ERR_NOMEM, "out of memory building a command");
        } else {
            rc = rl_async_send(c, r); /* on failure r is freed, its room kept */
        }
    }
    if (rc) {
        rl_result none;
        memset(&none, 0, sizeof none);
        deliver(c, p, rc, rl_errmsg(), &none);
    }
}

/* After a fetch of e ended: the parked submissions get decided from the new
 * block (one of them fetching the next if it runs out), or with the
 * fetch's failure; 64 at a time, completed outside the lock. */
void rl_lease_serve_parked(rl_client *c, rl_lease *e, int wake_timer)
{
    rl_leases *t = c->leases;
    rl_result results[64];
    int statuses[64];
    char error[200];
    for (;;) {
        rl_parked *done = NULL, *fetcher = NULL, *plain = NULL;
        rl_give_backs g;
        int64_t want = 0;
        size_t n = 0;
        rl_give_backs_init(&g, c);
        pthread_mutex_lock(&t->mutex);
        int failure = e->fetching ? RL_OK : e->fetch_status;
        snprintf(error, sizeof error, "%s", e->fetch_error);
        rl_parked *list = e->parked, **keep = &e->parked;
        e->parked = NULL;
        int64_t now = rl_now_ms();
        while (list && n < 64 && !fetcher) {
            rl_parked *p = list;
            list = p->next;
            p->next = NULL;
            rl_lease_step s = STEP_BUSY;
            memset(&results[n], 0, sizeof results[n]);
            statuses[n] = failure;
            if (!failure) s = rl_lease_decide(e, p->op, p->permits, now, NULL, &results[n], &want, &g.carrier);
            if (s == STEP_FETCH) {
                fetcher = p;
            } else if (s == STEP_PLAIN) {
                p->next = plain;
                plain = p;
            } else if (s == STEP_BUSY && !failure) {
                *keep = p; /* waits for the next fetch */
                keep = &p->next;
            } else {
                p->next = done;
                done = p;
                n++;
            }
        }
        *keep = list; /* the rest: the next round, or the fetch just started */
        pthread_mutex_unlock(&t->mutex);
        rl_lease_send_all(c, g.list);
        if (wake_timer) rl_async_poke(c);
        wake_timer = 0;
        for (rl_parked *p = done, *next; p; p = next) {
            next = p->next;
            n--;
            deliver(c, p, statuses[n], statuses[n] ? error : "", &results[n]);
            free(p);
        }
        for (rl_parked *p = plain, *next; p; p = next) {
            next = p->next;
            start_plain(c, e, p);
            free(p);
        }
        if (fetcher) {
            start_async_fetch(c, e, fetcher, want, 0);
            free(fetcher);
        }
        if (fetcher || !list) return;
    }
}

/* The fetch of e ended with status (not sent, failed): waiters and parked
 * submissions hear of it. */
void rl_lease_fetch_failed(rl_client *c, rl_lease *e, int status)
{
    int wake = 0;
    rl_result unused;
    pthread_mutex_lock(&c->leases->mutex);
    rl_lease_fetched_locked(c, e, status, NULL, 0, RL_OP_ACQUIRE, 1, &unused, &wake);
    pthread_mutex_unlock(&c->leases->mutex);
    rl_lease_serve_parked(c, e, wake);
}

/* ---- the asynchronous path ----------------------------------------------------- */

/* p's request, as the fetch of e's next block (want permits). submitting:
 * rl_submit's caller hears of a failure to queue it (no completion), else
 * p's target does. */
static int start_async_fetch(rl_client *c, rl_lease *e, rl_parked *p, int64_t want, int submitting)
{
    rl_areq *r = rl_async_req_new(REQ_DECISION);
    int rc = r ? RL_OK : rl_fail(RL_ERR_NOMEM, "out of memory");
    if (r) {
        r->tag = p->tag;
        r->target = p->target;
        r->permits = p->permits;
        r->capacity = p->capacity;
        r->stats = p->stats;
        r->lease = e;
        r->lease_ended = fetch_ended;
        r->lease_op = p->op;
        r->lease_sent_ms = rl_now_ms();
        rl_lease_build(&r->cmd, c, e, want);
        if (r->cmd.failed) {
            rl_async_req_free(r);
            rc = rl_fail(RL_ERR_NOMEM, "out of memory building a command");
        } else {
            r->reserved = p->target.queue != NULL;
            rc = rl_async_send(c, r); /* on failure r is freed, its room kept */
        }
    }
    if (rc) {
        char msg[200];
        snprintf(msg, sizeof msg, "%s", rl_errmsg());
        rl_lease_fetch_failed(c, e, rc);
        if (submitting) {
            if (p->target.queue) rl_completions_unreserve(p->target.queue);
        } else {
            rl_result none;
            memset(&none, 0, sizeof none);
            deliver(c, p, rc, msg, &none);
        }
        rl_fail(rc, "%s", msg);
    }
    return submitting ? rc : RL_OK;
}

int rl_lease_submit(rl_client *c, const rl_request *req, uint64_t tag, const rl_target *target)
{
    rl_leases *t = c->leases;
    int64_t now = rl_now_ms(), want = 0;
    rl_give_backs g;
    rl_result res;
    rl_parked p, *waiting = NULL;
    int rc;
    if (target->queue && (rc = rl_completions_reserve(target->queue))) return rc;
    memset(&p, 0, sizeof p);
    p.tag = tag;
    p.target = *target;
    p.permits = req->permits;
    p.capacity = rl_spec_capacity(&req->spec);
    p.op = req->op;
    rl_stats_begin(c, req->name, &p.stats);
    rl_give_backs_init(&g, c);
    pthread_mutex_lock(&t->mutex);
    rl_lease *e = rl_lease_entry(t, req, now, 1);
    rl_lease_step s = e ? rl_lease_decide(e, req->op, req->permits, now, NULL, &res, &want, &g.carrier) : STEP_PLAIN;
    /* parked: in no particular order, each is its own decision */
    if (s == STEP_BUSY && (waiting = malloc(sizeof *waiting))) {
        *waiting = p;
        waiting->next = e->parked;
        e->parked = waiting;
    }
    pthread_mutex_unlock(&t->mutex);
    rl_lease_send_all(c, g.list);
    switch (s) {
    case STEP_LOCAL:
        deliver(c, &p, RL_OK, "", &res);
        return RL_OK;
    case STEP_FETCH:
        return start_async_fetch(c, e, &p, want, 1);
    case STEP_BUSY:
        if (waiting) return RL_OK;
        rc = rl_fail(RL_ERR_NOMEM, "out of memory");
        break;
    default:
        rc = RL_LEASE_NOT_TAKEN;
    }
    if (target->queue) rl_completions_unreserve(target->queue);
    return rc;
}

int rl_lease_try(rl_client *c, const rl_request *req, rl_result *out)
{
    rl_leases *t = c->leases;
    rl_stats_mark mark;
    int64_t now = rl_now_ms();
    rl_stats_begin(c, req->name, &mark);
    pthread_mutex_lock(&t->mutex);
    rl_lease *e = rl_lease_entry(t, req, now, 0);
    int decided = e && rl_lease_decide_local(e, req->op, req->permits, now, out);
    pthread_mutex_unlock(&t->mutex);
    if (decided) rl_stats_end(&mark, RL_OK, out);
    return decided;
}

/* The I/O thread (r's lease_ended): r's LEASE failed with status (timeout,
 * connection, closing, a Redis error), or its reply came. Returns 1 when r
 * was sent again (a plain acquire: the block is smaller than its permits);
 * else r holds its decision (r->decided) and the caller completes it. */
static int fetch_ended(rl_async *a, rl_areq *r, int status, const redisReply *reply)
{
    rl_client *c = a->client;
    rl_lease *e = r->lease;
    int wake = 0;
    r->lease = NULL;
    if (status) {
        rl_lease_fetch_failed(c, e, status);
        return 0;
    }
    pthread_mutex_lock(&c->leases->mutex);
    rl_lease_got g = rl_lease_fetched_locked(c, e, RL_OK, reply, r->lease_sent_ms, r->lease_op, r->permits, &r->result, &wake);
    pthread_mutex_unlock(&c->leases->mutex);
    r->decided = 1;
    r->decided_status = g == GOT_ERROR ? e->fetch_status : RL_OK;
    if (g == GOT_PLAIN) {
        rl_request req;
        rl_lease_request(e, &req, r->lease_op, r->permits, 0);
        rl_cmd_free(&r->cmd);
        rl_build_decision(&r->cmd, c, &req);
        r->decided = 0;
    }
    rl_lease_serve_parked(c, e, wake);
    if (g != GOT_PLAIN) return 0;
    rl_async_dispatch(a, r);
    return 1;
}

/* ---- a reset ------------------------------------------------------------------- */

static void reset_done(rl_client *c, const rl_areq *r)
{
    const char *name = r->reset_entity;
    rl_leases_end(c, name, name + strlen(name) + 1, RL_LEASES_DROP);
}

/* As the blocking reset does around its DEL. */
int rl_lease_reset_begin(rl_client *c, rl_areq *r, const char *name, const char *id)
{
    size_t n = strlen(name) + 1, m = strlen(id) + 1;
    if (!(r->reset_entity = malloc(n + m))) return rl_fail(RL_ERR_NOMEM, "out of memory");
    memcpy(r->reset_entity, name, n);
    memcpy(r->reset_entity + n, id, m);
    r->reset_done = reset_done;
    rl_leases_end(c, name, id, RL_LEASES_DROP);
    return RL_OK;
}
