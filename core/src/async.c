/* The asynchronous engine's I/O thread (see rl_submit in ratelimit.h): one
 * connection per server, requests routed, staged into batch calls and
 * pipelined as they come (protocol.c plans the calls and says what a reply
 * means), replies handed out, timeouts kept. What may block is the dialer
 * thread's (dialer.c); a request's completion is requests.c's. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/sds.h>

#include "async.h"

/* Wakes the I/O thread out of poll. */
void rl_async_wake(rl_async *a)
{
    if (!rl_pipe_signal(a->wake_fds[1])) {
        /* a full pipe: a wake-up is pending anyway */
    }
}

/* ---- connections -------------------------------------------------------------- */

/* The command connection to node, or (sub) its subscriber connection. */
rl_aconn *rl_async_find_conn(rl_async *a, rl_node *node, int sub)
{
    for (int i = 0; i < a->nconns; i++)
        if (a->conns[i]->node == node && a->conns[i]->sub == sub) return a->conns[i];
    if (a->nconns == a->cap_conns) {
        int cap = a->cap_conns ? a->cap_conns * 2 : 4;
        rl_aconn **grown = realloc(a->conns, (size_t)cap * sizeof *grown);
        if (!grown) return NULL;
        a->conns = grown;
        struct pollfd *polls = realloc(a->polls, (size_t)(cap + 1) * sizeof *polls);
        if (!polls) return NULL;
        a->polls = polls;
        a->cap_conns = cap;
    }
    rl_aconn *ac = calloc(1, sizeof *ac);
    if (!ac) return NULL;
    ac->node = node;
    ac->sub = sub;
    a->conns[a->nconns++] = ac;
    return ac;
}

/* Fails everything in flight on ac with status: it may have run, so none of
 * it is ever sent again. */
void rl_async_conn_drop(rl_async *a, rl_aconn *ac, int status)
{
    char msg[200];
    snprintf(msg, sizeof msg, "%s", rl_errmsg());
    if (ac->conn) {
        rl_conn_close(ac->conn);
        ac->conn = NULL;
    }
    ac->loading = 0;
    ac->polling_out = 0;
    ac->resent = 0;
    if (ac->sub) {
        rl_wait_sub_lost(a, ac);
        return;
    }
    rl_async_fail_list(a, &ac->inflight, status, msg);
    rl_async_fail_list(a, &ac->staged, status, msg);
    rl_async_fail_list(a, &ac->room, status, msg);
    ac->staged_count = 0;
    ac->count = 0;
    if (status == RL_ERR_CONNECTION) rl_topology_suspect(a->client, ac->node);
}

/* A connection from the dialer joins the loop: from here on its socket never
 * blocks, the I/O thread waits in poll. */
static void conn_attach(rl_aconn *ac, rl_conn *conn)
{
    redisContext *ctx = conn->ctx;
    ctx->flags &= ~REDIS_BLOCK;
    rl_socket_nonblocking(ctx->fd, 1);
    ac->conn = conn;
    ac->last_read_ms = rl_now_ms();
}

/* The first n decisions staged on ac go into its output as calls
 * (rl_plan_calls), their replies due one per call; a decision sent ahead of
 * others (their deadlines earlier than its own) counts as resent, so the
 * timers look past it (expire). */
static void flush_first(rl_async *a, rl_aconn *ac, int n)
{
    enum { MOST = RL_STAGED_PER_BATCH * RL_MAX_BATCH };
    rl_areq *staged[MOST];
    const rl_cmd *cmds[MOST], *batch[RL_MAX_BATCH];
    size_t ord[MOST], len[MOST];
    char placed[MOST];
    for (int k = 0; k < n; k++) {
        staged[k] = list_pop(&ac->staged);
        cmds[k] = &staged[k]->cmd;
    }
    ac->staged_count -= n;
    size_t calls = rl_plan_calls(a->client, cmds, NULL, (size_t)n, ord, len, placed);
    for (size_t k = 0, o = 0; k < calls; o += len[k++]) {
        for (size_t j = 0; j < len[k]; j++) {
            rl_areq *r = staged[ord[o + j]];
            r->group = 0;
            if (placed[ord[o + j]] == 2 && !r->reordered) {
                r->reordered = 1;
                ac->resent += r->redirects == 0;
            }
            batch[j] = cmds[ord[o + j]];
            list_push(&ac->inflight, r); /* counted when staged */
        }
        if (len[k] > 1) staged[ord[o]]->group = (int)len[k];
        rl_append_call(ac->conn->ctx, batch, len[k]);
    }
}

