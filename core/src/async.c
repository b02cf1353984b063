/* The asynchronous core's engine: one I/O thread per client with one
 * connection per server, requests pipelined as they come, and a dialer thread
 * for what may block (see rl_submit in ratelimit.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <hiredis/sds.h>

#include "async.h"

/* Wakes the I/O thread out of epoll_wait. */
void rl_async_wake(rl_async *a)
{
    uint64_t one = 1;
    if (write(a->wake_fd, &one, sizeof one) < 0) {
        /* full counter: a wake-up is pending anyway */
    }
}

/* ---- completing ------------------------------------------------------------- */

void rl_async_req_free(areq *r)
{
    if (r->wait) {
        free(r->wait->name);
        free(r->wait->channel);
        rl_messages_free(&r->wait->taken);
        free(r->wait);
    }
    rl_cmd_free(&r->cmd);
    free(r);
}

static void wait_ended(rl_async *a, areq *r, int status);

static void complete(rl_async *a, areq *r, int status, const redisReply *reply)
{
    rl_completion c;
    if (r->silent) return;
    if (r->wait) wait_ended(a, r, status);
    memset(&c, 0, sizeof c);
    c.tag = r->tag;
    c.status = status;
    if (status == RL_OK) {
        int granted = 0;
        int64_t first_end;
        switch (r->kind) {
        case REQ_ACQUIRE:
            c.status = rl_decode_sem_acquire(reply, &granted, &c.fencing_token, &first_end);
            c.acquired = granted;
            if (granted) memcpy(c.permit_id, r->permit_id, sizeof c.permit_id);
            else c.fencing_token = 0;
            break;
        case REQ_DONE_FLAG:
            c.status = rl_reply_int(reply, 0, &c.value);
            break;
        case REQ_PUSH:
            c.status = rl_decode_integer(reply, "delay_queue push", &c.value);
            break;
        case REQ_POP:
            break;
        default:
            c.status = rl_decode_result(reply, &c.result);
        }
    }
    if (r->kind == REQ_POP) { /* taken from Redis: handed over even with an error */
        c.messages = r->wait->taken;
        memset(&r->wait->taken, 0, sizeof r->wait->taken);
    }
    if (c.status != RL_OK && !c.error[0]) snprintf(c.error, sizeof c.error, "%s", rl_errmsg());
    /* the on_error policy decides rate limits only, as in the blocking calls */
    if ((c.status == RL_ERR_CONNECTION || c.status == RL_ERR_TIMEOUT) && r->kind == REQ_DECISION &&
        a->client->options.on_error != RL_ON_ERROR_RAISE) {
        rl_fallback_result(a->client, r->capacity, r->permits, &c.result);
        c.status = RL_OK; /* the message still says what went wrong */
    }
    rl_stats_end(&r->stats, c.status, &c.result);
    if (r->target.queue) rl_completions_push(r->target.queue, &c);
    else r->target.fn(r->target.ctx, &c);
}

/* A decision is done: completed unless it already was (timed out). */
static void finish(rl_async *a, areq *r, int status, const redisReply *reply)
{
    if (r->kind <= REQ_POP && !r->abandoned) complete(a, r, status, reply);
    rl_async_req_free(r);
}

/* Finishes everything on l with status and message. */
static void fail_list(rl_async *a, areq_list *l, int status, const char *message)
{
    areq *r;
    while ((r = list_pop(l))) {
        rl_fail(status, "%s", message);
        finish(a, r, status, NULL);
    }
}

/* ---- connections -------------------------------------------------------------- */

/* The command connection to node, or (sub) its subscriber connection. */
static aconn *find_conn(rl_async *a, rl_node *node, int sub)
{
    for (int i = 0; i < a->nconns; i++)
        if (a->conns[i]->node == node && a->conns[i]->sub == sub) return a->conns[i];
    if (a->nconns == a->cap_conns) {
        int cap = a->cap_conns ? a->cap_conns * 2 : 4;
        aconn **grown = realloc(a->conns, (size_t)cap * sizeof *grown);
        if (!grown) return NULL;
        a->conns = grown;
        a->cap_conns = cap;
    }
    aconn *ac = calloc(1, sizeof *ac);
    if (!ac) return NULL;
    ac->node = node;
    ac->sub = sub;
    a->conns[a->nconns++] = ac;
    return ac;
}

static aconn *conn_for(rl_async *a, rl_node *node)
{
    return find_conn(a, node, 0);
}

