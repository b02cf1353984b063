/* Leases (docs/semantics.md, "Leases"): a client takes permits from Redis
 * in blocks (limit.lua's LEASE op), decides from memory until the block is
 * used or its validity ends, and gives back what is left (GIVE_BACK).
 *
 * One table per client under one mutex, held only to read or change an
 * entry: a local decision takes that lock, allocates nothing and sends
 * nothing. An entry is one (name, id, spec, lease_ms): its block, the next
 * block's size, the fetch in progress (single flight: blocking callers wait
 * on a condition variable, submissions park on the entry) and a denial it
 * remembers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lease.h"

rl_leases *rl_leases_new(void)
{
    rl_leases *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    pthread_mutex_init(&t->mutex, NULL);
    pthread_cond_init(&t->fetched, NULL);
    return t;
}

static void free_entry(lease *e)
{
    free(e->name);
    free(e->id);
    free(e);
}

void rl_leases_free(rl_leases *t)
{
    if (!t) return;
    for (int b = 0; b < LEASE_BUCKETS; b++)
        for (lease *e = t->buckets[b], *next; e; e = next) {
            next = e->next;
            free_entry(e); /* nothing is parked: every fetch completed before the close freed us */
        }
    pthread_cond_destroy(&t->fetched);
    pthread_mutex_destroy(&t->mutex);
    free(t->clocks);
    free(t);
}

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

/* ---- the table -------------------------------------------------------------- */

static uint64_t fnv(uint64_t h, const void *p, size_t len)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < len; i++) h = (h ^ s[i]) * 1099511628211ULL;
    return h;
}

/* By entity only: its leases under every spec share a bucket, so ending
 * them (a reset, a refund) looks in one. */
static uint64_t hash_of(const char *name, const char *id)
{
    return fnv(fnv(14695981039346656037ULL, name, strlen(name) + 1), id, strlen(id) + 1);
}

static int same_rates(const rl_spec *a, const rl_spec *b)
{
    rl_rate ra[RL_MAX_RATES], rb[RL_MAX_RATES];
    size_t na = rl_spec_rates(a, ra), nb = rl_spec_rates(b, rb);
    return a->algorithm == b->algorithm && a->initial_tokens == b->initial_tokens && a->scope == b->scope &&
           na == nb && !memcmp(ra, rb, na * sizeof ra[0]);
}

/* The entry for req, made if new (create); NULL when the table is full or
 * memory out. */
lease *rl_lease_entry(rl_leases *t, const rl_request *req, int64_t now, int create)
{
    uint64_t h = hash_of(req->name, req->id);
    lease **slot = &t->buckets[h % LEASE_BUCKETS];
    for (lease *e = *slot; e; e = e->next)
        if (e->hash == h && e->lease_ms == req->lease_ms && !strcmp(e->name, req->name) && !strcmp(e->id, req->id) &&
            same_rates(&e->spec, &req->spec))
            return e;
    if (!create || t->count >= LEASE_MAX_ENTRIES) return NULL;
    lease *e = calloc(1, sizeof *e);
    if (!e || !(e->name = strdup(req->name)) || !(e->id = strdup(req->id))) {
        if (e) free_entry(e);
        return NULL;
    }
    e->hash = h;
    e->spec = req->spec;
    e->lease_ms = req->lease_ms;
    e->size = req->op == RL_OP_ACQUIRE ? req->permits : 1;
    e->last_used_ms = now;
    e->next = *slot;
    *slot = e;
    t->count++;
    return e;
}

/* ---- commands ----------------------------------------------------------------- */

void rl_lease_request(const lease *e, rl_request *req, rl_op op, int64_t permits, int64_t max_wait)
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

void rl_lease_build(rl_cmd *cmd, rl_client *c, const lease *e, int64_t want)
{
    rl_request req;
    rl_lease_request(e, &req, (rl_op)OP_LEASE, want, e->lease_ms);
    rl_build_decision(cmd, c, &req);
    append_booking_id(cmd);
    rl_stats_lease_call(c, e->name);
}