static void flush_staged(rl_async *a, rl_aconn *ac)
{
    flush_first(a, ac, ac->staged_count);
}

/* Only the staged decisions that make whole batches: the rest wait for
 * company. (Sent at once, a call's size would repeat itself: the replies
 * to a call of k decisions make k new ones.) In a cluster, grouped by
 * slot, all once there are max_batch. */
static void flush_whole_batches(rl_async *a, rl_aconn *ac)
{
    int n = ac->staged_count, cap = a->client->options.max_batch;
    if (a->client->url.mode == RL_MODE_CLUSTER) flush_first(a, ac, n >= cap ? n : 0);
    else flush_first(a, ac, n - n % cap);
}

static int batchable(const rl_async *a, const rl_areq *r)
{
    return r->cmd.batchable && !r->ask && !r->lease && !r->wait && a->client->options.max_batch > 1;
}

static void append(rl_async *a, rl_aconn *ac, rl_areq *r)
{
    r->sent_ms = a->now_ms;
    r->reordered = 0;
    ac->resent += r->redirects > 0;
    ac->count++;
    if (batchable(a, r)) {
        /* ready now with others: batch calls for them, written with the
         * rest of this round's output (never waiting for company) */
        if (ac->staged_count == RL_STAGED_PER_BATCH * a->client->options.max_batch) flush_staged(a, ac);
        list_push(&ac->staged, r);
        ac->staged_count++;
        return;
    }
    flush_staged(a, ac);
    if (r->wait) { /* a wake-up after this may concern this try */
        r->wait->armed = rl_wait_armed(r->wait);
        r->wait->woken = 0;
    }
    rl_append_command(ac->conn->ctx, r->cmd.argc, r->cmd.argv, r->cmd.lens);
    list_push(&ac->inflight, r);
}

/* An internal command (ASKING, SCRIPT LOAD) whose reply is read and dropped. */
static int append_internal(rl_async *a, rl_aconn *ac, rl_req_kind kind, int argc, const char **argv, const size_t *lens)
{
    rl_areq *r = rl_async_req_new(kind);
    if (!r) return rl_fail(RL_ERR_NOMEM, "out of memory");
    flush_staged(a, ac);
    r->sent_ms = a->now_ms;
    rl_append_command(ac->conn->ctx, argc, argv, lens);
    list_push(&ac->inflight, r);
    ac->count++;
    return RL_OK;
}

/* The server is behind: the oldest reply ac owes is older than the command
 * timeout (every caller waiting for it has had its timeout). */
static int behind(const rl_async *a, const rl_aconn *ac, int64_t now)
{
    return ac->inflight.head && now - ac->inflight.head->sent_ms > a->client->options.command_timeout_ms;
}

/* r was never sent: it cannot have consumed anything. */
static void fail_unsent(rl_async *a, rl_aconn *ac, rl_areq *r, int64_t now)
{
    rl_fail(RL_ERR_BACKLOG, "not sent: %d requests in flight to %s:%d (max_in_flight), the oldest for %lld ms", ac->count,
            ac->node->host, ac->node->port, (long long)(ac->inflight.head ? now - ac->inflight.head->sent_ms : 0));
    rl_async_finish(a, r, RL_ERR_BACKLOG, NULL);
}

static void transmit(rl_async *a, rl_aconn *ac, rl_areq *r)
{
    if (r->ask) {
        const char *asking[1] = {"ASKING"};
        if (append_internal(a, ac, REQ_ASKING, 1, asking, NULL)) {
            rl_async_finish(a, r, RL_ERR_NOMEM, NULL);
            return;
        }
        r->ask = NULL;
    }
    append(a, ac, r);
}

