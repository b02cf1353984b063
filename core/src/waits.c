/* Asynchronous waits (rl_submit_semaphore_acquire, rl_submit_queue_pop...):
 * semaphore / lock acquires and queue pops with a timeout wait on the I/O
 * thread between tries, holding no thread. Each server has one subscriber
 * connection for every wait's wake-up channel; a wait tries again when its
 * channel gets a message, when the subscription is confirmed (a release may
 * have come before it), at its next check-in, or at its end. Without a
 * subscription (a failover, a slot that moved) a wait polls once a second.
 * Timed acquires (acquire_wait.c) sleep among them between their tries. */
#include <stdlib.h>
#include <string.h>

#include "async.h"

static void channel_forget(rl_aconn *ac, rl_achannel *ch)
{
    for (rl_achannel **p = &ac->channels; *p; p = &(*p)->next)
        if (*p == ch) {
            *p = ch->next;
            break;
        }
    free(ch->name);
    free(ch);
}

int rl_wait_armed(const rl_await *w)
{
    return w->chan && w->sub->conn && w->chan->subscribed && !w->chan->unacked;
}

void rl_wait_sub_send(rl_async *a, rl_aconn *ac, rl_achannel *ch, int on)
{
    int sharded = a->client->url.mode == RL_MODE_CLUSTER;
    const char *argv[2] = {on ? (sharded ? "SSUBSCRIBE" : "SUBSCRIBE") : (sharded ? "SUNSUBSCRIBE" : "UNSUBSCRIBE"),
                           ch->name};
    rl_append_command(ac->conn->ctx, 2, argv, NULL);
    ch->unacked++;
    ch->subscribed = on;
}

static void sub_dial(rl_async *a, rl_aconn *ac)
{
    if (ac->conn || ac->connecting || a->stopping) return;
    pthread_mutex_lock(&ac->node->mutex);
    int rc = rl_backoff_check(&ac->node->backoff, rl_now_ms());
    pthread_mutex_unlock(&ac->node->mutex);
    if (rc) return; /* the waits poll meanwhile */
    ac->connecting = 1;
    rl_async_dial(a, ac);
}

/* Subscribes (once per server and channel) for r's wake-ups. */
static void channel_ref(rl_async *a, rl_areq *r)
{
    rl_await *w = r->wait;
    rl_node *node;
    int due = 0;
    if (w->chan) return;
    if (rl_route_cached(a->client, rl_key_slot(w->channel, strlen(w->channel)), &node, &due)) {
        if (due) rl_async_want_discovery(a);
        return; /* it polls */
    }
    rl_aconn *ac = rl_async_find_conn(a, node, 1);
    if (!ac) return;
    rl_achannel *ch = ac->channels;
    while (ch && strcmp(ch->name, w->channel) != 0) ch = ch->next;
    if (!ch) {
        if (!(ch = calloc(1, sizeof *ch)) || !(ch->name = strdup(w->channel))) {
            free(ch);
            return;
        }
        ch->next = ac->channels;
        ac->channels = ch;
    }
    ch->refs++;
    w->sub = ac;
    w->chan = ch;
    if (!ac->conn) sub_dial(a, ac);
    else if (!ch->subscribed) rl_wait_sub_send(a, ac, ch, 1);
}

static void channel_unref(rl_async *a, rl_await *w)
{
    rl_aconn *ac = w->sub;
    rl_achannel *ch = w->chan;
    if (!ch) return;
    w->sub = NULL;
    w->chan = NULL;
    if (--ch->refs > 0) return;
    if (ac->conn && ch->subscribed) rl_wait_sub_send(a, ac, ch, 0);
    if (!ch->unacked && !ch->subscribed) channel_forget(ac, ch);
}

/* Something changed for ch: its sleeping waits try now, a try in flight
 * tries once more when its reply says no. */
static void wake_waits(rl_async *a, const rl_achannel *ch)
{
    for (rl_areq *r = a->waits; r; r = r->wait->next) {
        if (r->wait->chan != ch) continue;
        if (r->wait->sleeping) r->retry_at_ms = 0;
        else r->wait->woken = 1;
    }
}

/* One message on a subscriber connection; 0: not one we understand. */
static int wakeup(rl_async *a, rl_aconn *ac, const redisReply *m)
{
    if (m->type != REDIS_REPLY_ARRAY || m->elements < 3 || m->element[0]->type != REDIS_REPLY_STRING ||
        m->element[1]->type != REDIS_REPLY_STRING)
        return 0;
    const char *what = m->element[0]->str;
    if (what[0] == 's' && what[1] != 'u') what++; /* the sharded forms: smessage, ssubscribe, sunsubscribe */
    else if (!strcmp(what, "sunsubscribe")) what++;
    rl_achannel *ch = ac->channels;
    while (ch && (strlen(ch->name) != m->element[1]->len || memcmp(ch->name, m->element[1]->str, m->element[1]->len)))
        ch = ch->next;
    if (!ch) return 1; /* forgotten meanwhile */
    if (!strcmp(what, "message")) {
        wake_waits(a, ch);
    } else if (!strcmp(what, "subscribe")) {
        if (ch->unacked) ch->unacked--;
        if (!ch->unacked && ch->subscribed) wake_waits(a, ch);
    } else if (!strcmp(what, "unsubscribe")) {
        if (ch->unacked) ch->unacked--;
        else ch->subscribed = 0; /* the server dropped it (its slot moved): its waits poll */
        if (!ch->refs && !ch->unacked && !ch->subscribed) channel_forget(ac, ch);
    }
    return 1;
}

