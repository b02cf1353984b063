/* Blocking callers that overlap share batch calls (flat combining). At most
 * pool_size plain decisions of a client are out at once (a pooled
 * connection each); a caller that finds them out queues instead of waiting
 * for a connection, with the command its decision's caller (limiter.c)
 * built. When a call comes back, the newest caller queued becomes the next
 * leader: it takes its own command and the oldest queued (up to max_batch
 * in all) and runs them through rl_run_each, the blocking engine's one
 * path (batch calls of limit.lua, redirects, NOSCRIPT), so Redis's cost per
 * decision falls as the queue grows while the calls out keep it busy. A
 * caller alone never queues: the direct round trip, no added latency. Each
 * caller waits for its own result until its own deadline; one that leaves
 * (its deadline passed, its thread cancelled) touches nobody else.
 * docs/benchmarks.md measures this against handing callers to the I/O
 * thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

enum { QUEUED, LEADING, TAKEN, DONE };

struct rl_combined {
    rl_combined *prev, *next; /* in the queue, oldest first */
    pthread_cond_t woken;
    int state;
    int refs; /* the caller, and the leader that took it: the last frees (atomic) */
    rl_cmd cmd;
    redisReply *reply; /* DONE: set exactly when outcome.status is RL_OK */
    rl_outcome outcome;
};

void rl_combining_init(rl_combining *q)
{
    pthread_mutex_init(&q->mutex, NULL);
    q->head = q->last = NULL;
    q->leaders = 0;
}

void rl_combining_destroy(rl_combining *q)
{
    pthread_mutex_destroy(&q->mutex);
}

/* In a child after fork: the queued callers are the parent's threads. */
void rl_combining_start_afresh(rl_combining *q)
{
    for (rl_combined *w = q->head; w; w = w->next) rl_fork_leave(w);
    rl_combining_init(q);
}

static void release(rl_combined *w)
{
    if (__atomic_sub_fetch(&w->refs, 1, __ATOMIC_ACQ_REL)) return;
    if (w->state == DONE && !w->outcome.status) rl_reply_free(w->reply);
    rl_cmd_free(&w->cmd);
    pthread_cond_destroy(&w->woken);
    free(w);
}

static void unlink_queued(rl_combining *q, rl_combined *w)
{
    if (w->prev) w->prev->next = w->next;
    else q->head = w->next;
    if (w->next) w->next->prev = w->prev;
    else q->last = w->prev;
    w->prev = w->next = NULL;
}

/* q->mutex held: a call of the client's is back. The newest queued caller
 * not already called to lead leads next: its deadline is the latest, so the
 * batch's wait for its reply (command_timeout_ms from its sending) ends
 * after every deadline in it, and the leader's own wait in the queue was the
 * shortest. Else one fewer is out. */
void rl_combine_pass(rl_combining *q)
{
    rl_combined *next = q->last;
    while (next && next->state != QUEUED) next = next->prev; /* at most the leaders' count skipped */
    if (!next) {
        q->leaders--;
        return;
    }
    next->state = LEADING;
    pthread_cond_signal(&next->woken);
}

/* One leader's batch, on the heap: max_batch commands do not fit a
 * thread's stack everywhere (2 kB each). */
typedef struct {
    rl_combined **taken;
    rl_cmd *cmds;
    redisReply **replies;
    rl_outcome *outcomes;
} batch;

static void *batch_new(batch *b, size_t n)
{
    char *p = malloc(n * (sizeof *b->taken + sizeof *b->cmds + sizeof *b->replies + sizeof *b->outcomes));
    if (!p) return NULL;
    b->cmds = (rl_cmd *)p; /* the most aligned first */
    b->outcomes = (rl_outcome *)(b->cmds + n);
    b->replies = (redisReply **)(b->outcomes + n);
    b->taken = (rl_combined **)(b->replies + n);
    return p;
}

static void take(batch *b, size_t i, rl_combined *w)
{
    w->state = TAKEN;
    __atomic_add_fetch(&w->refs, 1, __ATOMIC_RELAXED);
    b->cmds[i] = w->cmd; /* its arguments point into w, kept by our reference */
    b->taken[i] = w;
}

/* q->mutex held on entry and return: runs self's decision and the oldest
 * queued as one rl_run_each, hands out the replies and passes the lead. Not
 * cancellable meanwhile: the others' replies depend on it. */