/* Sends r on ac if there is room; else it waits for room, unsent, unless the
 * server is behind: feeding it would only lengthen the queue in Redis,
 * whose scripts run (consume) after their callers have given up. */
static void send_to(rl_async *a, rl_aconn *ac, rl_areq *r)
{
    /* our own clean-ups (leave, release, push back) always go: dropped, a
     * queued message taken back would be lost */
    if (!r->silent && (ac->room.head || ac->count >= a->client->options.max_in_flight)) {
        int64_t now = rl_now_ms();
        if (behind(a, ac, now)) fail_unsent(a, ac, r, now);
        else list_push(&ac->room, r);
        return;
    }
    transmit(a, ac, r);
}

/* Replies made room: the waiting requests go out, oldest first. */
static void feed(rl_async *a, rl_aconn *ac)
{
    while (ac->room.head && ac->count < a->client->options.max_in_flight) transmit(a, ac, list_pop(&ac->room));
}

/* Routes r and appends it to its server's output buffer, or parks it until
 * the dialer has connected that server or found where it lives. */
void rl_async_dispatch(rl_async *a, rl_areq *r)
{
    rl_node *node = r->ask;
    int rc = RL_OK, due = 0;
    if (r->failed) { /* completed here, on the I/O thread, as every request is */
        rl_fail(r->failed, "%s", r->failure);
        rl_async_finish(a, r, r->failed, NULL);
        return;
    }
    if (!node) {
        rc = rl_route_cached(a->client, r->cmd.slot, &node, &due);
        if (due) rl_async_want_discovery(a);
        if (rc) {
            if (!due) goto fail;
            list_push(&a->unrouted, r);
            return;
        }
    }
    rl_aconn *ac = rl_async_find_conn(a, node, 0);
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
        rc = rl_backoff_check(&node->backoff, rl_now_ms());
        pthread_mutex_unlock(&node->mutex);
        if (rc) {
            rl_topology_suspect(a->client, node);
            goto fail;
        }
        ac->connecting = 1;
        rl_async_dial(a, ac);
    }
    list_push(&ac->pending, r);
    return;
fail:
    rl_async_finish(a, r, rc, NULL);
}

/* What the dialer finished: connections join, parked requests move on. */
static void dials_done(rl_async *a)
{
    pthread_mutex_lock(&a->mutex);
    rl_dial *d = a->dial_done;
    a->dial_done = NULL;
    pthread_mutex_unlock(&a->mutex);
    while (d) {
        rl_dial *next = d->next;
        rl_areq *r;
        if (!d->ac) {
            rl_areq_list parked = a->unrouted;
            a->unrouted.head = a->unrouted.tail = NULL;
            a->discovering = 0;
            if (d->status) {
                a->discover_after_ms = rl_now_ms() + 25;
                rl_async_fail_list(a, &parked, d->status, d->error);
            }
            while ((r = list_pop(&parked))) rl_async_dispatch(a, r);
        } else {
            rl_aconn *ac = d->ac;
            ac->connecting = 0;
            int rc = d->status ? rl_fail(d->status, "%s", d->error) : RL_OK;
            if (!rc) conn_attach(ac, d->conn);
            if (rc == RL_ERR_CONNECTION || rc == RL_ERR_TIMEOUT) rl_topology_suspect(a->client, ac->node);
            if (rc) {
                char msg[200];
                snprintf(msg, sizeof msg, "%s", rl_errmsg());
                rl_async_fail_list(a, &ac->pending, rc, msg);
            }
            while ((r = list_pop(&ac->pending))) send_to(a, ac, r);
            if (!rc && ac->sub)
                for (rl_achannel *ch = ac->channels; ch; ch = ch->next)
                    if (ch->refs) rl_wait_sub_send(a, ac, ch, 1);
        }
        free(d);
        d = next;
    }
}

/* ---- replies ------------------------------------------------------------------ */