static int same_entity(const lease *a, const lease *b)
{
    return a->hash == b->hash && !strcmp(a->name, b->name) && !strcmp(a->id, b->id);
}

/* A write of ours that can free permits on e's entity (a give-back, a
 * refund, a reset, a rate change): Redis may admit what its denials said
 * no to. */
static void forget_denials(rl_leases *t, const lease *e)
{
    for (lease *x = t->buckets[e->hash % LEASE_BUCKETS]; x; x = x->next)
        if (same_entity(x, e)) x->denied_until_ms = 0;
}

/* GIVE_BACK of unused permits of the block in hand (or just ended), with
 * its handles. */
static void build_give_back(rl_cmd *cmd, rl_client *c, const lease *e, int64_t unused)
{
    rl_request req;
    forget_denials(c->leases, e);
    rl_lease_request(e, &req, (rl_op)OP_GIVE_BACK, unused, 0);
    rl_build_decision(cmd, c, &req);
    for (int i = 0; i < e->nhandles; i++) rl_cmd_copy(cmd, e->handles[i], strlen(e->handles[i]));
    rl_stats_lease_call(c, e->name);
}

/* ---- the block ------------------------------------------------------------------ */

/* Worth a GIVE_BACK: permits unused, or time booked that was not used
 * where the script re-times it (token_bucket and leaky_bucket book the
 * block's validity ahead, sliding_log logs it ahead; gcra, fixed_window and
 * sliding_window give back only unused permits, so a used-up block costs
 * them no script). */
static int worth_giving_back(const lease *e, int64_t now)
{
    rl_algorithm a = e->spec.algorithm;
    int retimed = a == RL_TOKEN_BUCKET || a == RL_LEAKY_BUCKET || a == RL_SLIDING_LOG;
    return e->block > 0 && (e->left > 0 || (retimed && now < e->valid_until_ms));
}

/* Ends the block in hand: the next size adapts (doubles when the block
 * went in under half its validity, halves when more than half came back);
 * with give_back, its GIVE_BACK as a silent request to send (NULL: none). */
static areq *end_block(rl_client *c, lease *e, int64_t now, int give_back)
{
    areq *r = NULL;
    if (e->block == 0) return NULL;
    int64_t validity = e->valid_until_ms - e->taken_at_ms;
    if (e->left * 2 > e->block) {
        e->size = e->size > 1 ? e->size / 2 : 1;
    } else if (e->left == 0 && (now - e->taken_at_ms) * 2 < validity) {
        int64_t grown = e->size * 2, cap = e->block * 4; /* never far past what Redis grants */
        e->size = grown < cap ? grown : cap;
        if (e->size > LEASE_MAX_BLOCK) e->size = LEASE_MAX_BLOCK;
    }
    if (give_back && worth_giving_back(e, now) && (r = rl_async_req_new(REQ_DECISION))) {
        r->silent = 1;
        build_give_back(&r->cmd, c, e, e->left);
    }
    e->block = e->left = 0;
    e->valid_until_ms = 0;
    return r;
}

/* Sends silent requests (GIVE_BACK) from a caller's thread; fire and
 * forget: one that fails is dropped (the permits stay counted: safe). */
void rl_lease_send_all(rl_client *c, areq *list)
{
    for (areq *r = list, *next; r; r = next) {
        next = r->next;
        rl_async_send(c, r);
    }
}

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* n permits out of the block. */
static void take(lease *e, int64_t n, int64_t now, int local, rl_result *out)
{
    e->left -= n;
    *out = e->grant;
    out->allowed = 1;
    out->remaining = e->grant.remaining + e->left;
    out->retry_after_ms = -1;
    int64_t reset = e->grant.reset_after_ms - (now - e->taken_at_ms);
    out->reset_after_ms = reset > 0 ? reset : 0;
    out->wait_ms = 0;
    out->fallback = 0;
    out->granted = n;
    out->local = local;
}

