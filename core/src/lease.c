/* Leases (docs/semantics.md, "Leases"): a client takes permits from Redis
 * in blocks (limit.lua's LEASE op), decides from memory until the block is
 * used or its validity ends, and gives back what is left (GIVE_BACK).
 *
 * What to decide is lease_policy.c's; this file carries it: the LEASE and
 * GIVE_BACK commands, the blocking path (a batch's plan, waiting on another
 * caller's fetch), ending leases and the I/O thread's timer. One table per
 * client under one mutex, held only to read or change an entry: a local
 * decision takes that lock, allocates nothing and sends nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "async.h"
#include "lease.h"

/* A forked child drops the parent's leases without giving back (the
 * parent owns them) and starts an empty table. */
void rl_leases_abandon(rl_client *c)
{
    if (c->leases) rl_fork_leave(c->leases);
    c->leases = rl_leases_new();
}

int rl_lease_applies(const rl_client *c, const rl_request *req)
{
    return req->lease_ms > 0 && req->now_ms == 0 && c->leases &&
           (req->op == RL_OP_ACQUIRE || req->op == RL_OP_ACQUIRE_UP_TO);
}

/* ---- commands ----------------------------------------------------------------- */

void rl_lease_request(const rl_lease *e, rl_request *req, rl_op op, int64_t permits, int64_t max_wait)
{
    memset(req, 0, sizeof *req);
    req->name = e->name;
    req->id = e->id;
    req->spec = e->spec;
    req->op = op;
    req->permits = permits;
    req->max_wait_ms = max_wait;
}

/* A LEASE's last argument: its booking's identity, which the state keeps
 * and a give-back must show (random: unique across clients, forks and
 * resets, which a counter or a time would not be). */
static void append_booking_id(rl_cmd *cmd)
{
    static uint64_t fallback;
    uint64_t id;
    char hex[17];
    if (rl_random_bytes(&id, sizeof id)) id = ((uint64_t)rl_now_ms() << 20) ^ __atomic_add_fetch(&fallback, 1, __ATOMIC_RELAXED);
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)id);
    rl_cmd_copy(cmd, hex, 16);
}

void rl_lease_build(rl_cmd *cmd, rl_client *c, const rl_lease *e, int64_t want)
{
    rl_request req;
    rl_lease_request(e, &req, (rl_op)OP_LEASE, want, e->lease_ms);
    rl_build_decision(cmd, c, &req);
    append_booking_id(cmd);
    rl_stats_lease_call(c, e->name);
}

/* GIVE_BACK of unused permits of the block in hand (or just ended), with
 * its handles. */
static void build_give_back(rl_cmd *cmd, rl_client *c, const rl_lease *e, int64_t unused)
{
    rl_request req;
    rl_lease_forget_denials(c->leases, e);
    rl_lease_request(e, &req, (rl_op)OP_GIVE_BACK, unused, 0);
    rl_build_decision(cmd, c, &req);
    for (int i = 0; i < e->nhandles; i++) rl_cmd_copy(cmd, e->handles[i], strlen(e->handles[i]));
    rl_stats_lease_call(c, e->name);
}

/* The carrier of a policy call's give-backs: silent requests, sent after
 * the lock is released (rl_lease_send_all). Without memory one is not
 * sent: its permits stay counted until the validity ends. */
static void queue_give_back(void *ctx, const rl_lease *e, int64_t unused)
{
    rl_give_backs *g = ctx;
    rl_areq *r = rl_async_req_new(REQ_DECISION);
    if (!r) return;
    r->silent = 1;
    build_give_back(&r->cmd, g->client, e, unused);
    r->next = g->list;
    g->list = r;
}

void rl_give_backs_init(rl_give_backs *g, rl_client *c)
{
    g->carrier.give_back = queue_give_back;
    g->carrier.ctx = g;
    g->client = c;
    g->list = NULL;
}

