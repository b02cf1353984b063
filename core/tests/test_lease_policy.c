/* The lease policy alone (lease_policy.c): no client, no Redis, no thread.
 * A fake clock (the times passed in) and fake LEASE replies drive the
 * table's decisions: when a block is fetched and how big, what is decided
 * from memory, when a block ends and what it gives back, denials
 * remembered and forgotten, a grant made stale by a reset, a grant of 0 ms,
 * a server clock that steps, and the timer's sweep. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "lease.h"

/* A reply of integers (and strings where str[i] is set), as Redis's. */
typedef struct {
    redisReply root, parts[16];
    redisReply *elements[16];
} fake_reply;

static const redisReply *reply_of(fake_reply *f, size_t n, const int64_t *ints, const char **strs)
{
    memset(f, 0, sizeof *f);
    f->root.type = REDIS_REPLY_ARRAY;
    f->root.elements = n;
    f->root.element = f->elements;
    for (size_t i = 0; i < n; i++) {
        f->elements[i] = &f->parts[i];
        if (strs && strs[i]) {
            f->parts[i].type = REDIS_REPLY_STRING;
            f->parts[i].str = (char *)strs[i];
            f->parts[i].len = strlen(strs[i]);
        } else {
            f->parts[i].type = REDIS_REPLY_INTEGER;
            f->parts[i].integer = ints[i];
        }
    }
    return &f->root;
}

/* LEASE's grant for one rate: block permits valid for validity ms, Redis's
 * clock at server_ms. */
static const redisReply *grant(fake_reply *f, int64_t block, int64_t validity, int64_t server_ms)
{
    int64_t ints[10] = {1, 100, 50, 0, 1000, validity, block, 0, 0, server_ms};
    const char *strs[10] = {NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "booking-1", NULL};
    return reply_of(f, 10, ints, strs);
}

/* LEASE's denial: as an ACQUIRE's, retry after retry_ms. */
static const redisReply *denial(fake_reply *f, int64_t retry_ms)
{
    int64_t ints[8] = {0, 100, 0, retry_ms, 1000, 0, 0, 0};
    return reply_of(f, 8, ints, NULL);
}

/* The carrier: counts the give-backs the policy asks for. */
typedef struct {
    int calls;
    int64_t unused;
} carried;

static void count_give_back(void *ctx, const rl_lease *e, int64_t unused)
{
    carried *c = ctx;
    (void)e;
    c->calls++;
    c->unused += unused;
}

/* One table with one entry (made at 1000), and what its carrier was asked
 * to give back. */
typedef struct {
    rl_leases *t;
    rl_lease *e;
    carried back;
    rl_lease_carrier carry;
    rl_result r;
    int64_t want;
    int wake, stepped;
} fixture;

static void setup(fixture *x, const char *id, rl_algorithm algorithm)
{
    rl_request req;
    memset(&req, 0, sizeof req);
    req.name = "policy";
    req.id = id;
    req.spec = (rl_spec){.algorithm = algorithm, .limit = 100, .period_ms = 1000};
    req.permits = 1;
    req.op = RL_OP_ACQUIRE;
    req.lease_ms = 500;
    memset(x, 0, sizeof *x);
    x->t = rl_leases_new();
    x->carry = (rl_lease_carrier){count_give_back, &x->back};
    x->e = rl_lease_entry(x->t, &req, 1000, 1);
    CHECK(x->e != NULL && rl_lease_entry(x->t, &req, 1000, 1) == x->e);
}

static rl_lease_step decide(fixture *x, rl_op op, int64_t permits, int64_t now, const void *fetcher)
{
    return rl_lease_decide(x->e, op, permits, now, fetcher, &x->r, &x->want, &x->carry);
}

/* The fetch's end, read at now: reply (NULL: status) to a LEASE sent at sent_ms. */
static rl_lease_got fetched(fixture *x, int status, const redisReply *reply, int64_t sent_ms, int64_t now)
{
    return rl_lease_granted(x->t, x->e, status, reply, sent_ms, now, RL_OP_ACQUIRE, 1, &x->r, &x->wake, &x->stepped);
}

/* A grant of block permits for validity ms, sent at now, read 1 ms later. */
static rl_lease_got fetch(fixture *x, int64_t now, int64_t block, int64_t validity)
{
    fake_reply f;
    return fetched(x, RL_OK, grant(&f, block, validity, 5000 + now), now, now + 1);
}