static void remembered_denial(const lease *e, int64_t now, rl_result *out)
{
    int64_t elapsed = now - e->denied_at_ms;
    *out = e->denial;
    out->retry_after_ms = e->denial.retry_after_ms - elapsed > 1 ? e->denial.retry_after_ms - elapsed : 1;
    out->reset_after_ms = e->denial.reset_after_ms - elapsed > 0 ? e->denial.reset_after_ms - elapsed : 0;
    out->local = 1;
}

static void remember_denial(lease *e, int64_t need, int64_t now, const rl_result *denial)
{
    e->denial = *denial;
    e->denied_permits = need;
    e->denied_at_ms = now;
    e->denied_until_ms = now + min64(denial->retry_after_ms > 0 ? denial->retry_after_ms : 0, e->lease_ms);
}

static int64_t need_of(rl_op op, int64_t permits)
{
    return op == RL_OP_ACQUIRE_UP_TO ? 1 : permits;
}

int rl_lease_decide_local(lease *e, rl_op op, int64_t permits, int64_t now, rl_result *out)
{
    int64_t need = need_of(op, permits);
    if (now < e->denied_until_ms && need >= e->denied_permits) {
        remembered_denial(e, now, out);
    } else if (now < e->valid_until_ms && e->left >= need) {
        take(e, op == RL_OP_ACQUIRE_UP_TO ? min64(permits, e->left) : permits, now, 1, out);
    } else {
        return 0;
    }
    e->last_used_ms = now;
    return 1;
}

/* One decision under the table's lock. */
step rl_lease_decide(rl_client *c, lease *e, rl_op op, int64_t permits, int64_t now, const void *fetcher,
                     rl_result *out, int64_t *want, areq **give_back)
{
    int64_t need = need_of(op, permits);
    e->last_used_ms = now;
    if (rl_lease_decide_local(e, op, permits, now, out)) return STEP_LOCAL;
    if (e->fetching) return fetcher && e->fetcher == fetcher ? STEP_PLAIN : STEP_BUSY;
    if (now < e->plain_until_ms) return STEP_PLAIN;
    /* a submission's GIVE_BACK is queued before its LEASE (same order on
     * the I/O thread); a blocking fetcher's goes in its own pipeline */
    if (fetcher && worth_giving_back(e, now)) {
        e->pending = 1;
        e->pending_left = e->left;
    }
    areq *r = end_block(c, e, now, !fetcher);
    if (r) {
        r->next = *give_back;
        *give_back = r;
    }
    e->fetching = 1;
    e->fetcher = fetcher;
    e->fetch_generation = e->generation;
    *want = e->size > need ? e->size : need;
    if (op == RL_OP_ACQUIRE_UP_TO && permits > *want) *want = min64(permits, LEASE_MAX_BLOCK);
    return STEP_FETCH;
}

/* ---- a fetch's end ------------------------------------------------------------- */

/* The LEASE reply: a denial (as an ACQUIRE of 1's, block 0), or the grant
 * with its validity, block, one handle per rate and the server's time (ms)
 * it was granted at. */