static void lead(rl_client *c, rl_combining *q, rl_combined *self)
{
    batch b;
    size_t m = 0, most = (size_t)c->options.max_batch;
    void *block = batch_new(&b, most);
    if (!block) {
        /* out of memory: the leader fails alone, the next one tries */
        unlink_queued(q, self);
        self->outcome.status = RL_ERR_NOMEM;
        snprintf(self->outcome.error, sizeof self->outcome.error, "out of memory");
        self->state = DONE;
        rl_combine_pass(q);
        return;
    }
    /* self, then the oldest queued; another called to lead leads its own */
    unlink_queued(q, self);
    take(&b, m++, self);
    for (rl_combined *w = q->head, *next; w && m < most; w = next) {
        next = w->next;
        if (w->state != QUEUED) continue;
        unlink_queued(q, w);
        take(&b, m++, w);
    }
    int cancel_state;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
    pthread_mutex_unlock(&q->mutex);
    rl_run_each(c, b.cmds, m, b.replies, b.outcomes);
    for (size_t i = 0; i < m; i++) { /* read once DONE, under the mutex */
        b.taken[i]->outcome = b.outcomes[i];
        b.taken[i]->reply = b.outcomes[i].status ? NULL : b.replies[i];
    }
    pthread_mutex_lock(&q->mutex);
    for (size_t i = 0; i < m; i++) b.taken[i]->state = DONE;
    rl_combine_pass(q);
    pthread_mutex_unlock(&q->mutex);
    /* woken with the mutex free: none wakes only to wait for it */
    for (size_t i = 0; i < m; i++) {
        pthread_cond_signal(&b.taken[i]->woken);
        release(b.taken[i]);
    }
    pthread_setcancelstate(cancel_state, NULL);
    free(block);
    pthread_mutex_lock(&q->mutex);
}

typedef struct {
    rl_combining *q;
    rl_combined *w;
} leaving;

/* the caller leaves before its decision came (q->mutex held): out of the
 * queue if still in it, the lead passed on if it was its turn */
static void leave(void *arg)
{
    leaving *l = arg;
    if (l->w->state == QUEUED) unlink_queued(l->q, l->w);
    if (l->w->state == LEADING) {
        unlink_queued(l->q, l->w);
        rl_combine_pass(l->q);
    }
    release(l->w);
    pthread_mutex_unlock(&l->q->mutex);
}

static void queued_until_done(rl_client *c, rl_combining *q, rl_combined *w, int64_t deadline_ms)
{
    leaving l = {q, w};
    pthread_cleanup_push(leave, &l);
    for (int64_t left;;) {
        if (w->state == DONE || (left = deadline_ms - rl_now_ms()) <= 0) break;
        if (w->state == LEADING) {
            lead(c, q, w);
            continue;
        }
        struct timespec until = rl_realtime_after((int)left);
        pthread_cond_timedwait(&w->woken, &q->mutex, &until);
    }
    pthread_cleanup_pop(0);
}

int rl_combine_enter(rl_client *c)
{
    rl_combining *q = &c->combining;
    pthread_mutex_lock(&q->mutex);
    int alone = !q->head && q->leaders < c->options.pool_size;
    q->leaders += alone;
    pthread_mutex_unlock(&q->mutex);
    return alone ? RL_COMBINE_ALONE : RL_COMBINE_QUEUE;
}

int rl_combine_decide(rl_client *c, rl_cmd *cmd, rl_result *result, rl_outcome *outcome)
{
    rl_combining *q = &c->combining;
    rl_combined *w = cmd->failed ? NULL : calloc(1, sizeof *w);
    if (!w) {
        rl_cmd_free(cmd);
        return RL_COMBINE_UNCOUNTED;
    }
    rl_cmd_move(&w->cmd, cmd);
    pthread_cond_init(&w->woken, NULL);
    w->refs = 1;
    int64_t deadline_ms = rl_now_ms() + c->options.command_timeout_ms;
    pthread_mutex_lock(&q->mutex);
    if (!q->head && q->leaders < c->options.pool_size) {
        q->leaders++; /* the calls out came back meanwhile */
        w->state = LEADING;
    }
    w->prev = q->last;
    if (q->last) q->last->next = w;
    else q->head = w;
    q->last = w;
    queued_until_done(c, q, w, deadline_ms);
    if (w->state != DONE) {
        const char *why = w->state == TAKEN ? "sent in a batch call, no reply" : "queued behind other calls, not sent";
        outcome->status = rl_fail(RL_ERR_TIMEOUT, "%s within %d ms", why, c->options.command_timeout_ms);
        snprintf(outcome->error, sizeof outcome->error, "%s", rl_errmsg());
        leaving l = {q, w};
        leave(&l);
        return RL_COMBINE_DECIDED;
    }
    pthread_mutex_unlock(&q->mutex); /* done: nobody writes w any more */
    if ((*outcome = w->outcome).status) {
        rl_fail(outcome->status, "%s", outcome->error);
    } else if (rl_decode_result(w->reply, result)) {
        outcome->status = RL_ERR_PROTOCOL;
        snprintf(outcome->error, sizeof outcome->error, "%s", rl_errmsg());
    }
    release(w);
    return RL_COMBINE_DECIDED;
}

void rl_combine_done(rl_client *c)
{
    rl_combining *q = &c->combining;
    pthread_mutex_lock(&q->mutex);
    rl_combine_pass(q);
    pthread_mutex_unlock(&q->mutex);
}