/* Sends silent requests (GIVE_BACK) from a caller's thread; fire and
 * forget: one that fails is dropped (the permits stay counted: safe). */
void rl_lease_send_all(rl_client *c, rl_areq *list)
{
    for (rl_areq *r = list, *next; r; r = next) {
        next = r->next;
        rl_async_send(c, r);
    }
}

/* ---- a fetch's end ------------------------------------------------------------- */

static int slot_of(const rl_client *c, const rl_lease *e)
{
    char key[600];
    int n = rl_key(c, e->name, e->id, e->spec.algorithm, key, sizeof key);
    return n > 0 && (size_t)n < sizeof key ? rl_key_slot(key, (size_t)n) : 0;
}

/* Where the policy keeps Redis's clock for e: its slot's (one off a
 * cluster), the table made at the first fetch's end (NULL: not watched). */
static void clock_slot(rl_client *c, rl_lease *e)
{
    int cluster = c->url.mode == RL_MODE_CLUSTER;
    if (!c->leases->clocks) c->leases->clocks = calloc(cluster ? RL_CLUSTER_SLOTS : 1, sizeof *c->leases->clocks);
    e->slot = cluster ? slot_of(c, e) : 0;
}

/* Redis's clock stepped forward: the leases on that server (off a cluster,
 * all) end at once, their blocks dropped without a give-back (as Redis now
 * counts, their bookings may have run out: what the client gave back could
 * be the permits of others' later calls), and a fetch under way drops what
 * it brings. Not `except`, whose grant came after the step. */
static void end_leases_on_server(rl_client *c, const rl_lease *except, int64_t now)
{
    rl_leases *t = c->leases;
    rl_node *server = NULL, *node = NULL;
    int due, cluster = c->url.mode == RL_MODE_CLUSTER;
    if (cluster) rl_route_cached(c, except->slot, &server, &due);
    for (int b = 0; b < LEASE_BUCKETS; b++)
        for (rl_lease *e = t->buckets[b]; e; e = e->next) {
            if (e == except || (cluster && e->slot != except->slot &&
                                (rl_route_cached(c, e->slot, &node, &due) || node != server)))
                continue;
            rl_lease_end_block(e, now, NULL);
            e->generation++;
        }
}

/* Under the lock: the fetch of e ended. */
rl_lease_got rl_lease_fetched_locked(rl_client *c, rl_lease *e, int status, const redisReply *reply, int64_t sent_ms, rl_op op,
                            int64_t permits, rl_result *out, int *wake_timer)
{
    int64_t now = rl_now_ms();
    int stepped = 0;
    clock_slot(c, e);
    rl_lease_got g = rl_lease_granted(c->leases, e, status, reply, sent_ms, now, op, permits, out, wake_timer, &stepped);
    pthread_cond_broadcast(&c->leases->fetched);
    if (stepped) end_leases_on_server(c, e, now);
    return g;
}

/* Plans a batch's leased requests: each is decided from memory (plan
 * RL_PLAN_DONE, its outcome and result set), or fetches its entry's next
 * block (RL_PLAN_FETCH, want in wants[i]), or goes to Redis as without a
 * lease (RL_PLAN_PLAIN). A request finding another caller's fetch in progress
 * waits for it (up to the command timeout), unless this batch already
 * fetches something (two batches waiting on each other's fetch would stall). */
