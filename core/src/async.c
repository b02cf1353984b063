/* Asynchronous decisions: one I/O thread per client, one connection per
 * server, requests pipelined as they come (see rl_submit in ratelimit.h). */
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

#include "internal.h"

/* ---- completion queues ------------------------------------------------- */

struct rl_completions {
    pthread_mutex_t mutex;
    rl_completion *items;
    size_t head, count, cap;
    int fd;
    int signalled; /* the fd holds a wake-up nobody took yet */
};

int rl_completions_open(rl_completions **out)
{
    rl_completions *q;
    rl_clear_error();
    if (!out) return rl_fail(RL_ERR_INVALID, "out must not be NULL");
    if (!(q = calloc(1, sizeof *q))) return rl_fail(RL_ERR_NOMEM, "out of memory");
    q->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (q->fd < 0) {
        free(q);
        return rl_fail(RL_ERR_NOMEM, "eventfd: %s", strerror(errno));
    }
    pthread_mutex_init(&q->mutex, NULL);
    *out = q;
    return RL_OK;
}

int rl_completions_fd(const rl_completions *q)
{
    return q ? q->fd : -1;
}

static void completions_push(rl_completions *q, const rl_completion *c)
{
    pthread_mutex_lock(&q->mutex);
    if (q->count == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 64;
        rl_completion *grown = malloc(cap * sizeof *grown);
        if (!grown) abort(); /* a completion must never be lost */
        for (size_t i = 0; i < q->count; i++) grown[i] = q->items[(q->head + i) % q->cap];
        free(q->items);
        q->items = grown;
        q->head = 0;
        q->cap = cap;
    }
    q->items[(q->head + q->count++) % q->cap] = *c;
    if (!q->signalled) {
        uint64_t one = 1;
        q->signalled = write(q->fd, &one, sizeof one) == sizeof one;
    }
    pthread_mutex_unlock(&q->mutex);
}

size_t rl_completions_take(rl_completions *q, rl_completion *out, size_t max)
{
    size_t n = 0;
    if (!q || !out) return 0;
    pthread_mutex_lock(&q->mutex);
    while (n < max && q->count > 0) {
        out[n++] = q->items[q->head];
        q->head = (q->head + 1) % q->cap;
        q->count--;
    }
    if (q->count == 0 && q->signalled) {
        uint64_t v;
        if (read(q->fd, &v, sizeof v) == sizeof v || errno == EAGAIN) q->signalled = 0;
    }
    pthread_mutex_unlock(&q->mutex);
    return n;
}

void rl_completions_close(rl_completions *q)
{
    if (!q) return;
    close(q->fd);
    free(q->items);
    pthread_mutex_destroy(&q->mutex);
    free(q);
}

/* ---- requests and connections ---------------------------------------------- */

/* REQ_DECISION..REQ_PUSH complete the caller's request; the others are ours. */
typedef enum { REQ_DECISION, REQ_ACQUIRE, REQ_DONE_FLAG, REQ_PUSH, REQ_ASKING, REQ_SCRIPT_LOAD } req_kind;

typedef struct areq {
    struct areq *next;
    req_kind kind;
    rl_cmd cmd;
    uint64_t tag;
    rl_target target;
    rl_spec spec;         /* for the fallback decision */
    char permit_id[RL_PERMIT_ID_SIZE]; /* REQ_ACQUIRE: the id asked for */
    int64_t deadline_ms;  /* command timeout from submission */
    int64_t retry_at_ms;  /* waiting after TRYAGAIN / CLUSTERDOWN / ... */
    int64_t pause_ms;
    int64_t sent_ms;      /* appended to a connection's output */
    rl_node *ask;         /* an ASK redirect: the next send goes there, after ASKING */
    int redirects;
    int abandoned;        /* completed (timed out) while its reply is still due */
} areq;

typedef struct {
    areq *head, *tail;
} areq_list;

static void list_push(areq_list *l, areq *r)
{
    r->next = NULL;
    if (l->tail) l->tail->next = r;
    else l->head = r;
    l->tail = r;
}

static areq *list_pop(areq_list *l)
{
    areq *r = l->head;
    if (r) {
        l->head = r->next;
        if (!l->head) l->tail = NULL;
        r->next = NULL;
    }
    return r;
}