static void handle_reply(rl_async *a, rl_aconn *ac, rl_areq *r, const redisReply *reply)
{
    if (r->kind > REQ_READ) {
        /* loaded (or not): a later NOSCRIPT (SCRIPT FLUSH) loads it again */
        if (r->kind == REQ_SCRIPT_LOAD) ac->loading &= ~(1u << r->cmd.script);
        rl_async_req_free(r);
        return;
    }
    if (r->abandoned) {
        if (r->wait && reply->type == REDIS_REPLY_ARRAY) rl_wait_late_reply(a, r, reply);
        rl_async_req_free(r);
        return;
    }
    if (rl_reload_wanted(&r->cmd, reply, r->redirects)) {
        /* it did not run: load the script (one load queued per connection at
         * a time: replies come in order, so it runs before this resend) */
        unsigned bit = 1u << r->cmd.script;
        r->redirects++;
        if (!(ac->loading & bit)) {
            const char *argv[3];
            size_t lens[3];
            rl_script_load_command(r->cmd.script, argv, lens);
            if (append_internal(a, ac, REQ_SCRIPT_LOAD, 3, argv, lens)) {
                rl_async_finish(a, r, RL_ERR_NOMEM, NULL);
                return;
            }
            ac->inflight.tail->cmd.script = r->cmd.script;
            ac->loading |= bit;
        }
        append(a, ac, r);
        return;
    }
    rl_reply_verdict kind = rl_follow_reply(a->client, reply, ac->node, &r->ask);
    if (kind == REPLY_FINAL) {
        if (reply->type == REDIS_REPLY_ERROR) {
            rl_fail(RL_ERR_REDIS, "%s", reply->str);
            rl_async_finish(a, r, RL_ERR_REDIS, NULL);
        } else if (r->wait) {
            rl_wait_reply(a, r, reply);
        } else if (r->lease) {
            if (!r->lease_ended(a, r, RL_OK, reply)) rl_async_finish(a, r, RL_OK, reply);
        } else {
            rl_async_finish(a, r, RL_OK, reply);
        }
        return;
    }
    snprintf(r->failure, sizeof r->failure, "%s", reply->str);
    if (kind == REPLY_ASK && !r->ask) {
        rl_async_finish(a, r, RL_ERR_NOMEM, NULL);
        return;
    }
    /* at once, or on the timer (expire): the others on the connection go on */
    r->pause_ms = rl_retry_pause_ms(r->pause_ms, ++r->redirects, kind != REPLY_MOVED && kind != REPLY_ASK);
    if (r->pause_ms == 0) {
        rl_async_dispatch(a, r);
        return;
    }
    r->retry_at_ms = rl_now_ms() + r->pause_ms;
    if (r->retry_at_ms > r->deadline_ms) r->retry_at_ms = r->deadline_ms; /* times out on time */
    list_push(&a->waiting, r);
}

/* The reply to a batch of first->group decisions, the rest of them next
 * on ac->inflight: each gets its part (rl_batch_part). */
static void handle_batch_reply(rl_async *a, rl_aconn *ac, rl_areq *first, redisReply *reply)
{
    size_t n = (size_t)first->group;
    int ok = rl_batch_reply_ok(reply, n);
    rl_areq *r = first;
    first->group = 0;
    for (size_t i = 0; i < n; i++) {
        if (i > 0) {
            if (!ac->conn) return; /* dropped meanwhile: the rest failed with it */
            r = list_pop(&ac->inflight);
            ac->count--;
            if (r->redirects > 0 || r->reordered) ac->resent--;
        }
        handle_reply(a, ac, r, rl_batch_part(reply, ok, i));
    }
}

static void write_out(rl_async *a, rl_aconn *ac)
{
    redisContext *ctx = ac->conn->ctx;
    if (rl_conn_flush_some(ac->conn) != REDIS_OK) {
        rl_conn_error(ac->conn, "send command");
        rl_async_conn_drop(a, ac, RL_ERR_CONNECTION);
        return;
    }
    ac->polling_out = sdslen(ctx->obuf) > 0; /* the rest when the socket takes more */
}

/* Under a->mutex: what callers submitted and cancelled, taken together (a
 * cancel always finds its wait begun). */