void rl_leases_plan(rl_client *c, const rl_request *requests, size_t n, rl_result *results, rl_outcome *outcomes,
                    char *plan, int64_t *wants)
{
    rl_leases *t = c->leases;
    rl_give_backs g;
    int claimed = 0;
    int64_t deadline = 0;
    rl_give_backs_init(&g, c);
    pthread_mutex_lock(&t->mutex);
    for (size_t i = 0; i < n; i++) {
        const rl_request *req = &requests[i];
        plan[i] = RL_PLAN_PLAIN;
        if (outcomes[i].status || !rl_lease_applies(c, req)) continue;
        int64_t now = rl_now_ms();
        rl_lease *e = rl_lease_entry(t, req, now, 1);
        if (!e) continue;
        for (;;) {
            rl_lease_step s = rl_lease_decide(e, req->op, req->permits, now, outcomes, &results[i], &wants[i], &g.carrier);
            if (s == STEP_LOCAL) {
                plan[i] = RL_PLAN_DONE;
            } else if (s == STEP_FETCH) {
                plan[i] = RL_PLAN_FETCH;
                claimed = 1;
            } else if (s == STEP_BUSY && !claimed) {
                if (!deadline) deadline = now + c->options.command_timeout_ms;
                unsigned seen = e->fetches;
                e->users++;
                struct timespec until = rl_realtime_after((int)(deadline - now > 0 ? deadline - now : 0));
                while (e->fetching && e->fetches == seen && now < deadline) {
                    pthread_cond_timedwait(&t->fetched, &t->mutex, &until);
                    now = rl_now_ms();
                }
                e->users--;
                if (e->fetches == seen) { /* still fetching at our deadline */
                    outcomes[i].status = RL_ERR_TIMEOUT;
                    snprintf(outcomes[i].error, sizeof outcomes[i].error,
                             "no block within %d ms (another caller's fetch)", c->options.command_timeout_ms);
                    plan[i] = RL_PLAN_DONE;
                } else if (e->fetch_status && !e->fetching) {
                    outcomes[i].status = e->fetch_status;
                    snprintf(outcomes[i].error, sizeof outcomes[i].error, "%s", e->fetch_error);
                    plan[i] = RL_PLAN_DONE;
                } else {
                    continue; /* decide again with the new block */
                }
            }
            break;
        }
    }
    pthread_mutex_unlock(&t->mutex);
    rl_lease_send_all(c, g.list);
}

/* A blocking fetch's end: request req's result in *out (status RL_OK), or
 * RL_LEASE_AGAIN when it must be asked again without the lease. */
int rl_lease_fetched(rl_client *c, const rl_request *req, int status, const redisReply *reply, int64_t sent_ms,
                     rl_result *out)
{
    rl_leases *t = c->leases;
    int wake = 0;
    pthread_mutex_lock(&t->mutex);
    rl_lease *e = rl_lease_entry(t, req, sent_ms, 0); /* fetching: it is there */
    rl_lease_got g = e ? rl_lease_fetched_locked(c, e, status, reply, sent_ms, req->op, req->permits, out, &wake) : GOT_ERROR;
    int rc = g == GOT_PLAIN ? RL_LEASE_AGAIN : g == GOT_ERROR ? (e ? e->fetch_status : RL_ERR_NOMEM) : RL_OK;
    pthread_mutex_unlock(&t->mutex);
    if (e) rl_lease_serve_parked(c, e, wake);
    return rc;
}

int rl_lease_build_give_back(rl_cmd *cmd, rl_client *c, const rl_request *req)
{
    rl_leases *t = c->leases;
    pthread_mutex_lock(&t->mutex);
    rl_lease *e = rl_lease_entry(t, req, 0, 0);
    int owed = e && e->pending;
    if (owed) {
        build_give_back(cmd, c, e, e->pending_left);
        e->pending = 0;
    }
    pthread_mutex_unlock(&t->mutex);
    return owed;
}

void rl_lease_build_fetch(rl_cmd *cmd, rl_client *c, const rl_request *req, int64_t want)
{
    rl_request fetch = *req;
    fetch.op = (rl_op)OP_LEASE;
    fetch.permits = want;
    fetch.max_wait_ms = req->lease_ms;
    rl_build_decision(cmd, c, &fetch);
    append_booking_id(cmd);
    rl_stats_lease_call(c, req->name);
}

/* ---- ending leases --------------------------------------------------------------- */