static void test_block_life(void)
{
    fixture x;
    setup(&x, "life", RL_GCRA);
    /* nothing in hand: this caller fetches, the next one waits for it */
    CHECK_EQ(decide(&x, RL_OP_ACQUIRE, 1, 1000, NULL), STEP_FETCH);
    CHECK_EQ(x.want, 1);
    CHECK_EQ(decide(&x, RL_OP_ACQUIRE, 1, 1000, NULL), STEP_BUSY);
    CHECK_EQ(fetch(&x, 1000, 10, 500), GOT_RESULT);
    CHECK(x.r.allowed && !x.r.local && x.r.granted == 1);
    CHECK_EQ(x.e->left, 9);
    CHECK_EQ(x.e->valid_until_ms, 1500); /* from before the LEASE was sent */
    /* the block decides from memory */
    for (int i = 0; i < 9; i++) {
        CHECK_EQ(decide(&x, RL_OP_ACQUIRE, 1, 1010, NULL), STEP_LOCAL);
        CHECK(x.r.allowed && x.r.local);
    }
    CHECK_EQ(x.r.remaining, 50);
    /* used up within half its validity: the next block is twice the size,
     * and nothing is given back (gcra gives back unused permits only) */
    CHECK_EQ(decide(&x, RL_OP_ACQUIRE, 1, 1020, NULL), STEP_FETCH);
    CHECK_EQ(x.want, 2);
    CHECK_EQ(x.back.calls, 0);
    CHECK_EQ(fetch(&x, 1020, 4, 500), GOT_RESULT);
    CHECK_EQ(x.e->left, 3);
    /* its validity ends with permits left: they go back, and the next
     * block is half the size */
    CHECK_EQ(decide(&x, RL_OP_ACQUIRE, 1, 1600, NULL), STEP_FETCH);
    CHECK_EQ(x.back.calls, 1);
    CHECK_EQ(x.back.unused, 3);
    CHECK_EQ(x.want, 1);
    rl_leases_free(x.t);
}

static void test_denials(void)
{
    fixture x;
    fake_reply f;
    setup(&x, "denied", RL_GCRA);
    CHECK_EQ(decide(&x, RL_OP_ACQUIRE, 1, 1000, NULL), STEP_FETCH);
    CHECK_EQ(fetched(&x, RL_OK, denial(&f, 200), 1000, 1001), GOT_RESULT);
    CHECK(!x.r.allowed && !x.r.local);
    /* remembered: denied from memory, the wait counted down */
    CHECK_EQ(decide(&x, RL_OP_ACQUIRE, 1, 1051, NULL), STEP_LOCAL);
    CHECK(!x.r.allowed && x.r.local);
    CHECK_EQ(x.r.retry_after_ms, 150);
    /* a write of ours that may free permits: Redis is asked again */
    rl_lease_forget_denials(x.t, x.e);
    CHECK_EQ(decide(&x, RL_OP_ACQUIRE, 1, 1052, NULL), STEP_FETCH);
    /* a failed fetch: the fetcher hears of it, the next caller fetches */
    CHECK_EQ(fetched(&x, RL_ERR_TIMEOUT, NULL, 1052, 1060), GOT_ERROR);
    CHECK_EQ(x.e->fetch_status, RL_ERR_TIMEOUT);
    CHECK_EQ(decide(&x, RL_OP_ACQUIRE, 1, 1061, NULL), STEP_FETCH);
    rl_leases_free(x.t);
}

static void test_stale_and_zero_grants(void)
{
    fixture x;
    setup(&x, "stale", RL_TOKEN_BUCKET);
    /* a reset while the fetch is under way: the fetcher's own result
     * stands (Redis's decision), the rest of the block is dropped */
    CHECK_EQ(decide(&x, RL_OP_ACQUIRE, 1, 1000, NULL), STEP_FETCH);
    x.e->generation++;
    CHECK_EQ(fetch(&x, 1000, 10, 500), GOT_RESULT);
    CHECK(x.r.allowed);
    CHECK_EQ(x.e->block, 0);
    CHECK_EQ(x.back.calls, 0);
    /* a grant of 0 ms: the next calls go to Redis plainly, for 1 ms, then
     * 2 ms after the next such grant */
    CHECK_EQ(decide(&x, RL_OP_ACQUIRE, 1, 1100, NULL), STEP_FETCH);
    CHECK_EQ(fetch(&x, 1100, 5, 0), GOT_RESULT);
    CHECK_EQ(decide(&x, RL_OP_ACQUIRE, 1, 1101, NULL), STEP_PLAIN);
    /* token_bucket re-times what it books: its unused block goes back */
    CHECK_EQ(decide(&x, RL_OP_ACQUIRE, 1, 1102, NULL), STEP_FETCH);
    CHECK_EQ(x.back.calls, 1);
    CHECK_EQ(fetch(&x, 1102, 5, 0), GOT_RESULT);
    CHECK_EQ(x.e->plain_until_ms, 1103 + 2);
    rl_leases_free(x.t);
}