static int decode_grant(const redisReply *r, size_t nrates, rl_result *res, int64_t *v_eff, int64_t *block,
                        char (*handles)[LEASE_HANDLE_MAX + 1], int64_t *server_ms)
{
    int64_t v[8];
    int rc;
    if ((rc = rl_reply_int(r, 0, &v[0]))) return rc;
    if (!v[0]) {
        *block = 0;
        return rl_decode_result(r, res);
    }
    if (r->elements != 9 + nrates) return rl_fail(RL_ERR_PROTOCOL, "a lease reply had %zu parts", r->elements);
    for (size_t i = 1; i < 8; i++)
        if ((rc = rl_reply_int(r, i, &v[i]))) return rc;
    if ((rc = rl_reply_int(r, 8 + nrates, server_ms))) return rc;
    if (v[5] < 0 || v[6] < 1 || v[7] < 0 || v[7] >= (int64_t)nrates)
        return rl_fail(RL_ERR_PROTOCOL, "a lease reply granted %lld permits for %lld ms", (long long)v[6],
                       (long long)v[5]);
    for (size_t i = 0; i < nrates; i++) {
        const redisReply *h = r->element[8 + i];
        if (h->type != REDIS_REPLY_STRING || h->len < 1 || h->len > LEASE_HANDLE_MAX)
            return rl_fail(RL_ERR_PROTOCOL, "a lease reply's handle %zu is not a short string", i);
        memcpy(handles[i], h->str, h->len);
        handles[i][h->len] = '\0';
    }
    memset(res, 0, sizeof *res);
    res->allowed = 1;
    res->limit = v[1];
    res->remaining = v[2];
    res->retry_after_ms = -1;
    res->reset_after_ms = v[4];
    res->rate_index = (int)v[7];
    *v_eff = v[5];
    *block = v[6];
    return RL_OK;
}

/* Redis's clock may drift from ours this much (1 ms a second: twice what
 * NTP slews at most) and round to whole ms (1 ms each side): a grant
 * further ahead than that means its clock stepped. */
#define CLOCK_DRIFT_DIVISOR 1000
#define CLOCK_STEP_TOLERANCE_MS 5

static int slot_of(const rl_client *c, const lease *e)
{
    char key[600];
    int n = rl_key(c, e->name, e->id, e->spec.algorithm, key, sizeof key);
    return n > 0 && (size_t)n < sizeof key ? rl_key_slot(key, (size_t)n) : 0;
}

/* e's grant, sent at sent_ms and read by now, shows Redis's clock (that of
 * the server holding e's slot) ahead of where the grants before put it:
 * the bookings made before the step end earlier than this client counts.
 * Keeps the bound per slot, not per server: a failover or a resharding
 * that moves the slot to a server whose clock is ahead is a step too. */
static int clock_stepped(rl_client *c, lease *e, int64_t sent_ms, int64_t now)
{
    rl_leases *t = c->leases;
    int cluster = c->url.mode == RL_MODE_CLUSTER;
    if (!t->clocks && !(t->clocks = calloc(cluster ? RL_CLUSTER_SLOTS : 1, sizeof *t->clocks))) return 0;
    e->slot = cluster ? slot_of(c, e) : 0;
    server_clock *k = &t->clocks[e->slot];
    int64_t at_most = e->granted_server_ms - sent_ms, at_least = e->granted_server_ms - now;
    int64_t bound = k->ahead_ms + (now - k->at_ms) / CLOCK_DRIFT_DIVISOR;
    int stepped = k->at_ms && at_least > bound + CLOCK_STEP_TOLERANCE_MS;
    k->ahead_ms = !k->at_ms || stepped || at_most < bound ? at_most : bound;
    k->at_ms = now;
    return stepped;
}

/* Redis's clock stepped forward: the leases on that server (off a cluster,
 * all) end at once, their blocks dropped without a give-back (as Redis now
 * counts, their bookings may have run out: what the client gave back could
 * be the permits of others' later calls), and a fetch under way drops what
 * it brings. Not `except`, whose grant came after the step. */
static void end_leases_on_server(rl_client *c, const lease *except, int64_t now)
{
    rl_leases *t = c->leases;
    rl_node *server = NULL, *node = NULL;
    int due, cluster = c->url.mode == RL_MODE_CLUSTER;
    if (cluster) rl_route_cached(c, except->slot, &server, &due);
    for (int b = 0; b < LEASE_BUCKETS; b++)
        for (lease *e = t->buckets[b]; e; e = e->next) {
            if (e == except || (cluster && e->slot != except->slot &&
                                (rl_route_cached(c, e->slot, &node, &due) || node != server)))
                continue;
            end_block(c, e, now, 0);
            e->generation++;
        }
}