typedef struct {
    rl_node *node;
    rl_conn *conn;       /* NULL: not connected */
    int polling_out;     /* EPOLLOUT registered: the socket took less than we had */
    areq_list inflight;  /* sent (or buffered), replies due in this order */
    int resent;          /* of those, sent again (NOSCRIPT, MOVED...): older deadlines among newer */
    unsigned loading;    /* scripts a SCRIPT LOAD was queued for on this connection */
    int64_t last_read_ms;
    int connecting;      /* the dialer is connecting it */
    areq_list pending;   /* routed here, waiting for the connection */
} aconn;

/* Connecting and asking the sentinels / cluster where servers are block for
 * up to a timeout, so the I/O thread hands them to a dialer thread and goes
 * on serving the servers it is connected to. */
typedef struct dial {
    struct dial *next;
    aconn *ac;     /* NULL: a topology discovery */
    rl_conn *conn; /* the result */
    int status;
    char error[200];
} dial;

struct rl_async {
    rl_client *client;
    pthread_t thread;
    pthread_mutex_t mutex; /* guards submitted, closing, sleeping */
    areq_list submitted;
    int closing;
    int sleeping; /* in epoll_wait: a submit must wake it */
    int wake_fd;
    int epoll_fd;
    /* the I/O thread's own */
    aconn **conns; /* one per server, never moved */
    int nconns, cap_conns;
    areq_list waiting; /* to dispatch again at retry_at_ms */
    areq_list unrouted; /* waiting for a discovery */
    int discovering;    /* a discovery is with the dialer */
    int64_t discover_after_ms;
    unsigned long generation; /* the fork generation that owns the thread */
    /* the dialer; jobs and results guarded by mutex */
    pthread_t dialer;
    pthread_cond_t dial_wanted;
    dial *dial_jobs, *dial_done;
};

/* ---- completing ------------------------------------------------------------- */

static void req_free(areq *r)
{
    rl_cmd_free(&r->cmd);
    free(r);
}

static void complete(rl_async *a, areq *r, int status, const redisReply *reply)
{
    rl_completion c;
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
        default:
            c.status = rl_decode_result(reply, &c.result);
        }
    }
    if (c.status != RL_OK && !c.error[0]) snprintf(c.error, sizeof c.error, "%s", rl_errmsg());
    /* the on_error policy decides rate limits only, as in the blocking calls */
    if ((c.status == RL_ERR_CONNECTION || c.status == RL_ERR_TIMEOUT) && r->kind == REQ_DECISION &&
        a->client->options.on_error != RL_ON_ERROR_RAISE) {
        rl_fallback_result(a->client, &r->spec, &c.result);
        c.status = RL_OK; /* the message still says what went wrong */
    }
    if (r->target.queue) completions_push(r->target.queue, &c);
    else r->target.fn(r->target.ctx, &c);
}

/* A decision is done: completed unless it already was (timed out). */
static void finish(rl_async *a, areq *r, int status, const redisReply *reply)
{
    if (r->kind <= REQ_PUSH && !r->abandoned) complete(a, r, status, reply);
    req_free(r);
}

/* ---- connections -------------------------------------------------------------- */

static aconn *conn_for(rl_async *a, rl_node *node)
{
    for (int i = 0; i < a->nconns; i++)
        if (a->conns[i]->node == node) return a->conns[i];
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
    a->conns[a->nconns++] = ac;
    return ac;
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
    areq *r;
    while ((r = list_pop(&ac->inflight))) {
        rl_fail(status, "%s", msg);
        finish(a, r, status, NULL);
    }
    if (status == RL_ERR_CONNECTION) rl_topology_suspect(a->client, ac->node);
}

/* A connection from the dialer joins the loop: from here on its socket never
 * blocks, the I/O thread waits in epoll. */
static int conn_attach(rl_async *a, aconn *ac, rl_conn *conn)
{
    redisContext *ctx = conn->ctx;
    ctx->flags &= ~REDIS_BLOCK;
    fcntl(ctx->fd, F_SETFL, fcntl(ctx->fd, F_GETFL) | O_NONBLOCK);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = ac->node};
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

/* Dials nobody will use any more (closing, or a forked child). */
static void free_dials(rl_async *a)
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

static void *dialer(void *arg)
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
            d->status = rl_conn_open(c, node, c->url.password, c->url.user, c->url.db, &d->conn);
            pthread_mutex_lock(&node->mutex);
            if (d->status == RL_ERR_CONNECTION || d->status == RL_ERR_TIMEOUT)
                rl_backoff_failed(&node->backoff, d->status, rl_monotonic_ms(), c->options.reconnect_max_ms);
            else rl_backoff_ok(&node->backoff);
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
        uint64_t one = 1;
        if (write(a->wake_fd, &one, sizeof one) < 0) {
        }
    }
    pthread_mutex_unlock(&a->mutex);
    return NULL;
}

