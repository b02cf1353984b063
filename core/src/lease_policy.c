/* The lease policy (docs/semantics.md, "Leases"): the table of leases and
 * what it decides (from the block in hand or a remembered denial, when to
 * fetch the next block and how big, when a block ends and what it gives
 * back, what a LEASE reply grants). It knows no client, connection or
 * thread: the caller holds the table's lock and passes the time; what is to
 * be sent it hands to a carrier (lease.c, lease_async.c), and
 * core/tests/test_lease_policy.c drives it with a fake clock and replies.
 *
 * An entry is one (name, id, spec, lease_ms): its block, the next block's
 * size, the fetch in progress (single flight) and a denial it remembers. */
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

static void free_entry(rl_lease *e)
{
    free(e->name);
    free(e->id);
    free(e);
}

void rl_leases_free(rl_leases *t)
{
    if (!t) return;
    for (int b = 0; b < LEASE_BUCKETS; b++)
        for (rl_lease *e = t->buckets[b], *next; e; e = next) {
            next = e->next;
            free_entry(e); /* nothing is parked: every fetch completed before the close freed us */
        }
    pthread_cond_destroy(&t->fetched);
    pthread_mutex_destroy(&t->mutex);
    free(t->clocks);
    free(t);
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

int rl_lease_bucket(const char *name, const char *id)
{
    return (int)(hash_of(name, id) % LEASE_BUCKETS);
}

static int same_rates(const rl_spec *a, const rl_spec *b)
{
    rl_rate ra[RL_MAX_RATES], rb[RL_MAX_RATES];
    size_t na = rl_spec_rates(a, ra), nb = rl_spec_rates(b, rb);
    return a->algorithm == b->algorithm && a->initial_tokens == b->initial_tokens && a->scope == b->scope &&
           na == nb && !memcmp(ra, rb, na * sizeof ra[0]);
}

rl_lease *rl_lease_entry(rl_leases *t, const rl_request *req, int64_t now, int create)
{
    uint64_t h = hash_of(req->name, req->id);
    rl_lease **slot = &t->buckets[h % LEASE_BUCKETS];
    for (rl_lease *e = *slot; e; e = e->next)
        if (e->hash == h && e->lease_ms == req->lease_ms && !strcmp(e->name, req->name) && !strcmp(e->id, req->id) &&
            same_rates(&e->spec, &req->spec))
            return e;
    if (!create || t->count >= LEASE_MAX_ENTRIES) return NULL;
    rl_lease *e = calloc(1, sizeof *e);
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

static int same_entity(const rl_lease *a, const rl_lease *b)
{
    return a->hash == b->hash && !strcmp(a->name, b->name) && !strcmp(a->id, b->id);
}

void rl_lease_forget_denials(rl_leases *t, const rl_lease *e)
{
    for (rl_lease *x = t->buckets[e->hash % LEASE_BUCKETS]; x; x = x->next)
        if (same_entity(x, e)) x->denied_until_ms = 0;
}

/* ---- the block ------------------------------------------------------------------ */

/* Worth a GIVE_BACK: permits unused, or time booked that was not used
 * where the script re-times it (token_bucket and leaky_bucket book the
 * block's validity ahead, sliding_log logs it ahead; gcra, fixed_window and
 * sliding_window give back only unused permits, so a used-up block costs
 * them no script). */
int rl_lease_worth_giving_back(const rl_lease *e, int64_t now)
{
    rl_algorithm a = e->spec.algorithm;
    int retimed = a == RL_TOKEN_BUCKET || a == RL_LEAKY_BUCKET || a == RL_SLIDING_LOG;
    return e->block > 0 && (e->left > 0 || (retimed && now < e->valid_until_ms));
}

/* The next size adapts: it doubles when the block went in under half its
 * validity, halves when more than half came back. */
void rl_lease_end_block(rl_lease *e, int64_t now, const rl_lease_carrier *carry)
{
    if (e->block == 0) return;
    int64_t validity = e->valid_until_ms - e->taken_at_ms;
    if (e->left * 2 > e->block) {
        e->size = e->size > 1 ? e->size / 2 : 1;
    } else if (e->left == 0 && (now - e->taken_at_ms) * 2 < validity) {
        int64_t grown = e->size * 2, cap = e->block * 4; /* never far past what Redis grants */
        e->size = grown < cap ? grown : cap;
        if (e->size > LEASE_MAX_BLOCK) e->size = LEASE_MAX_BLOCK;
    }
    if (carry && rl_lease_worth_giving_back(e, now)) carry->give_back(carry->ctx, e, e->left);
    e->block = e->left = 0;
    e->valid_until_ms = 0;
}

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* n permits out of the block. */
static void take(rl_lease *e, int64_t n, int64_t now, int local, rl_result *out)
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

static void remembered_denial(const rl_lease *e, int64_t now, rl_result *out)
{
    int64_t elapsed = now - e->denied_at_ms;
    *out = e->denial;
    out->retry_after_ms = e->denial.retry_after_ms - elapsed > 1 ? e->denial.retry_after_ms - elapsed : 1;
    out->reset_after_ms = e->denial.reset_after_ms - elapsed > 0 ? e->denial.reset_after_ms - elapsed : 0;
    out->local = 1;
}

static void remember_denial(rl_lease *e, int64_t need, int64_t now, const rl_result *denial)
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

int rl_lease_decide_local(rl_lease *e, rl_op op, int64_t permits, int64_t now, rl_result *out)
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

rl_lease_step rl_lease_decide(rl_lease *e, rl_op op, int64_t permits, int64_t now, const void *fetcher, rl_result *out,
                     int64_t *want, const rl_lease_carrier *carry)
{
    int64_t need = need_of(op, permits);
    e->last_used_ms = now;
    if (rl_lease_decide_local(e, op, permits, now, out)) return STEP_LOCAL;
    if (e->fetching) return fetcher && e->fetcher == fetcher ? STEP_PLAIN : STEP_BUSY;
    if (now < e->plain_until_ms) return STEP_PLAIN;
    /* a submission's GIVE_BACK is carried before its LEASE (same order on
     * the I/O thread); a blocking fetcher's goes in its own pipeline */
    if (fetcher && rl_lease_worth_giving_back(e, now)) {
        e->pending = 1;
        e->pending_left = e->left;
    }
    rl_lease_end_block(e, now, fetcher ? NULL : carry);
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

/* e's grant, sent at sent_ms and read by now, shows Redis's clock (that of
 * the server holding e's slot) ahead of where the grants before put it:
 * the bookings made before the step end earlier than this client counts.
 * Keeps the bound per slot, not per server: a failover or a resharding
 * that moves the slot to a server whose clock is ahead is a step too. */
static int clock_stepped(rl_leases *t, const rl_lease *e, int64_t sent_ms, int64_t now)
{
    if (!t->clocks) return 0; /* not watched (memory out) */
    rl_server_clock *k = &t->clocks[e->slot];
    int64_t at_most = e->granted_server_ms - sent_ms, at_least = e->granted_server_ms - now;
    int64_t bound = k->ahead_ms + (now - k->at_ms) / CLOCK_DRIFT_DIVISOR;
    int stepped = k->at_ms && at_least > bound + CLOCK_STEP_TOLERANCE_MS;
    k->ahead_ms = !k->at_ms || stepped || at_most < bound ? at_most : bound;
    k->at_ms = now;
    return stepped;
}

/* The timer looks at e by due (its block's end, or when it may be freed). */
static void watch(rl_leases *t, int64_t due, int *wake_timer)
{
    if (t->next_due_ms && t->next_due_ms <= due) return;
    __atomic_store_n(&t->next_due_ms, due, __ATOMIC_RELAXED); /* the timer reads it unlocked */
    *wake_timer = 1;
}

rl_lease_got rl_lease_granted(rl_leases *t, rl_lease *e, int status, const redisReply *reply, int64_t sent_ms, int64_t now,
                     rl_op op, int64_t permits, rl_result *out, int *wake_timer, int *stepped)
{
    int64_t v_eff = 0, block = 0;
    rl_lease_got g = GOT_RESULT;
    rl_result res;
    if (status == RL_OK)
        status = decode_grant(reply, e->spec.more_count + 1, &res, &v_eff, &block, e->handles, &e->granted_server_ms);
    e->fetching = 0;
    e->fetcher = NULL;
    e->pending = 0;
    e->fetches++;
    e->fetch_status = status;
    snprintf(e->fetch_error, sizeof e->fetch_error, "%s", status ? rl_errmsg() : "");
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
    *stepped = clock_stepped(t, e, sent_ms, now);
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

/* ---- the timer ------------------------------------------------------------------- */

int64_t rl_leases_sweep(rl_leases *t, int64_t now, const rl_lease_carrier *carry)
{
    int64_t next = 0;
    for (int b = 0; b < LEASE_BUCKETS; b++)
        for (rl_lease **p = &t->buckets[b]; *p;) {
            rl_lease *e = *p;
            if (e->block && !e->fetching && now >= e->valid_until_ms) rl_lease_end_block(e, now, carry);
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
    return next;
}