static rl_areq_list detach_submitted(rl_async *a, uint64_t **cancels, size_t *cancel_count)
{
    rl_areq_list batch = a->submitted;
    a->submitted.head = a->submitted.tail = NULL;
    *cancels = a->cancels;
    *cancel_count = a->cancel_count;
    a->cancels = NULL;
    a->cancel_count = a->cancel_cap = 0;
    return batch;
}

/* Takes in what callers submitted (and cancelled) since the last time. */
static void take_submitted(rl_async *a)
{
    uint64_t *cancels;
    size_t cancel_count;
    pthread_mutex_lock(&a->mutex);
    rl_areq_list batch = detach_submitted(a, &cancels, &cancel_count);
    pthread_mutex_unlock(&a->mutex);
    rl_areq *r;
    while ((r = list_pop(&batch))) {
        if (r->wait && !r->wait->linked) rl_wait_begin(a, r);
        if (r->wait && r->wait->timed) r->wait->timed(a, r); /* never sent itself: its tries are */
        else rl_async_dispatch(a, r);
    }
    rl_wait_cancels(a, cancels, cancel_count);
}

/* One write per server for everything queued meanwhile (whole_only: the
 * staged decisions that make whole batches). */
static void send_all(rl_async *a, int whole_only)
{
    for (int i = 0; i < a->nconns; i++) {
        if (!a->conns[i]->conn) continue;
        if (whole_only) flush_whole_batches(a, a->conns[i]);
        else flush_staged(a, a->conns[i]);
        if (sdslen(a->conns[i]->conn->ctx->obuf) > 0) write_out(a, a->conns[i]);
    }
}

static void read_replies(rl_async *a, rl_aconn *ac)
{
    redisContext *ctx = ac->conn->ctx;
    if (rl_conn_buffer_read(ac->conn) != REDIS_OK) {
        rl_conn_error(ac->conn, "read reply");
        rl_async_conn_drop(a, ac, RL_ERR_CONNECTION);
        return;
    }
    ac->last_read_ms = a->now_ms = rl_now_ms();
    for (;;) {
        void *reply = NULL;
        if (rl_reader_get_reply(ctx->reader, &reply) != REDIS_OK) {
            rl_fail(RL_ERR_PROTOCOL, "protocol error: %s", ctx->reader->errstr);
            rl_async_conn_drop(a, ac, RL_ERR_PROTOCOL);
            return;
        }
        if (!reply) return;
        rl_areq *r = list_pop(&ac->inflight);
        if (r) ac->count--;
        if (r && r->kind <= REQ_READ && (r->redirects > 0 || r->reordered)) ac->resent--;
        if (!r) {
            rl_reply_free(reply);
            rl_fail(RL_ERR_PROTOCOL, "a reply nobody asked for");
            rl_async_conn_drop(a, ac, RL_ERR_PROTOCOL);
            return;
        }
        if (r->group > 1) handle_batch_reply(a, ac, r, reply);
        else handle_reply(a, ac, r, reply);
        rl_reply_free(reply);
        if (!ac->conn) return; /* dropped meanwhile */
        feed(a, ac);
        if (a->io_submitted && ctx->reader->pos < ctx->reader->len) {
            /* more replies read: what the callbacks of this one submitted
             * (here, on this thread: a reactive caller's next decisions)
             * goes out before they are handled, so the server works
             * meanwhile. Other threads' submissions wait for the loop, as
             * before: taken early they would go in smaller batches. */
            a->io_submitted = 0;
            take_submitted(a);
            send_all(a, 1);
            if (!ac->conn) return;
        }
    }
}

/* ---- timeouts ------------------------------------------------------------------ */

/* Completes (with the timeout status) what waited past its deadline; returns
 * the next deadline or retry time, or -1. */