/* Ends this client's leases of name (NULL: all) and id (NULL: all). */
void rl_leases_end(rl_client *c, const char *name, const char *id, int how)
{
    rl_leases *t = c->leases;
    rl_give_backs g;
    size_t n = 0, cap = 0;
    rl_cmd *cmds = NULL;
    if (!t) return;
    int64_t now = rl_now_ms();
    /* one entity's leases share a bucket */
    int first = 0, last = LEASE_BUCKETS - 1;
    if (name && id) first = last = rl_lease_bucket(name, id);
    rl_give_backs_init(&g, c);
    pthread_mutex_lock(&t->mutex);
    /* counted first: a built command points into itself (rl_cmd), so the
     * array never moves once built */
    for (int b = first; how == RL_LEASES_GIVE_BACK_NOW && b <= last; b++)
        for (rl_lease *e = t->buckets[b]; e; e = e->next)
            cap += (!name || !strcmp(e->name, name)) && (!id || !strcmp(e->id, id)) &&
                   rl_lease_worth_giving_back(e, now);
    /* without memory their permits stay counted until the validity ends */
    if (cap && !(cmds = malloc(cap * sizeof *cmds))) cap = 0;
    for (int b = first; b <= last; b++)
        for (rl_lease *e = t->buckets[b]; e; e = e->next) {
            if ((name && strcmp(e->name, name)) || (id && strcmp(e->id, id))) continue;
            if (how == RL_LEASES_GIVE_BACK_NOW && rl_lease_worth_giving_back(e, now) && n < cap)
                build_give_back(&cmds[n++], c, e, e->left);
            rl_lease_end_block(e, now, how == RL_LEASES_GIVE_BACK ? &g.carrier : NULL);
            e->generation++;
            e->denied_until_ms = 0; /* a refund, a reset, a rate change may free permits */
        }
    pthread_mutex_unlock(&t->mutex);
    rl_lease_send_all(c, g.list);
    if (n) {
        redisReply **replies = calloc(n, sizeof *replies);
        rl_outcome *outcomes = calloc(n, sizeof *outcomes);
        /* one round trip per server, bounded by the command timeout; a
         * give-back that fails is dropped (the permits stay counted: safe) */
        if (replies && outcomes) rl_run_each(c, cmds, n, replies, outcomes);
        for (size_t i = 0; replies && outcomes && i < n; i++)
            if (!outcomes[i].status) rl_reply_free(replies[i]);
        free(replies);
        free(outcomes);
    }
    for (size_t i = 0; i < n; i++) rl_cmd_free(&cmds[i]);
    free(cmds);
}

int rl_leases_give_back(rl_client *c, const char *name)
{
    RL_IN_FLIGHT(c);
    rl_clear_error();
    if (!c) return rl_fail(RL_ERR_INVALID, "client must not be NULL");
    if (name && rl_check_name("name", name)) return RL_ERR_INVALID;
    rl_leases_end(c, name, NULL, RL_LEASES_GIVE_BACK_NOW);
    rl_clear_error();
    return RL_OK;
}

/* The I/O thread's timer: blocks whose validity ended are given back (an
 * idle key's within ~validity + the loop's slack), idle entries freed.
 * Returns when to look again (-1: nothing to watch). */
int64_t rl_leases_tick(rl_async *a, int64_t now)
{
    rl_client *c = a->client;
    rl_leases *t = c->leases;
    if (!t) return -1;
    int64_t due = __atomic_load_n(&t->next_due_ms, __ATOMIC_RELAXED);
    if (!due) return -1;
    if (now < due) return due;
    rl_give_backs g;
    rl_give_backs_init(&g, c);
    pthread_mutex_lock(&t->mutex);
    int64_t next = rl_leases_sweep(t, now, &g.carrier);
    pthread_mutex_unlock(&t->mutex);
    for (rl_areq *r = g.list, *nx; r; r = nx) {
        nx = r->next;
        r->deadline_ms = now + c->options.command_timeout_ms;
        rl_async_dispatch(a, r);
    }
    return next ? next : -1;
}