static void channel_forget(aconn *ac, achannel *ch)
{
    for (achannel **p = &ac->channels; *p; p = &(*p)->next)
        if (*p == ch) {
            *p = ch->next;
            break;
        }
    free(ch->name);
    free(ch);
}

/* Fails everything in flight on ac with status: it may have run, so none of
 * it is ever sent again. */
static void conn_drop(rl_async *a, aconn *ac, int status)
{
    char msg[200];
    snprintf(msg, sizeof msg, "%s", rl_errmsg());
    if (ac->conn) {
        epoll_ctl(a->epoll_fd, EPOLL_CTL_DEL, ac->conn->ctx->fd, NULL);
        rl_conn_close(ac->conn);
        ac->conn = NULL;
    }
    ac->loading = 0;
    ac->polling_out = 0;
    ac->resent = 0;
    if (ac->sub) { /* nothing is subscribed any more: waits poll until it is again */
        for (achannel *ch = ac->channels, *next; ch; ch = next) {
            next = ch->next;
            ch->unacked = ch->subscribed = 0;
            if (!ch->refs) channel_forget(ac, ch);
        }
        for (areq *r = a->waits; r; r = r->wait->next)
            if (r->wait->sub == ac && r->wait->sleeping && r->retry_at_ms > rl_monotonic_ms() + 1000)
                r->retry_at_ms = rl_monotonic_ms() + 1000;
        return;
    }
    fail_list(a, &ac->inflight, status, msg);
    if (status == RL_ERR_CONNECTION) rl_topology_suspect(a->client, ac->node);
}

/* A connection from the dialer joins the loop: from here on its socket never
 * blocks, the I/O thread waits in epoll. */
static int conn_attach(rl_async *a, aconn *ac, rl_conn *conn)
{
    redisContext *ctx = conn->ctx;
    ctx->flags &= ~REDIS_BLOCK;
    fcntl(ctx->fd, F_SETFL, fcntl(ctx->fd, F_GETFL) | O_NONBLOCK);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = ac};
    if (epoll_ctl(a->epoll_fd, EPOLL_CTL_ADD, ctx->fd, &ev) < 0) {
        rl_conn_close(conn);
        return rl_fail(RL_ERR_CONNECTION, "epoll: %s", strerror(errno));
    }
    ac->conn = conn;
    ac->last_read_ms = rl_monotonic_ms();
    return RL_OK;
}

static void dial_request(rl_async *a, aconn *ac)
{
    dial *d = calloc(1, sizeof *d);
    if (!d) return; /* its requests time out */
    d->ac = ac;
    pthread_mutex_lock(&a->mutex);
    d->next = a->dial_jobs;
    a->dial_jobs = d;
    pthread_cond_signal(&a->dial_wanted);
    pthread_mutex_unlock(&a->mutex);
}

static void want_discovery(rl_async *a)
{
    if (a->discovering || rl_monotonic_ms() < a->discover_after_ms) return;
    a->discovering = 1;
    dial_request(a, NULL);
}

void rl_async_free_dials(rl_async *a)
{
    for (dial *d = a->dial_done, *next; d; d = next) {
        next = d->next;
        rl_conn_close(d->conn);
        free(d);
    }
    for (dial *d = a->dial_jobs, *next; d; d = next) {
        next = d->next;
        free(d);
    }
    a->dial_done = a->dial_jobs = NULL;
}

void *rl_async_dialer(void *arg)
{
    rl_async *a = arg;
    rl_client *c = a->client;
    pthread_mutex_lock(&a->mutex);
    for (;;) {
        while (!a->dial_jobs && !a->closing) pthread_cond_wait(&a->dial_wanted, &a->mutex);
        if (a->closing) break;
        dial *d = a->dial_jobs;
        a->dial_jobs = d->next;
        pthread_mutex_unlock(&a->mutex);
        if (d->ac) {
            rl_node *node = d->ac->node;
            d->status = rl_conn_open_data(c, node, &d->conn);
            pthread_mutex_lock(&node->mutex);
            rl_backoff_record(&node->backoff, d->status, c->options.reconnect_max_ms);
            pthread_mutex_unlock(&node->mutex);
        } else {
            rl_node *any;
            d->status = rl_route(c, -1, &any);
        }
        if (d->status) snprintf(d->error, sizeof d->error, "%s", rl_errmsg());
        pthread_mutex_lock(&a->mutex);
        d->next = a->dial_done;
        a->dial_done = d;
        a->sleeping = 0;
        rl_async_wake(a);
    }
    pthread_mutex_unlock(&a->mutex);
    return NULL;
}