static void append(aconn *ac, areq *r)
{
    r->sent_ms = rl_monotonic_ms();
    ac->resent += r->redirects > 0;
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
            if (d->status) a->discover_after_ms = rl_monotonic_ms() + 25;
            while ((r = list_pop(&parked))) {
                if (d->status) {
                    rl_fail(d->status, "%s", d->error);
                    finish(a, r, d->status, NULL);
                } else {
                    dispatch(a, r);
                }
            }
        } else {
            aconn *ac = d->ac;
            ac->connecting = 0;
            int rc = d->status ? rl_fail(d->status, "%s", d->error) : conn_attach(a, ac, d->conn);
            if (rc && (rc == RL_ERR_CONNECTION || rc == RL_ERR_TIMEOUT)) rl_topology_suspect(a->client, ac->node);
            char msg[200];
            snprintf(msg, sizeof msg, "%s", rl_errmsg());
            while ((r = list_pop(&ac->pending))) {
                if (rc) {
                    rl_fail(rc, "%s", msg);
                    finish(a, r, rc, NULL);
                } else {
                    send_to(a, ac, r);
                }
            }
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
    if (r->kind > REQ_PUSH) {
        /* loaded (or not): a later NOSCRIPT (SCRIPT FLUSH) loads it again */
        if (r->kind == REQ_SCRIPT_LOAD) ac->loading &= ~(1u << r->cmd.script);
        req_free(r);
        return;
    }
    if (r->abandoned) {
        req_free(r);
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
        if (r && r->kind <= REQ_PUSH && r->redirects > 0) ac->resent--;
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
        struct epoll_event ev = {.events = EPOLLIN | (want_out ? EPOLLOUT : 0), .data.ptr = ac->node};
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
            if (r->kind > REQ_PUSH || r->abandoned) continue;
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
    return next;
#undef NEXT
}

/* ---- the I/O thread ------------------------------------------------------------ */

static void fail_all(rl_async *a, areq_list *l, int status)
{
    areq *r;
    while ((r = list_pop(l))) {
        rl_fail(status, "the client was closed");
        finish(a, r, status, NULL);
    }
}

static void *io_thread(void *arg)
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
            free_dials(a);
            fail_all(a, &batch, RL_ERR_CLOSED);
            fail_all(a, &a->waiting, RL_ERR_CLOSED);
            fail_all(a, &a->unrouted, RL_ERR_CLOSED);
            for (int i = 0; i < a->nconns; i++) {
                fail_all(a, &a->conns[i]->pending, RL_ERR_CLOSED);
                rl_fail(RL_ERR_CLOSED, "the client was closed");
                conn_drop(a, a->conns[i], RL_ERR_CLOSED);
            }
            return NULL;
        }
        dials_done(a);
        areq *r;
        while ((r = list_pop(&batch))) dispatch(a, r);
        /* one write per server for everything queued meanwhile */
        for (int i = 0; i < a->nconns; i++)
            if (a->conns[i]->conn && sdslen(a->conns[i]->conn->ctx->obuf) > 0) write_out(a, a->conns[i]);

        int64_t now = rl_monotonic_ms();
        int64_t next = expire(a, now);
        int timeout = next < 0 ? 1000 : (int)(next - now < 0 ? 0 : next - now + 1);

        pthread_mutex_lock(&a->mutex);
        int idle = a->submitted.head == NULL && a->dial_done == NULL && !a->closing;
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
            aconn *ac = conn_for(a, events[k].data.ptr);
            if (!ac || !ac->conn) continue;
            if (events[k].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) read_replies(a, ac);
            if (ac->conn && (events[k].events & EPOLLOUT)) write_out(a, ac);
        }
    }
}