static void test_blocking_fetcher(void)
{
    fixture x;
    int batch = 0; /* a blocking batch's token: its address */
    setup(&x, "blocking", RL_GCRA);
    CHECK_EQ(decide(&x, RL_OP_ACQUIRE, 1, 1000, &batch), STEP_FETCH);
    /* the same batch again for the key it fetches: plainly */
    CHECK_EQ(decide(&x, RL_OP_ACQUIRE, 1, 1000, &batch), STEP_PLAIN);
    CHECK_EQ(fetch(&x, 1000, 4, 500), GOT_RESULT);
    /* its block ends with permits left: given back in its own pipeline
     * (pending), not through the carrier */
    CHECK_EQ(decide(&x, RL_OP_ACQUIRE, 1, 1600, &batch), STEP_FETCH);
    CHECK_EQ(x.back.calls, 0);
    CHECK(x.e->pending && x.e->pending_left == 3);
    CHECK_EQ(fetch(&x, 1600, 4, 500), GOT_RESULT);
    CHECK(!x.e->pending);
    /* acquire up to: what the block has, and a fetch big enough for more */
    CHECK_EQ(decide(&x, RL_OP_ACQUIRE_UP_TO, 3, 1601, NULL), STEP_LOCAL);
    CHECK_EQ(x.r.granted, 3);
    CHECK_EQ(decide(&x, RL_OP_ACQUIRE_UP_TO, 50, 2200, NULL), STEP_FETCH);
    CHECK_EQ(x.want, 50);
    rl_leases_free(x.t);
}

static void test_server_clock(void)
{
    fixture x;
    fake_reply f;
    setup(&x, "clock", RL_GCRA);
    x.t->clocks = calloc(1, sizeof *x.t->clocks); /* one server */
    CHECK_EQ(decide(&x, RL_OP_ACQUIRE, 1, 1000, NULL), STEP_FETCH);
    fetched(&x, RL_OK, grant(&f, 10, 500, 9000), 1000, 1002);
    CHECK(!x.stepped);
    /* as far ahead again 1 s later, within drift and rounding: no step */
    CHECK_EQ(decide(&x, RL_OP_ACQUIRE, 1, 2000, NULL), STEP_FETCH);
    fetched(&x, RL_OK, grant(&f, 10, 500, 10002), 2000, 2003);
    CHECK(!x.stepped);
    /* a minute ahead: stepped */
    CHECK_EQ(decide(&x, RL_OP_ACQUIRE, 1, 3000, NULL), STEP_FETCH);
    fetched(&x, RL_OK, grant(&f, 10, 500, 71000), 3000, 3001);
    CHECK(x.stepped);
    rl_leases_free(x.t);
}

static void test_sweep(void)
{
    fixture x;
    setup(&x, "held", RL_GCRA);
    rl_request req = {.name = "policy", .id = "idle", .spec = x.e->spec, .permits = 1, .op = RL_OP_ACQUIRE,
                      .lease_ms = 500};
    CHECK(rl_lease_entry(x.t, &req, 1000, 1) != NULL);
    CHECK_EQ(decide(&x, RL_OP_ACQUIRE, 1, 1000, NULL), STEP_FETCH);
    CHECK_EQ(fetch(&x, 1000, 10, 500), GOT_RESULT);
    /* before the block ends: nothing; the next look at its end */
    CHECK_EQ(rl_leases_sweep(x.t, 1200, &x.carry), 1500);
    CHECK_EQ(x.back.calls, 0);
    /* ended: its unused permits go back */
    rl_leases_sweep(x.t, 1500, &x.carry);
    CHECK_EQ(x.back.calls, 1);
    CHECK_EQ(x.back.unused, 9);
    CHECK_EQ(x.e->block, 0);
    /* idle past LEASE_IDLE_FREE_MS: both freed, nothing left to watch */
    CHECK_EQ(x.t->count, 2);
    CHECK_EQ(rl_leases_sweep(x.t, 1000 + LEASE_IDLE_FREE_MS + 1, &x.carry), 0);
    CHECK_EQ(x.t->count, 0);
    rl_leases_free(x.t);
}

int main(void)
{
    test_block_life();
    test_denials();
    test_stale_and_zero_grants();
    test_blocking_fetcher();
    test_server_clock();
    test_sweep();
    return test_summary("lease_policy");
}