void rl_wait_read(rl_async *a, rl_aconn *ac)
{
    if (rl_conn_buffer_read(ac->conn) != REDIS_OK) {
        rl_conn_error(ac->conn, "read wake-ups");
        rl_async_conn_drop(a, ac, RL_ERR_CONNECTION);
        return;
    }
    for (;;) {
        void *m = NULL;
        if (redisReaderGetReply(ac->conn->ctx->reader, &m) != REDIS_OK) {
            rl_fail(RL_ERR_PROTOCOL, "protocol error on the subscriber connection");
            rl_async_conn_drop(a, ac, RL_ERR_PROTOCOL);
            return;
        }
        if (!m) return;
        int understood = wakeup(a, ac, m);
        rl_reply_free(m);
        if (!understood) { /* an error (a MOVED for SSUBSCRIBE): poll, subscribe again later */
            rl_fail(RL_ERR_PROTOCOL, "unexpected reply on the subscriber connection");
            rl_async_conn_drop(a, ac, RL_ERR_PROTOCOL);
            return;
        }
    }
}

void rl_wait_begin(rl_async *a, rl_areq *r)
{
    rl_await *w = r->wait;
    w->prev = NULL;
    w->next = a->waits;
    if (a->waits) a->waits->wait->prev = r;
    a->waits = r;
    w->linked = 1;
}

/* A command of ours whose reply nobody waits for: leave, release, push back. */
static rl_areq *cleanup_request(rl_async *a, rl_req_kind kind)
{
    if (a->stopping) return NULL;
    rl_areq *r = rl_async_req_new(kind);
    if (!r) return NULL;
    r->silent = 1;
    r->deadline_ms = rl_now_ms() + a->client->options.command_timeout_ms;
    return r;
}

/* A semaphore op on r's permit: leave the queue (those behind move up), or
 * release a grant its caller will not get. At worst (no memory, Redis gone)
 * the waiter drops out after RL_WAITER_TTL_MS and the permit at its lease's end. */
static void sem_cleanup(rl_async *a, rl_areq *r, const char *op)
{
    rl_areq *c = cleanup_request(a, REQ_DONE_FLAG);
    if (!c) return;
    if (rl_build_sem_call(&c->cmd, a->client, r->wait->kind, r->wait->name, op, r->permit_id, 1, 0, 0)) {
        rl_async_req_free(c);
        return;
    }
    rl_async_dispatch(a, c);
}

/* Messages taken for a pop nobody will receive go back, due at once. */
static void push_back(rl_async *a, rl_areq *r)
{
    rl_messages *m = &r->wait->taken;
    for (size_t i = 0; i < m->count; i++) {
        rl_areq *c = cleanup_request(a, REQ_PUSH);
        if (!c) break;
        if (rl_build_queue_push(&c->cmd, a->client, r->wait->name, m->items[i], m->lens[i], 0)) {
            rl_async_req_free(c);
            continue;
        }
        rl_async_dispatch(a, c);
    }
    rl_messages_free(m);
}

/* r completes with status (it may still be on the wire: timed out). */
void rl_wait_ended(rl_async *a, rl_areq *r, int status)
{
    rl_await *w = r->wait;
    if (w->linked) {
        if (w->prev) w->prev->wait->next = w->next;
        else a->waits = w->next;
        if (w->next) w->next->wait->prev = w->prev;
        w->linked = 0;
    }
    channel_unref(a, w);
    if (status != RL_OK && w->queued) {
        sem_cleanup(a, r, "leave");
        w->queued = 0;
    }
}

/* A reply for a wait that completed already (timed out): what it got goes back. */
void rl_wait_late_reply(rl_async *a, rl_areq *r, const redisReply *reply)
{
    int granted = 0;
    int64_t fence, next_in;
    if (r->kind == REQ_ACQUIRE) {
        if (!rl_decode_sem_acquire(reply, &granted, &fence, &next_in) && granted) sem_cleanup(a, r, "release");
    } else {
        rl_decode_queue_pop(reply, &r->wait->taken, &next_in);
        push_back(a, r);
    }
}

/* A try's reply: the wait completes, or sleeps until a wake-up, its next
 * check-in or its end. */