static int async_start(rl_client *c)
{
    rl_async *a = calloc(1, sizeof *a);
    if (!a) return rl_fail(RL_ERR_NOMEM, "out of memory");
    a->client = c;
    a->generation = rl_fork_generation();
    pthread_mutex_init(&a->mutex, NULL);
    pthread_cond_init(&a->dial_wanted, NULL);
    a->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    a->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    int dialer_started = 0;
    if (a->wake_fd < 0 || a->epoll_fd < 0 || epoll_ctl(a->epoll_fd, EPOLL_CTL_ADD, a->wake_fd, &ev) < 0 ||
        !(dialer_started = pthread_create(&a->dialer, NULL, dialer, a) == 0) ||
        pthread_create(&a->thread, NULL, io_thread, a) != 0) {
        int err = errno;
        if (dialer_started) {
            pthread_mutex_lock(&a->mutex);
            a->closing = 1;
            pthread_cond_broadcast(&a->dial_wanted);
            pthread_mutex_unlock(&a->mutex);
            pthread_join(a->dialer, NULL);
        }
        if (a->wake_fd >= 0) close(a->wake_fd);
        if (a->epoll_fd >= 0) close(a->epoll_fd);
        pthread_cond_destroy(&a->dial_wanted);
        pthread_mutex_destroy(&a->mutex);
        free(a);
        return rl_fail(RL_ERR_NOMEM, "cannot start the I/O threads: %s", strerror(err));
    }
    c->async = a;
    return RL_OK;
}

static void free_list(areq_list *l)
{
    areq *r;
    while ((r = list_pop(l))) req_free(r);
}

/* In a forked child: the parent's I/O threads did not come along. Close our
 * copies of their descriptors and free the memory; complete nothing (those
 * requests are the parent's) and touch no mutex (one may be held forever). */
static void async_forget(rl_async *a)
{
    free_list(&a->submitted);
    free_list(&a->waiting);
    free_list(&a->unrouted);
    for (int i = 0; i < a->nconns; i++) {
        free_list(&a->conns[i]->inflight);
        free_list(&a->conns[i]->pending);
        rl_conn_close(a->conns[i]->conn);
        free(a->conns[i]);
    }
    free(a->conns);
    free_dials(a);
    close(a->wake_fd);
    close(a->epoll_fd);
    free(a);
}

void rl_async_stop(rl_client *c)
{
    rl_async *a = c->async;
    uint64_t one = 1;
    if (!a) return;
    if (a->generation != rl_fork_generation()) {
        async_forget(a);
        c->async = NULL;
        return;
    }
    pthread_mutex_lock(&a->mutex);
    a->closing = 1;
    pthread_mutex_unlock(&a->mutex);
    if (write(a->wake_fd, &one, sizeof one) < 0) {
    }
    pthread_join(a->thread, NULL);
    for (int i = 0; i < a->nconns; i++) {
        rl_conn_close(a->conns[i]->conn);
        free(a->conns[i]);
    }
    free(a->conns);
    close(a->wake_fd);
    close(a->epoll_fd);
    pthread_cond_destroy(&a->dial_wanted);
    pthread_mutex_destroy(&a->mutex);
    free(a);
    c->async = NULL;
}

static int check_target(const rl_client *c, const rl_target *target)
{
    if (!c || !target) return rl_fail(RL_ERR_INVALID, "client and target must not be NULL");
    if ((target->fn == NULL) == (target->queue == NULL))
        return rl_fail(RL_ERR_INVALID, "a target is a callback or a completion queue (exactly one)");
    return RL_OK;
}

static areq *new_request(req_kind kind, uint64_t tag, const rl_target *target)
{
    areq *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->kind = kind;
    r->tag = tag;
    r->target = *target;
    return r;
}

/* Hands a built request to the I/O thread (started on first use). */
static int queue_request(rl_client *c, areq *r, int build_rc)
{
    int rc = build_rc;
    if (!rc && r->cmd.failed) rc = rl_fail(RL_ERR_NOMEM, "out of memory building a command");
    if (rc) {
        req_free(r);
        return rc;
    }
    r->deadline_ms = rl_monotonic_ms() + c->options.command_timeout_ms;

    pthread_mutex_lock(&c->topology);
    if (c->async && c->async->generation != rl_fork_generation()) { /* forked: the threads stayed with the parent */
        async_forget(c->async);
        c->async = NULL;
    }
    if (!c->async && (rc = async_start(c))) {
        pthread_mutex_unlock(&c->topology);
        req_free(r);
        return rc;
    }
    rl_async *a = c->async;
    pthread_mutex_unlock(&c->topology);

    pthread_mutex_lock(&a->mutex);
    if (a->closing) {
        pthread_mutex_unlock(&a->mutex);
        req_free(r);
        return rl_fail(RL_ERR_CLOSED, "the client is closing");
    }
    list_push(&a->submitted, r);
    int wake = a->sleeping;
    a->sleeping = 0; /* one wake-up is enough for everyone until it runs */
    pthread_mutex_unlock(&a->mutex);
    if (wake) {
        uint64_t one = 1;
        if (write(a->wake_fd, &one, sizeof one) < 0) {
        }
    }
    return RL_OK;
}