static int64_t expire(rl_async *a, int64_t now)
{
    int64_t next = -1;
#define NEXT(t) (next = next < 0 || (t) < next ? (t) : next)
    /* staged decisions go out now: their deadlines count below */
    for (int i = 0; i < a->nconns; i++)
        if (a->conns[i]->conn) flush_staged(a, a->conns[i]);
    for (int i = 0; i < a->nconns; i++) {
        rl_aconn *ac = a->conns[i];
        /* a server that owes a reply and has said nothing for two timeouts
         * is stuck: drop it (an idle connection owes nothing) */
        int64_t owed_since = ac->inflight.head ? ac->inflight.head->sent_ms : now;
        if (owed_since < ac->last_read_ms) owed_since = ac->last_read_ms;
        if (ac->conn && ac->inflight.head && now - owed_since > 2 * (int64_t)a->client->options.command_timeout_ms) {
            rl_fail(RL_ERR_TIMEOUT, "no reply from %s:%d for %d ms", ac->node->host, ac->node->port,
                    2 * a->client->options.command_timeout_ms);
            rl_async_conn_drop(a, ac, RL_ERR_TIMEOUT);
            continue;
        }
        for (rl_areq *r = ac->inflight.head; r; r = r->next) {
            if (r->kind > REQ_READ || r->abandoned) continue;
            if (r->deadline_ms <= now) {
                rl_fail(RL_ERR_TIMEOUT, "no reply within %d ms", a->client->options.command_timeout_ms);
                rl_async_complete(a, r, RL_ERR_TIMEOUT, NULL);
                r->abandoned = 1; /* its reply, when it comes, is dropped */
            } else {
                NEXT(r->deadline_ms);
                /* deadlines grow along a connection's queue, unless some were sent again */
                if (!ac->resent) break;
            }
        }
    }
    /* waiting for room: never sent, so BACKLOG (nothing consumed) once the
     * server is behind or their time is up */
    for (int i = 0; i < a->nconns; i++) {
        rl_aconn *ac = a->conns[i];
        int late = ac->room.head && behind(a, ac, now);
        rl_areq_list kept = {NULL, NULL};
        rl_areq *p;
        while ((p = list_pop(&ac->room))) {
            if (late || p->deadline_ms <= now) {
                fail_unsent(a, ac, p, now);
            } else {
                NEXT(p->deadline_ms);
                list_push(&kept, p);
            }
        }
        ac->room = kept;
        if (kept.head && ac->inflight.head) NEXT(ac->inflight.head->sent_ms + a->client->options.command_timeout_ms + 1);
    }
    /* parked: waiting for a connection or a discovery */
    for (int i = 0; i <= a->nconns; i++) {
        rl_areq_list *l = i < a->nconns ? &a->conns[i]->pending : &a->unrouted, kept = {NULL, NULL};
        rl_areq *p;
        while ((p = list_pop(l))) {
            if (p->deadline_ms <= now) {
                rl_fail(RL_ERR_TIMEOUT, "no connection within %d ms", a->client->options.command_timeout_ms);
                rl_async_finish(a, p, RL_ERR_TIMEOUT, NULL);
            } else {
                NEXT(p->deadline_ms);
                list_push(&kept, p);
            }
        }
        *l = kept;
    }
    rl_areq_list still = {NULL, NULL};
    rl_areq *r;
    while ((r = list_pop(&a->waiting))) {
        if (r->deadline_ms <= now) {
            int timeout = a->client->options.command_timeout_ms;
            rl_fail(RL_ERR_TIMEOUT, "gave up after %d redirects and retries in %lld ms (command timeout %d ms): %s",
                    r->redirects, (long long)(now - (r->deadline_ms - timeout)), timeout, r->failure);
            rl_async_finish(a, r, RL_ERR_TIMEOUT, NULL);
        } else if (r->retry_at_ms <= now) {
            rl_async_dispatch(a, r);
        } else {
            NEXT(r->retry_at_ms);
            list_push(&still, r);
        }
    }
    a->waiting = still;
    int64_t retry = rl_wait_expire(a, now);
    if (retry >= 0) NEXT(retry);
    int64_t lease_due = a->client->leases_tick(a, now);
    if (lease_due >= 0) NEXT(lease_due);
    return next;
#undef NEXT
}

/* ---- the I/O thread ------------------------------------------------------------ */