void rl_wait_reply(rl_async *a, rl_areq *r, const redisReply *reply)
{
    rl_await *w = r->wait;
    int64_t now = rl_now_ms(), next_in = -1, fence;
    int granted = 0, rc;
    if (r->kind == REQ_ACQUIRE) rc = rl_decode_sem_acquire(reply, &granted, &fence, &next_in);
    else granted = !(rc = rl_decode_queue_pop(reply, &w->taken, &next_in)) && w->taken.count > 0;
    if (rc) {
        rl_async_finish(a, r, rc, NULL);
        return;
    }
    if (w->cancelled) {
        if (granted && r->kind == REQ_ACQUIRE) sem_cleanup(a, r, "release");
        if (granted && r->kind == REQ_POP) push_back(a, r);
        rl_fail(RL_ERR_CANCELLED, "wait cancelled");
        rl_async_finish(a, r, RL_ERR_CANCELLED, NULL);
        return;
    }
    if (granted || now >= w->until_ms) {
        if (!granted && w->queued) {
            sem_cleanup(a, r, "leave");
            w->queued = 0;
        }
        rl_async_finish(a, r, RL_OK, reply);
        return;
    }
    if (r->kind == REQ_ACQUIRE && !w->queued) { /* later tries keep a place in the queue */
        rl_cmd_free(&r->cmd);
        if ((rc = rl_build_sem_call(&r->cmd, a->client, w->kind, w->name, "acquire", r->permit_id, w->max, w->lease,
                                    1))) {
            rl_async_finish(a, r, rc, NULL);
            return;
        }
        w->queued = 1;
    }
    channel_ref(a, r);
    int64_t left = w->until_ms - now, pause;
    if (r->kind == REQ_ACQUIRE) {
        pause = RL_WAITER_TTL_MS / 3; /* check in, or drop out of the queue */
        if (next_in >= 0 && next_in + 1 < pause) pause = next_in + 1;
    } else {
        pause = next_in >= 0 ? next_in : left;
        if (!w->armed && pause > 1000) pause = 1000; /* no wake-up may come: poll */
    }
    if (pause > left) pause = left;
    if (w->woken || (!w->armed && rl_wait_armed(w))) pause = 0;
    r->retry_at_ms = now + pause;
    w->sleeping = 1;
    list_push(&a->sleepers, r);
}

static int tag_order(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

/* rl_cancel's tags (taken with the submissions they follow, so none is
 * missed): sleeping waits complete now, tries in flight when they answer.
 * Frees tags. */
void rl_wait_cancels(rl_async *a, uint64_t *tags, size_t n)
{
    int any_sleeping = 0;
    if (n) qsort(tags, n, sizeof *tags, tag_order);
    for (rl_areq *r = a->waits; r && n; r = r->wait->next)
        if (!r->wait->cancelled && bsearch(&r->tag, tags, n, sizeof *tags, tag_order)) {
            r->wait->cancelled = 1;
            any_sleeping |= r->wait->sleeping;
        }
    free(tags);
    if (!any_sleeping) return;
    rl_areq_list still = {NULL, NULL};
    rl_areq *r;
    while ((r = list_pop(&a->sleepers))) {
        if (!r->wait->cancelled) {
            list_push(&still, r);
            continue;
        }
        r->wait->sleeping = 0;
        rl_fail(RL_ERR_CANCELLED, "wait cancelled");
        rl_async_finish(a, r, RL_ERR_CANCELLED, NULL);
    }
    a->sleepers = still;
}

/* The subscriber connection broke: nothing is subscribed any more, and the
 * waits poll until it is again. */
void rl_wait_sub_lost(rl_async *a, rl_aconn *ac)
{
    for (rl_achannel *ch = ac->channels, *next; ch; ch = next) {
        next = ch->next;
        ch->unacked = ch->subscribed = 0;
        if (!ch->refs) channel_forget(ac, ch);
    }
    int64_t poll_at = rl_now_ms() + 1000;
    for (rl_areq *r = a->waits; r; r = r->wait->next)
        if (r->wait->sub == ac && r->wait->sleeping && r->retry_at_ms > poll_at) r->retry_at_ms = poll_at;
}

/* Sleeping waits whose time came try again; lost subscriptions reconnect
 * (the node's back-off paces it). Returns the next wake-up time, or -1. */
int64_t rl_wait_expire(rl_async *a, int64_t now)
{
    int64_t next = -1;
    rl_areq_list still = {NULL, NULL};
    rl_areq *r;
    while ((r = list_pop(&a->sleepers))) {
        int64_t at = r->retry_at_ms;
        if (at <= now && r->wait->timed) {
            r->wait->timed(a, r);
            continue;
        }
        if (at <= now) {
            r->wait->sleeping = 0;
            r->deadline_ms = at = now + a->client->options.command_timeout_ms;
            r->redirects = 0;
            r->pause_ms = 0;
            rl_async_dispatch(a, r);
        } else {
            list_push(&still, r);
        }
        if (next < 0 || at < next) next = at;
    }
    a->sleepers = still;
    for (int i = 0; i < a->nconns; i++) {
        rl_aconn *ac = a->conns[i];
        if (!ac->sub || ac->conn || ac->connecting) continue;
        for (rl_achannel *ch = ac->channels; ch; ch = ch->next)
            if (ch->refs) {
                sub_dial(a, ac);
                break;
            }
    }
    return next;
}