int rl_submit(rl_client *c, const rl_request *request, uint64_t tag, const rl_target *target)
{
    areq *r;
    int rc;
    rl_clear_error();
    if ((rc = check_target(c, target))) return rc;
    if (!request) return rl_fail(RL_ERR_INVALID, "request must not be NULL");
    if ((rc = rl_validate_request(request))) return rc;
    if (!(r = new_request(REQ_DECISION, tag, target))) return rl_fail(RL_ERR_NOMEM, "out of memory");
    r->spec = request->spec;
    rl_build_decision(&r->cmd, c, request);
    return queue_request(c, r, RL_OK);
}

static int submit_acquire(rl_client *c, const char *kind, const char *name, int64_t max, int64_t lease,
                          uint64_t tag, const rl_target *target)
{
    areq *r;
    int rc;
    rl_clear_error();
    if ((rc = check_target(c, target)) || (rc = rl_check_sem_acquire(c, name, max, lease))) return rc;
    if (!(r = new_request(REQ_ACQUIRE, tag, target))) return rl_fail(RL_ERR_NOMEM, "out of memory");
    if ((rc = rl_new_permit_id(r->permit_id))) {
        req_free(r);
        return rc;
    }
    return queue_request(c, r, rl_build_sem_call(&r->cmd, c, kind, name, "acquire", r->permit_id, max, lease, 0));
}

static int submit_flag(rl_client *c, const char *kind, const char *name, const char *op, const char *id,
                       int64_t lease, uint64_t tag, const rl_target *target)
{
    areq *r;
    int rc;
    rl_clear_error();
    if ((rc = check_target(c, target)) || (rc = rl_check_permit_call(c, name, id)) ||
        (lease && (rc = rl_check_range("lease_ms", lease, 1, RL_MAX_EXACT / 1000 / 4))))
        return rc;
    if (!(r = new_request(REQ_DONE_FLAG, tag, target))) return rl_fail(RL_ERR_NOMEM, "out of memory");
    return queue_request(c, r, rl_build_sem_call(&r->cmd, c, kind, name, op, id, 1, lease, 0));
}

int rl_submit_semaphore_acquire(rl_client *c, const char *name, int64_t permits_max, int64_t lease_ms, uint64_t tag,
                                const rl_target *target)
{
    return submit_acquire(c, "semaphore", name, permits_max, lease_ms, tag, target);
}

int rl_submit_semaphore_release(rl_client *c, const char *name, const char *permit_id, uint64_t tag,
                                const rl_target *target)
{
    return submit_flag(c, "semaphore", name, "release", permit_id, 0, tag, target);
}

int rl_submit_semaphore_refresh(rl_client *c, const char *name, const char *permit_id, int64_t lease_ms,
                                uint64_t tag, const rl_target *target)
{
    if (lease_ms == 0) return rl_fail(RL_ERR_INVALID, "lease_ms must be in 1..%lld", (long long)(RL_MAX_EXACT / 4000));
    return submit_flag(c, "semaphore", name, "refresh", permit_id, lease_ms, tag, target);
}

int rl_submit_lock_acquire(rl_client *c, const char *name, int64_t lease_ms, uint64_t tag, const rl_target *target)
{
    return submit_acquire(c, "lock", name, 1, lease_ms, tag, target);
}

int rl_submit_lock_release(rl_client *c, const char *name, const char *token, uint64_t tag, const rl_target *target)
{
    return submit_flag(c, "lock", name, "release", token, 0, tag, target);
}

int rl_submit_lock_extend(rl_client *c, const char *name, const char *token, int64_t lease_ms, uint64_t tag,
                          const rl_target *target)
{
    if (lease_ms == 0) return rl_fail(RL_ERR_INVALID, "lease_ms must be in 1..%lld", (long long)(RL_MAX_EXACT / 4000));
    return submit_flag(c, "lock", name, "refresh", token, lease_ms, tag, target);
}

int rl_submit_queue_push(rl_client *c, const char *queue, const char *message, size_t message_len, int64_t delay_ms,
                         uint64_t tag, const rl_target *target)
{
    areq *r;
    int rc;
    rl_clear_error();
    if ((rc = check_target(c, target)) || (rc = rl_check_queue_push(c, queue, message, message_len, delay_ms)))
        return rc;
    if (!(r = new_request(REQ_PUSH, tag, target))) return rl_fail(RL_ERR_NOMEM, "out of memory");
    return queue_request(c, r, rl_build_queue_push(&r->cmd, c, queue, message, message_len, delay_ms));
}