void *rl_async_io_thread(void *arg)
{
    rl_async *a = arg;
    for (;;) {
        pthread_mutex_lock(&a->mutex);
        if (a->closing) {
            uint64_t *cancels;
            size_t cancel_count;
            rl_areq_list batch = detach_submitted(a, &cancels, &cancel_count);
            free(cancels);
            pthread_cond_broadcast(&a->dial_wanted);
            pthread_mutex_unlock(&a->mutex);
            pthread_join(a->dialer, NULL);
            rl_async_free_dials(a);
            const char *closed = "the client was closed";
            a->stopping = 1;
            rl_async_fail_list(a, &batch, RL_ERR_CLOSED, closed);
            rl_async_fail_list(a, &a->waiting, RL_ERR_CLOSED, closed);
            rl_async_fail_list(a, &a->sleepers, RL_ERR_CLOSED, closed);
            rl_async_fail_list(a, &a->unrouted, RL_ERR_CLOSED, closed);
            for (int i = 0; i < a->nconns; i++) {
                rl_async_fail_list(a, &a->conns[i]->pending, RL_ERR_CLOSED, closed);
                rl_async_fail_list(a, &a->conns[i]->room, RL_ERR_CLOSED, closed);
                rl_fail(RL_ERR_CLOSED, "%s", closed);
                rl_async_conn_drop(a, a->conns[i], RL_ERR_CLOSED);
            }
            /* its descriptors go with it, not at the client's free (after a
             * shutdown, that waits for its last reference: a GC, a Cleaner) */
            pthread_mutex_lock(&a->mutex);
            a->sleeping = 0; /* nobody wakes it any more */
            rl_async_close_wake(a);
            pthread_mutex_unlock(&a->mutex);
            return NULL;
        }
        pthread_mutex_unlock(&a->mutex);
        a->now_ms = rl_now_ms();
        dials_done(a);
        take_submitted(a);
        int64_t now = rl_now_ms();
        int64_t next = expire(a, now);
        int timeout = next < 0 ? 1000 : (int)(next - now < 0 ? 0 : next - now + 1);
        send_all(a, 0);

        pthread_mutex_lock(&a->mutex);
        int idle = a->submitted.head == NULL && a->dial_done == NULL && !a->closing && !a->cancel_count;
        a->sleeping = idle;
        pthread_mutex_unlock(&a->mutex);
        /* poll, not epoll or kqueue: one code path on every platform, and a
         * client watches a few sockets (docs/benchmarks.md: no cost measured).
         * Connections added while handling these events wait for the next turn. */
        int nconns = a->nconns;
        a->polls[0] = (struct pollfd){.fd = a->wake_fds[0], .events = POLLIN};
        for (int i = 0; i < nconns; i++) {
            rl_aconn *ac = a->conns[i];
            a->polls[i + 1] = (struct pollfd){.fd = ac->conn ? ac->conn->ctx->fd : RL_NO_FD,
                                              .events = POLLIN | (ac->polling_out ? POLLOUT : 0)};
        }
        int n = rl_poll(a->polls, (rl_nfds)nconns + 1, idle ? timeout : 0);
        if (n > 0) a->now_ms = rl_now_ms();
        pthread_mutex_lock(&a->mutex);
        a->sleeping = 0;
        pthread_mutex_unlock(&a->mutex);
        if (n <= 0) continue;
        if (a->polls[0].revents) {
            char drained[64];
            while (rl_pipe_read(a->wake_fds[0], drained, sizeof drained) == sizeof drained) {
            }
        }
        /* a->polls, not a copy: handling may grow it (rl_async_find_conn) */
        for (int i = 0; i < nconns; i++) {
            short events = a->polls[i + 1].revents;
            rl_aconn *ac = a->conns[i];
            if (!events || !ac->conn) continue;
            if (events & (POLLIN | POLLERR | POLLHUP | POLLNVAL)) {
                if (ac->sub) rl_wait_read(a, ac);
                else read_replies(a, ac);
            }
            if (ac->conn && (events & POLLOUT)) write_out(a, ac);
        }
    }
}