static int channel_ready(const await *w)
{
    return w->chan && w->sub->conn && w->chan->subscribed && !w->chan->unacked;
}

static void append(aconn *ac, areq *r)
{
    r->sent_ms = rl_monotonic_ms();
    ac->resent += r->redirects > 0;
    if (r->wait) { /* a wake-up after this may concern this try */
        r->wait->armed = channel_ready(r->wait);
        r->wait->woken = 0;
    }
    redisAppendCommandArgv(ac->conn->ctx, r->cmd.argc, r->cmd.argv, r->cmd.lens);
    list_push(&ac->inflight, r);
}

/* An internal command (ASKING, SCRIPT LOAD) whose reply is read and dropped. */
static int append_internal(aconn *ac, req_kind kind, int argc, const char **argv, const size_t *lens)
{
    areq *r = calloc(1, sizeof *r);
    if (!r) return rl_fail(RL_ERR_NOMEM, "out of memory");
    rl_cmd_init(&r->cmd);
    r->kind = kind;
    r->sent_ms = rl_monotonic_ms();
    redisAppendCommandArgv(ac->conn->ctx, argc, argv, lens);
    list_push(&ac->inflight, r);
    return RL_OK;
}

static void send_to(rl_async *a, aconn *ac, areq *r)
{
    if (r->ask) {
        const char *asking[1] = {"ASKING"};
        if (append_internal(ac, REQ_ASKING, 1, asking, NULL)) {
            finish(a, r, RL_ERR_NOMEM, NULL);
            return;
        }
        r->ask = NULL;
    }
    append(ac, r);
}

/* Routes r and appends it to its server's output buffer, or parks it until
 * the dialer has connected that server or found where it lives. */