/* The timer looks at e by due (its block's end, or when it may be freed). */
static void watch(rl_leases *t, int64_t due, int *wake_timer)
{
    if (t->next_due_ms && t->next_due_ms <= due) return;
    __atomic_store_n(&t->next_due_ms, due, __ATOMIC_RELAXED); /* the timer reads it unlocked */
    *wake_timer = 1;
}

/* Under the lock: the fetch of e ended (status, and on RL_OK its reply);
 * sets the fetcher's result, or says it needs a plain acquire (the block
 * is smaller than the permits it asked for). Wakes the waiters. */
got rl_lease_fetched_locked(rl_client *c, lease *e, int status, const redisReply *reply, int64_t sent_ms, rl_op op,
                            int64_t permits, rl_result *out, int *wake_timer)
{
    rl_leases *t = c->leases;
    int64_t v_eff = 0, block = 0, now = rl_now_ms();
    got g = GOT_RESULT;
    rl_result res;
    if (status == RL_OK)
        status = decode_grant(reply, e->spec.more_count + 1, &res, &v_eff, &block, e->handles, &e->granted_server_ms);
    e->fetching = 0;
    e->fetcher = NULL;
    e->pending = 0;
    e->fetches++;
    e->fetch_status = status;
    snprintf(e->fetch_error, sizeof e->fetch_error, "%s", status ? rl_errmsg() : "");
    pthread_cond_broadcast(&t->fetched);
    if (status || !block) watch(t, now + LEASE_IDLE_FREE_MS + 1, wake_timer); /* freed if unused */
    if (status) return GOT_ERROR;
    /* the leases ended while it was under way: what it brings may predate that */
    int stale = e->fetch_generation != e->generation;
    if (!block) { /* denied */
        if (!stale) remember_denial(e, 1, now, &res);
        *out = res;
        out->local = 0;
        return GOT_RESULT;
    }
    if (clock_stepped(c, e, sent_ms, now)) end_leases_on_server(c, e, now);
    e->denied_until_ms = 0;
    e->block = e->left = block;
    e->taken_at_ms = sent_ms;
    e->valid_until_ms = sent_ms + v_eff;
    if (v_eff == 0) {
        e->plain_for_ms = e->plain_for_ms ? min64(e->plain_for_ms * 2, e->lease_ms) : 1;
        e->plain_until_ms = now + e->plain_for_ms;
    } else {
        e->plain_for_ms = 0;
    }
    e->grant = res;
    e->nhandles = (int)e->spec.more_count + 1;
    /* the fetcher's decision is Redis's, made at the grant: valid however
     * long the reply took */
    if (op == RL_OP_ACQUIRE_UP_TO || e->left >= permits)
        take(e, op == RL_OP_ACQUIRE_UP_TO ? min64(permits, e->left) : permits, now, 0, out);
    else g = GOT_PLAIN;
    if (stale) { /* the rest is dropped */
        e->block = e->left = 0;
        e->valid_until_ms = 0;
    }
    watch(t, e->block ? e->valid_until_ms : now + LEASE_IDLE_FREE_MS + 1, wake_timer);
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
    areq *give_back = NULL;
    int claimed = 0;
    int64_t deadline = 0;
    pthread_mutex_lock(&t->mutex);
    for (size_t i = 0; i < n; i++) {
        const rl_request *req = &requests[i];
        plan[i] = RL_PLAN_PLAIN;
        if (outcomes[i].status || !rl_lease_applies(c, req)) continue;
        int64_t now = rl_now_ms();
        lease *e = rl_lease_entry(t, req, now, 1);
        if (!e) continue;
        for (;;) {
            step s = rl_lease_decide(c, e, req->op, req->permits, now, outcomes, &results[i], &wants[i], &give_back);
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
    rl_lease_send_all(c, give_back);
}

/* A blocking fetch's end: request req's result in *out (status RL_OK), or
 * RL_LEASE_AGAIN when it must be asked again without the lease. */
int rl_lease_fetched(rl_client *c, const rl_request *req, int status, const redisReply *reply, int64_t sent_ms,
                     rl_result *out)
{
    rl_leases *t = c->leases;
    int wake = 0;
    pthread_mutex_lock(&t->mutex);
    lease *e = rl_lease_entry(t, req, sent_ms, 0); /* fetching: it is there */
    got g = e ? rl_lease_fetched_locked(c, e, status, reply, sent_ms, req->op, req->permits, out, &wake) : GOT_ERROR;
    int rc = g == GOT_PLAIN ? RL_LEASE_AGAIN : g == GOT_ERROR ? (e ? e->fetch_status : RL_ERR_NOMEM) : RL_OK;
    pthread_mutex_unlock(&t->mutex);
    if (e) rl_lease_serve_parked(c, e, wake);
    return rc;
}

int rl_lease_build_give_back(rl_cmd *cmd, rl_client *c, const rl_request *req)
{
    rl_leases *t = c->leases;
    pthread_mutex_lock(&t->mutex);
    lease *e = rl_lease_entry(t, req, 0, 0);
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
    areq *list = NULL;
    size_t n = 0, cap = 0;
    rl_cmd *cmds = NULL;
    if (!t) return;
    int64_t now = rl_now_ms();
    /* one entity's leases share a bucket */
    int first = 0, last = LEASE_BUCKETS - 1;
    if (name && id) first = last = (int)(hash_of(name, id) % LEASE_BUCKETS);
    pthread_mutex_lock(&t->mutex);
    /* counted first: a built command points into itself (rl_cmd), so the
     * array never moves once built */
    for (int b = first; how == RL_LEASES_GIVE_BACK_NOW && b <= last; b++)
        for (lease *e = t->buckets[b]; e; e = e->next)
            cap += (!name || !strcmp(e->name, name)) && (!id || !strcmp(e->id, id)) && worth_giving_back(e, now);
    /* without memory their permits stay counted until the validity ends */
    if (cap && !(cmds = malloc(cap * sizeof *cmds))) cap = 0;
    for (int b = first; b <= last; b++)
        for (lease *e = t->buckets[b]; e; e = e->next) {
            if ((name && strcmp(e->name, name)) || (id && strcmp(e->id, id))) continue;
            if (how == RL_LEASES_GIVE_BACK_NOW && worth_giving_back(e, now) && n < cap)
                build_give_back(&cmds[n++], c, e, e->left);
            areq *r = end_block(c, e, now, how == RL_LEASES_GIVE_BACK);
            if (r) {
                r->next = list;
                list = r;
            }
            e->generation++;
            e->denied_until_ms = 0; /* a refund, a reset, a rate change may free permits */
        }
    pthread_mutex_unlock(&t->mutex);
    rl_lease_send_all(c, list);
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
    areq *list = NULL;
    int64_t next = 0;
    pthread_mutex_lock(&t->mutex);
    for (int b = 0; b < LEASE_BUCKETS; b++)
        for (lease **p = &t->buckets[b]; *p;) {
            lease *e = *p;
            if (e->block && !e->fetching && now >= e->valid_until_ms) {
                areq *r = end_block(c, e, now, 1);
                if (r) {
                    r->next = list;
                    list = r;
                }
            }
            if (!e->block && !e->fetching && !e->parked && !e->users && now >= e->denied_until_ms &&
                now - e->last_used_ms > LEASE_IDLE_FREE_MS) {
                *p = e->next;
                t->count--;
                free_entry(e);
                continue;
            }
            int64_t when = e->block ? e->valid_until_ms : e->last_used_ms + LEASE_IDLE_FREE_MS + 1;
            if (!e->fetching && (!next || when < next)) next = when;
            p = &e->next;
        }
    __atomic_store_n(&t->next_due_ms, next, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&t->mutex);
    for (areq *r = list, *nx; r; r = nx) {
        nx = r->next;
        r->deadline_ms = now + c->options.command_timeout_ms;
        rl_async_dispatch(a, r);
    }
    return next ? next : -1;
}