static void dispatch(rl_async *a, areq *r)
{
    rl_node *node = r->ask;
    int rc = RL_OK, due = 0;
    if (r->failed) { /* completed here, on the I/O thread, as every request is */
        rl_fail(r->failed, "%s", r->failure);
        finish(a, r, r->failed, NULL);
        return;
    }
    if (!node) {
        rc = rl_route_cached(a->client, r->cmd.slot, &node, &due);
        if (due) want_discovery(a);
        if (rc) {
            if (!due) goto fail;
            list_push(&a->unrouted, r);
            return;
        }
    }
    aconn *ac = conn_for(a, node);
    if (!ac) {
        rc = rl_fail(RL_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if (ac->conn) {
        send_to(a, ac, r);
        return;
    }
    if (!ac->connecting) {
        /* while the server is down, fail fast between attempts */
        pthread_mutex_lock(&node->mutex);
        rc = rl_backoff_check(&node->backoff, rl_monotonic_ms());
        pthread_mutex_unlock(&node->mutex);
        if (rc) {
            rl_topology_suspect(a->client, node);
            goto fail;
        }
        ac->connecting = 1;
        dial_request(a, ac);
    }
    list_push(&ac->pending, r);
    return;
fail:
    finish(a, r, rc, NULL);
}

/* ---- waits -------------------------------------------------------------------- */

/* Semaphore / lock acquires and queue pops with a timeout wait here, between
 * tries, holding no thread. Each server has one subscriber connection for
 * every wait's wake-up channel; a wait tries again when its channel gets a
 * message, when the subscription is confirmed (a release may have come
 * before it), at its next check-in, or at its end. Without a subscription
 * (a failover, a slot that moved) a wait polls once a second. */

static void sub_send(rl_async *a, aconn *ac, achannel *ch, int on)
{
    int sharded = a->client->url.mode == RL_MODE_CLUSTER;
    const char *argv[2] = {on ? (sharded ? "SSUBSCRIBE" : "SUBSCRIBE") : (sharded ? "SUNSUBSCRIBE" : "UNSUBSCRIBE"),
                           ch->name};
    redisAppendCommandArgv(ac->conn->ctx, 2, argv, NULL);
    ch->unacked++;
    ch->subscribed = on;
}

static void sub_dial(rl_async *a, aconn *ac)
{
    if (ac->conn || ac->connecting || a->stopping) return;
    pthread_mutex_lock(&ac->node->mutex);
    int rc = rl_backoff_check(&ac->node->backoff, rl_monotonic_ms());
    pthread_mutex_unlock(&ac->node->mutex);
    if (rc) return; /* the waits poll meanwhile */
    ac->connecting = 1;
    dial_request(a, ac);
}

/* Subscribes (once per server and channel) for r's wake-ups. */
static void channel_ref(rl_async *a, areq *r)
{
    await *w = r->wait;
    rl_node *node;
    int due = 0;
    if (w->chan) return;
    if (rl_route_cached(a->client, rl_key_slot(w->channel, strlen(w->channel)), &node, &due)) {
        if (due) want_discovery(a);
        return; /* it polls */
    }
    aconn *ac = find_conn(a, node, 1);
    if (!ac) return;
    achannel *ch = ac->channels;
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
    else if (!ch->subscribed) sub_send(a, ac, ch, 1);
}

static void channel_unref(rl_async *a, await *w)
{
    aconn *ac = w->sub;
    achannel *ch = w->chan;
    if (!ch) return;
    w->sub = NULL;
    w->chan = NULL;
    if (--ch->refs > 0) return;
    if (ac->conn && ch->subscribed) sub_send(a, ac, ch, 0);
    if (!ch->unacked && !ch->subscribed) channel_forget(ac, ch);
}

/* Something changed for ch: its sleeping waits try now, a try in flight
 * tries once more when its reply says no. */
static void wake_waits(rl_async *a, const achannel *ch)
{
    for (areq *r = a->waits; r; r = r->wait->next) {
        if (r->wait->chan != ch) continue;
        if (r->wait->sleeping) r->retry_at_ms = 0;
        else r->wait->woken = 1;
    }
}

/* One message on a subscriber connection; 0: not one we understand. */
static int wakeup(rl_async *a, aconn *ac, const redisReply *m)
{
    if (m->type != REDIS_REPLY_ARRAY || m->elements < 3 || m->element[0]->type != REDIS_REPLY_STRING ||
        m->element[1]->type != REDIS_REPLY_STRING)
        return 0;
    const char *what = m->element[0]->str;
    if (what[0] == 's' && what[1] != 'u') what++; /* the sharded forms: smessage, ssubscribe, sunsubscribe */
    else if (!strcmp(what, "sunsubscribe")) what++;
    achannel *ch = ac->channels;
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

static void read_wakeups(rl_async *a, aconn *ac)
{
    if (rl_conn_buffer_read(ac->conn) != REDIS_OK) {
        rl_conn_error(ac->conn, "read wake-ups");
        conn_drop(a, ac, RL_ERR_CONNECTION);
        return;
    }
    for (;;) {
        void *m = NULL;
        if (redisReaderGetReply(ac->conn->ctx->reader, &m) != REDIS_OK) {
            rl_fail(RL_ERR_PROTOCOL, "protocol error on the subscriber connection");
            conn_drop(a, ac, RL_ERR_PROTOCOL);
            return;
        }
        if (!m) return;
        int understood = wakeup(a, ac, m);
        freeReplyObject(m);
        if (!understood) { /* an error (a MOVED for SSUBSCRIBE): poll, subscribe again later */
            rl_fail(RL_ERR_PROTOCOL, "unexpected reply on the subscriber connection");
            conn_drop(a, ac, RL_ERR_PROTOCOL);
            return;
        }
    }
}

static void wait_begin(rl_async *a, areq *r)
{
    await *w = r->wait;
    w->prev = NULL;
    w->next = a->waits;
    if (a->waits) a->waits->wait->prev = r;
    a->waits = r;
    w->linked = 1;
}

/* A command of ours whose reply nobody waits for: leave, release, push back. */
static areq *cleanup_request(rl_async *a, req_kind kind)
{
    if (a->stopping) return NULL;
    areq *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->kind = kind;
    r->silent = 1;
    r->deadline_ms = rl_monotonic_ms() + a->client->options.command_timeout_ms;
    return r;
}

/* A semaphore op on r's permit: leave the queue (those behind move up), or
 * release a grant its caller will not get. At worst (no memory, Redis gone)
 * the waiter drops out after RL_WAITER_TTL_MS and the permit at its lease's end. */
static void sem_cleanup(rl_async *a, areq *r, const char *op)
{
    areq *c = cleanup_request(a, REQ_DONE_FLAG);
    if (!c) return;
    if (rl_build_sem_call(&c->cmd, a->client, r->wait->kind, r->wait->name, op, r->permit_id, 1, 0, 0)) {
        rl_async_req_free(c);
        return;
    }
    dispatch(a, c);
}

/* Messages taken for a pop nobody will receive go back, due at once. */
static void push_back(rl_async *a, areq *r)
{
    rl_messages *m = &r->wait->taken;
    for (size_t i = 0; i < m->count; i++) {
        areq *c = cleanup_request(a, REQ_PUSH);
        if (!c) break;
        if (rl_build_queue_push(&c->cmd, a->client, r->wait->name, m->items[i], m->lens[i], 0)) {
            rl_async_req_free(c);
            continue;
        }
        dispatch(a, c);
    }
    rl_messages_free(m);
}

/* r completes with status (it may still be on the wire: timed out). */
static void wait_ended(rl_async *a, areq *r, int status)
{
    await *w = r->wait;
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
static void wait_late_reply(rl_async *a, areq *r, const redisReply *reply)
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
static void wait_reply(rl_async *a, areq *r, const redisReply *reply)
{
    await *w = r->wait;
    int64_t now = rl_monotonic_ms(), next_in = -1, fence;
    int granted = 0, rc;
    if (r->kind == REQ_ACQUIRE) rc = rl_decode_sem_acquire(reply, &granted, &fence, &next_in);
    else granted = !(rc = rl_decode_queue_pop(reply, &w->taken, &next_in)) && w->taken.count > 0;
    if (rc) {
        finish(a, r, rc, NULL);
        return;
    }
    if (w->cancelled) {
        if (granted && r->kind == REQ_ACQUIRE) sem_cleanup(a, r, "release");
        if (granted && r->kind == REQ_POP) push_back(a, r);
        rl_fail(RL_ERR_CANCELLED, "wait cancelled");
        finish(a, r, RL_ERR_CANCELLED, NULL);
        return;
    }
    if (granted || now >= w->until_ms) {
        if (!granted && w->queued) {
            sem_cleanup(a, r, "leave");
            w->queued = 0;
        }
        finish(a, r, RL_OK, reply);
        return;
    }
    if (r->kind == REQ_ACQUIRE && !w->queued) { /* later tries keep a place in the queue */
        rl_cmd_free(&r->cmd);
        if ((rc = rl_build_sem_call(&r->cmd, a->client, w->kind, w->name, "acquire", r->permit_id, w->max, w->lease,
                                    1))) {
            finish(a, r, rc, NULL);
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
    if (w->woken || (!w->armed && channel_ready(w))) pause = 0;
    r->retry_at_ms = now + pause;
    w->sleeping = 1;
    list_push(&a->sleepers, r);
}

/* rl_cancel's tags: sleeping waits complete now, tries in flight when they answer. */
static void take_cancels(rl_async *a)
{
    pthread_mutex_lock(&a->mutex);
    size_t n = a->cancel_count;
    uint64_t *tags = n ? malloc(n * sizeof *tags) : NULL;
    if (tags) memcpy(tags, a->cancels, n * sizeof *tags);
    if (tags || !n) a->cancel_count = 0;
    pthread_mutex_unlock(&a->mutex);
    int any_sleeping = 0;
    for (size_t i = 0; i < n && tags; i++)
        for (areq *r = a->waits; r; r = r->wait->next)
            if (r->tag == tags[i] && !r->wait->cancelled) {
                r->wait->cancelled = 1;
                any_sleeping |= r->wait->sleeping;
            }
    free(tags);
    if (!any_sleeping) return;
    areq_list still = {NULL, NULL};
    areq *r;
    while ((r = list_pop(&a->sleepers))) {
        if (!r->wait->cancelled) {
            list_push(&still, r);
            continue;
        }
        r->wait->sleeping = 0;
        rl_fail(RL_ERR_CANCELLED, "wait cancelled");
        finish(a, r, RL_ERR_CANCELLED, NULL);
    }
    a->sleepers = still;
}

/* What the dialer finished: connections join, parked requests move on. */
static void dials_done(rl_async *a)
{
    pthread_mutex_lock(&a->mutex);
    dial *d = a->dial_done;
    a->dial_done = NULL;
    pthread_mutex_unlock(&a->mutex);
    while (d) {
        dial *next = d->next;
        areq *r;
        if (!d->ac) {
            areq_list parked = a->unrouted;
            a->unrouted.head = a->unrouted.tail = NULL;
            a->discovering = 0;
            if (d->status) {
                a->discover_after_ms = rl_monotonic_ms() + 25;
                fail_list(a, &parked, d->status, d->error);
            }
            while ((r = list_pop(&parked))) dispatch(a, r);
        } else {
            aconn *ac = d->ac;
            ac->connecting = 0;
            int rc = d->status ? rl_fail(d->status, "%s", d->error) : conn_attach(a, ac, d->conn);
            if (rc && (rc == RL_ERR_CONNECTION || rc == RL_ERR_TIMEOUT)) rl_topology_suspect(a->client, ac->node);
            if (rc) {
                char msg[200];
                snprintf(msg, sizeof msg, "%s", rl_errmsg());
                fail_list(a, &ac->pending, rc, msg);
            }
            while ((r = list_pop(&ac->pending))) send_to(a, ac, r);
            if (!rc && ac->sub)
                for (achannel *ch = ac->channels; ch; ch = ch->next)
                    if (ch->refs) sub_send(a, ac, ch, 1);
        }
        free(d);
        d = next;
    }
}

/* ---- replies ------------------------------------------------------------------ */

static void handle_reply(rl_async *a, aconn *ac, areq *r, redisReply *reply)
{
    char host[256];
    int slot = -1, port = 0;
    if (r->kind > REQ_POP) {
        /* loaded (or not): a later NOSCRIPT (SCRIPT FLUSH) loads it again */
        if (r->kind == REQ_SCRIPT_LOAD) ac->loading &= ~(1u << r->cmd.script);
        rl_async_req_free(r);
        return;
    }
    if (r->abandoned) {
        if (r->wait && reply->type == REDIS_REPLY_ARRAY) wait_late_reply(a, r, reply);
        rl_async_req_free(r);
        return;
    }
    if (rl_reply_is_noscript(reply) && r->cmd.script >= 0 && r->redirects < 16) {
        /* it did not run: load the script (one load queued per connection at
         * a time: replies come in order, so it runs before this resend) */
        unsigned bit = 1u << r->cmd.script;
        r->redirects++;
        if (!(ac->loading & bit)) {
            const rl_script_def *def = &rl_scripts[r->cmd.script];
            const char *argv[3] = {"SCRIPT", "LOAD", def->text};
            size_t lens[3] = {6, 4, def->length};
            if (append_internal(ac, REQ_SCRIPT_LOAD, 3, argv, lens)) {
                finish(a, r, RL_ERR_NOMEM, NULL);
                return;
            }
            ac->inflight.tail->cmd.script = r->cmd.script;
            ac->loading |= bit;
        }
        append(ac, r);
        return;
    }
    reply_kind kind = rl_classify_reply(a->client, reply, &slot, host, sizeof host, &port);
    if (kind == REPLY_FINAL) {
        if (reply->type == REDIS_REPLY_ERROR) {
            rl_fail(RL_ERR_REDIS, "%s", reply->str);
            finish(a, r, RL_ERR_REDIS, NULL);
        } else if (r->wait) {
            wait_reply(a, r, reply);
        } else {
            finish(a, r, RL_OK, reply);
        }
        return;
    }
    if (++r->redirects > 16) {
        rl_fail(RL_ERR_REDIS, "gave up after %d redirects and retries: %s", r->redirects - 1, reply->str);
        finish(a, r, RL_ERR_REDIS, NULL);
        return;
    }
    if (kind == REPLY_MOVED) {
        rl_cluster_moved(a->client, slot, host[0] ? host : ac->node->host, port);
        dispatch(a, r);
    } else if (kind == REPLY_ASK) {
        if (!(r->ask = rl_node_for(a->client, host[0] ? host : ac->node->host, port))) {
            finish(a, r, RL_ERR_NOMEM, NULL);
            return;
        }
        dispatch(a, r);
    } else {
        if (kind == REPLY_READONLY) rl_topology_suspect(a->client, ac->node);
        r->pause_ms = r->pause_ms ? (r->pause_ms < 100 ? r->pause_ms * 2 : 100) : 5;
        r->retry_at_ms = rl_monotonic_ms() + r->pause_ms;
        list_push(&a->waiting, r);
    }
}

static void read_replies(rl_async *a, aconn *ac)
{
    redisContext *ctx = ac->conn->ctx;
    if (rl_conn_buffer_read(ac->conn) != REDIS_OK) {
        rl_conn_error(ac->conn, "read reply");
        conn_drop(a, ac, RL_ERR_CONNECTION);
        return;
    }
    ac->last_read_ms = rl_monotonic_ms();
    for (;;) {
        void *reply = NULL;
        if (redisReaderGetReply(ctx->reader, &reply) != REDIS_OK) {
            rl_fail(RL_ERR_PROTOCOL, "protocol error: %s", ctx->reader->errstr);
            conn_drop(a, ac, RL_ERR_PROTOCOL);
            return;
        }
        if (!reply) return;
        areq *r = list_pop(&ac->inflight);
        if (r && r->kind <= REQ_POP && r->redirects > 0) ac->resent--;
        if (!r) {
            freeReplyObject(reply);
            rl_fail(RL_ERR_PROTOCOL, "a reply nobody asked for");
            conn_drop(a, ac, RL_ERR_PROTOCOL);
            return;
        }
        handle_reply(a, ac, r, reply);
        freeReplyObject(reply);
        if (!ac->conn) return; /* dropped meanwhile */
    }
}

static void write_out(rl_async *a, aconn *ac)
{
    redisContext *ctx = ac->conn->ctx;
    if (rl_conn_flush_some(ac->conn) != REDIS_OK) {
        rl_conn_error(ac->conn, "send command");
        conn_drop(a, ac, RL_ERR_CONNECTION);
        return;
    }
    /* the rest when the socket takes more */
    int want_out = sdslen(ctx->obuf) > 0;
    if (want_out != ac->polling_out) {
        struct epoll_event ev = {.events = EPOLLIN | (want_out ? EPOLLOUT : 0), .data.ptr = ac};
        epoll_ctl(a->epoll_fd, EPOLL_CTL_MOD, ctx->fd, &ev);
        ac->polling_out = want_out;
    }
}

/* ---- timeouts ------------------------------------------------------------------ */

/* Completes (with the timeout status) what waited past its deadline; returns
 * the next deadline or retry time, or -1. */
static int64_t expire(rl_async *a, int64_t now)
{
    int64_t next = -1;
#define NEXT(t) (next = next < 0 || (t) < next ? (t) : next)
    for (int i = 0; i < a->nconns; i++) {
        aconn *ac = a->conns[i];
        /* a server that owes a reply and has said nothing for two timeouts
         * is stuck: drop it (an idle connection owes nothing) */
        int64_t owed_since = ac->inflight.head ? ac->inflight.head->sent_ms : now;
        if (owed_since < ac->last_read_ms) owed_since = ac->last_read_ms;
        if (ac->conn && ac->inflight.head && now - owed_since > 2 * (int64_t)a->client->options.command_timeout_ms) {
            rl_fail(RL_ERR_TIMEOUT, "no reply from %s:%d for %d ms", ac->node->host, ac->node->port,
                    2 * a->client->options.command_timeout_ms);
            conn_drop(a, ac, RL_ERR_TIMEOUT);
            continue;
        }
        for (areq *r = ac->inflight.head; r; r = r->next) {
            if (r->kind > REQ_POP || r->abandoned) continue;
            if (r->deadline_ms <= now) {
                rl_fail(RL_ERR_TIMEOUT, "no reply within %d ms", a->client->options.command_timeout_ms);
                complete(a, r, RL_ERR_TIMEOUT, NULL);
                r->abandoned = 1; /* its reply, when it comes, is dropped */
            } else {
                NEXT(r->deadline_ms);
                /* deadlines grow along a connection's queue, unless some were sent again */
                if (!ac->resent) break;
            }
        }
    }
    /* parked: waiting for a connection or a discovery */
    for (int i = 0; i <= a->nconns; i++) {
        areq_list *l = i < a->nconns ? &a->conns[i]->pending : &a->unrouted, kept = {NULL, NULL};
        areq *p;
        while ((p = list_pop(l))) {
            if (p->deadline_ms <= now) {
                rl_fail(RL_ERR_TIMEOUT, "no connection within %d ms", a->client->options.command_timeout_ms);
                finish(a, p, RL_ERR_TIMEOUT, NULL);
            } else {
                NEXT(p->deadline_ms);
                list_push(&kept, p);
            }
        }
        *l = kept;
    }
    areq_list still = {NULL, NULL};
    areq *r;
    while ((r = list_pop(&a->waiting))) {
        if (r->deadline_ms <= now) {
            rl_fail(RL_ERR_TIMEOUT, "gave up after %d retries in %d ms", r->redirects,
                    a->client->options.command_timeout_ms);
            finish(a, r, RL_ERR_TIMEOUT, NULL);
        } else if (r->retry_at_ms <= now) {
            dispatch(a, r);
        } else {
            NEXT(r->retry_at_ms);
            list_push(&still, r);
        }
    }
    a->waiting = still;
    still.head = still.tail = NULL;
    while ((r = list_pop(&a->sleepers))) {
        if (r->retry_at_ms <= now) {
            r->wait->sleeping = 0;
            r->deadline_ms = now + a->client->options.command_timeout_ms;
            r->redirects = 0;
            r->pause_ms = 0;
            int64_t deadline = r->deadline_ms;
            dispatch(a, r);
            NEXT(deadline);
        } else {
            NEXT(r->retry_at_ms);
            list_push(&still, r);
        }
    }
    a->sleepers = still;
    /* subscriptions lost with their connection: connect again (the node's back-off paces it) */
    for (int i = 0; i < a->nconns; i++) {
        aconn *ac = a->conns[i];
        if (!ac->sub || ac->conn || ac->connecting) continue;
        for (achannel *ch = ac->channels; ch; ch = ch->next)
            if (ch->refs) {
                sub_dial(a, ac);
                break;
            }
    }
    return next;
#undef NEXT
}

/* ---- the I/O thread ------------------------------------------------------------ */

void *rl_async_io_thread(void *arg)
{
    rl_async *a = arg;
    struct epoll_event events[64];
    for (;;) {
        areq_list batch;
        int closing;
        pthread_mutex_lock(&a->mutex);
        batch = a->submitted;
        a->submitted.head = a->submitted.tail = NULL;
        closing = a->closing;
        pthread_mutex_unlock(&a->mutex);
        if (closing) {
            pthread_mutex_lock(&a->mutex);
            pthread_cond_broadcast(&a->dial_wanted);
            pthread_mutex_unlock(&a->mutex);
            pthread_join(a->dialer, NULL);
            rl_async_free_dials(a);
            const char *closed = "the client was closed";
            a->stopping = 1;
            fail_list(a, &batch, RL_ERR_CLOSED, closed);
            fail_list(a, &a->waiting, RL_ERR_CLOSED, closed);
            fail_list(a, &a->sleepers, RL_ERR_CLOSED, closed);
            fail_list(a, &a->unrouted, RL_ERR_CLOSED, closed);
            for (int i = 0; i < a->nconns; i++) {
                fail_list(a, &a->conns[i]->pending, RL_ERR_CLOSED, closed);
                rl_fail(RL_ERR_CLOSED, "%s", closed);
                conn_drop(a, a->conns[i], RL_ERR_CLOSED);
            }
            return NULL;
        }
        dials_done(a);
        areq *r;
        while ((r = list_pop(&batch))) {
            if (r->wait) wait_begin(a, r);
            dispatch(a, r);
        }
        take_cancels(a);
        int64_t now = rl_monotonic_ms();
        int64_t next = expire(a, now);
        int timeout = next < 0 ? 1000 : (int)(next - now < 0 ? 0 : next - now + 1);
        /* one write per server for everything queued meanwhile */
        for (int i = 0; i < a->nconns; i++)
            if (a->conns[i]->conn && sdslen(a->conns[i]->conn->ctx->obuf) > 0) write_out(a, a->conns[i]);

        pthread_mutex_lock(&a->mutex);
        int idle = a->submitted.head == NULL && a->dial_done == NULL && !a->closing && !a->cancel_count;
        a->sleeping = idle;
        pthread_mutex_unlock(&a->mutex);
        int n = epoll_wait(a->epoll_fd, events, 64, idle ? timeout : 0);
        pthread_mutex_lock(&a->mutex);
        a->sleeping = 0;
        pthread_mutex_unlock(&a->mutex);
        for (int k = 0; k < n; k++) {
            if (events[k].data.ptr == NULL) {
                uint64_t v;
                if (read(a->wake_fd, &v, sizeof v) < 0 && errno != EAGAIN) {
                }
                continue;
            }
            aconn *ac = events[k].data.ptr;
            if (!ac->conn) continue;
            if (events[k].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
                if (ac->sub) read_wakeups(a, ac);
                else read_replies(a, ac);
            }
            if (ac->conn && (events[k].events & EPOLLOUT)) write_out(a, ac);
        }
    }
}
