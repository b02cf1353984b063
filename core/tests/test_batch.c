/* Batches (rl_options.max_batch): plain decisions ready together go in one
 * call of limit.lua's batch form, on the asynchronous path and in
 * rl_execute. Exact counts under concurrency for every algorithm, one error
 * element failing only its request, NOSCRIPT, and that batching happens
 * (fewer script calls than decisions) and max_batch = 1 turns it off. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static test_redis redis;

static const rl_algorithm algorithms[] = {RL_FIXED_WINDOW, RL_SLIDING_WINDOW, RL_SLIDING_LOG,
                                          RL_TOKEN_BUCKET, RL_LEAKY_BUCKET,   RL_GCRA};
#define NALG (sizeof algorithms / sizeof *algorithms)

static rl_client *client_with(int max_batch)
{
    rl_options o = RL_OPTIONS_INIT;
    o.command_timeout_ms = 60000; /* exact counts must not see timeouts on a slow machine */
    o.max_batch = max_batch;
    return open_client(&redis, &o);
}

/* A long period: nothing refills during the test, so exactly limit pass. */
static rl_spec spec_for(rl_algorithm a, int64_t limit)
{
    rl_spec s = {.algorithm = a, .limit = limit, .period_ms = 3600000, .burst = 0};
    return s;
}

typedef struct {
    long done, allowed, errors;
    long allowed_per_key[64];
} tally;

static void count(void *ctx, const rl_completion *c)
{
    tally *t = ctx;
    if (c->status != RL_OK) {
        t->errors++;
    } else if (c->result.allowed) {
        t->allowed++;
        t->allowed_per_key[c->tag % 64]++;
    }
    __atomic_add_fetch(&t->done, 1, __ATOMIC_RELEASE); /* only the I/O thread writes the others */
}

/* until *done (counted by the I/O thread) reaches n, or the timeout */
static void wait_done(long *done, long n, int64_t timeout_ms)
{
    int64_t end = now_ms() + timeout_ms;
    while (__atomic_load_n(done, __ATOMIC_ACQUIRE) < n && now_ms() < end) sleep_ms(1);
}

typedef struct {
    rl_client *client;
    rl_target target;
    rl_spec spec;
    int keys, first, count;
    long refused;
} submitter;

/* request i goes to key i % keys; its tag says which */
static void *submit_run(void *arg)
{
    submitter *s = arg;
    char ids[64][16];
    for (int k = 0; k < s->keys; k++) snprintf(ids[k], sizeof ids[k], "k%d", k);
    for (int i = s->first; i < s->first + s->count; i++) {
        rl_request req = {.name = "batch-exact", .id = ids[i % s->keys], .spec = s->spec, .permits = 1,
                          .op = RL_OP_ACQUIRE, .max_wait_ms = 0, .now_ms = 0};
        if (rl_submit(s->client, &req, (uint64_t)(i % s->keys), &s->target) != RL_OK) s->refused++;
    }
    return NULL;
}

/* Many submitters on one key and on many keys, every algorithm: exactly the
 * limit passes per key, never more. */
static void test_async_exact(void)
{
    enum { THREADS = 4, EACH = 1500, N = THREADS * EACH, LIMIT = 100 };
    for (int keys = 1; keys <= 32; keys += 31) {
        for (size_t a = 0; a < NALG; a++) {
            redis_flush(&redis);
            rl_client *c = client_with(16);
            tally t;
            memset(&t, 0, sizeof t);
            submitter s[THREADS];
            pthread_t th[THREADS];
            long before = redis_scripts_run(&redis);
            for (int i = 0; i < THREADS; i++) {
                s[i] = (submitter){c, {count, &t, NULL}, spec_for(algorithms[a], LIMIT), keys, i * EACH, EACH, 0};
                pthread_create(&th[i], NULL, submit_run, &s[i]);
            }
            for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
            wait_done(&t.done, N, 60000);
            long calls = redis_scripts_run(&redis) - before;
            CHECK_EQ(t.done, N);
            CHECK_EQ(t.errors, 0);
            for (int i = 0; i < THREADS; i++) CHECK_EQ(s[i].refused, 0);
            CHECK_EQ(t.allowed, (long)keys * LIMIT);
            for (int k = 0; k < keys; k++) CHECK_EQ(t.allowed_per_key[k], LIMIT);
            printf("  %d key(s), algorithm %d: %d decisions in %ld script calls\n", keys, (int)algorithms[a], N, calls);
            CHECK(calls < N); /* batched */
            rl_client_close(c);
        }
    }
}

/* max_batch 1: one script call per decision; the default batches. */
static void test_batching_happens(void)
{
    enum { N = 4000 };
    for (int max_batch = 1; max_batch <= 16; max_batch += 15) {
        redis_flush(&redis);
        rl_client *c = client_with(max_batch);
        tally t;
        memset(&t, 0, sizeof t);
        rl_target target = {count, &t, NULL};
        rl_request req = {.name = "batch-count", .id = "x", .spec = spec_for(RL_GCRA, 1000000), .permits = 1,
                          .op = RL_OP_ACQUIRE, .max_wait_ms = 0, .now_ms = 0};
        CHECK_OK(rl_submit(c, &req, 0, &target)); /* connected, script loaded */
        wait_done(&t.done, 1, 10000);
        long before = redis_scripts_run(&redis);
        for (int i = 1; i < N; i++) CHECK_OK(rl_submit(c, &req, 0, &target));
        wait_done(&t.done, N, 60000);
        long calls = redis_scripts_run(&redis) - before;
        CHECK_EQ(t.done, N);
        CHECK_EQ(t.allowed, N);
        printf("  max_batch %d: %d decisions in %ld script calls\n", max_batch, N - 1, calls);
        if (max_batch == 1) CHECK_EQ(calls, N - 1);
        else CHECK(calls < (N - 1) / 2);
        rl_client_close(c);
    }
}

/* Chains: each completion (on the I/O thread) submits its chain's next
 * decision, as a reactive caller does. */
enum { CHAINS = 64, CHAIN_LENGTH = 200 };

typedef struct {
    rl_client *client;
    rl_request req;
    int left[CHAINS];
    long done, allowed, errors;
} chains;

static void chain_next(void *ctx, const rl_completion *c)
{
    chains *ch = ctx;
    if (c->status != RL_OK) ch->errors++;
    else if (c->result.allowed) ch->allowed++;
    if (--ch->left[c->tag] > 0) {
        rl_target target = {chain_next, ch, NULL};
        if (rl_submit(ch->client, &ch->req, c->tag, &target) != RL_OK) ch->errors += ch->left[c->tag];
    }
    __atomic_add_fetch(&ch->done, 1, __ATOMIC_RELEASE);
}

/* Decisions submitted from completions still gather into batches though
 * the chains start one at a time: what one call's replies submit is sent
 * before the next reply is handled (so Redis works meanwhile), but only as
 * whole batches, or each call of k decisions would beget a call of k. */
static void test_chained_batches(void)
{
    redis_flush(&redis);
    static chains ch;
    memset(&ch, 0, sizeof ch);
    ch.client = client_with(16);
    ch.req = (rl_request){.name = "batch-chain", .id = "x", .spec = spec_for(RL_GCRA, 1000000), .permits = 1,
                          .op = RL_OP_ACQUIRE, .max_wait_ms = 0, .now_ms = 0};
    rl_target target = {chain_next, &ch, NULL};
    long before = redis_scripts_run(&redis);
    for (int i = 0; i < CHAINS; i++) {
        ch.left[i] = CHAIN_LENGTH;
        CHECK_OK(rl_submit(ch.client, &ch.req, (uint64_t)i, &target));
        sleep_ms(1); /* one at a time: each first call goes alone */
    }
    long n = CHAINS * CHAIN_LENGTH;
    wait_done(&ch.done, n, 60000);
    long calls = redis_scripts_run(&redis) - before;
    rl_client_close(ch.client);
    CHECK_EQ(ch.done, n);
    CHECK_EQ(ch.errors, 0);
    CHECK_EQ(ch.allowed, n);
    printf("  %d chains of %d: %ld decisions in %ld script calls\n", CHAINS, CHAIN_LENGTH, n, calls);
    CHECK(calls * 3 < n); /* 0.1 here; 0.67 when each reply's submissions went out at once */
}

/* The short form packs its numbers (complemented int64): the largest each
 * algorithm accepts, and numbers whose complement holds a zero byte (255,
 * 65535), decide as they should, alone and in a batch ("*", then "=" with
 * permits packed). */
static void test_packed_numbers(void)
{
    static const int64_t limits[] = {(int64_t)1 << 52, 1000000000000000LL, (int64_t)1 << 40, 65535, 255};
    rl_client *c = client_with(16);
    int decided = 0;
    for (size_t a = 0; a < NALG; a++) {
        for (size_t l = 0; l < sizeof limits / sizeof *limits; l++) {
            redis_flush(&redis);
            rl_spec spec = {.algorithm = algorithms[a], .limit = limits[l], .period_ms = 255000, .burst = 0};
            int64_t permits = limits[l] > 255 ? 255 : 1;
            rl_result r;
            int rc = rl_acquire(c, "packed", "alone", &spec, permits, &r);
            if (rc == RL_ERR_INVALID) continue; /* beyond what this algorithm takes: nothing sent */
            CHECK_OK(rc);
            decided++;
            CHECK(r.allowed);
            CHECK_EQ(r.limit, limits[l]);
            CHECK_EQ(r.remaining, limits[l] - permits);
            rl_request req[4];
            rl_result got[4];
            for (int i = 0; i < 4; i++)
                req[i] = (rl_request){.name = "packed", .id = "batched", .spec = spec, .permits = i == 2 ? 1 : permits,
                                      .op = i == 3 ? RL_OP_PEEK : RL_OP_ACQUIRE, .max_wait_ms = 0, .now_ms = 0};
            long before = redis_scripts_run(&redis);
            CHECK_OK(rl_execute(c, req, 4, got));
            CHECK_EQ(redis_scripts_run(&redis) - before, 1);
            CHECK_EQ(got[0].remaining, limits[l] - permits);
            CHECK_EQ(got[1].remaining, limits[l] - 2 * permits);
            CHECK_EQ(got[2].remaining, limits[l] - 2 * permits - 1);
            CHECK_EQ(got[3].remaining, limits[l] - 2 * permits - 1);
        }
    }
    printf("  packed numbers: %d of %zu limits decided (the rest beyond an algorithm's bounds)\n", decided,
           NALG * (sizeof limits / sizeof *limits));
    CHECK(decided >= 3 * (int)NALG);
    rl_client_close(c);
}

/* Makes (name, id)'s key a list, so its decision fails with WRONGTYPE. */
static void break_key(rl_client *c, const char *name, const char *id, rl_algorithm a)
{
    char key[256];
    redisContext *raw = redis_raw(&redis);
    CHECK(rl_key(c, name, id, a, key, sizeof key) > 0);
    redis_int(raw, "RPUSH %s x", key);
    redisFree(raw);
}

enum { ELEMENTS = 9, BROKEN = 4 };

typedef struct {
    rl_client *client;
    rl_completion got[ELEMENTS];
    int done;
    int first;
} burst;

static void burst_done(void *ctx, const rl_completion *c)
{
    burst *b = ctx;
    if (b->first) { /* on the I/O thread: what is submitted here is drained together, one batch */
        b->first = 0;
        rl_target target = {burst_done, b, NULL};
        for (int i = 0; i < ELEMENTS; i++) {
            char id[16];
            snprintf(id, sizeof id, "e%d", i);
            rl_request req = {.name = "batch-err", .id = id, .spec = spec_for(RL_FIXED_WINDOW, 5), .permits = 2,
                              .op = RL_OP_ACQUIRE, .max_wait_ms = 0, .now_ms = 0};
            if (rl_submit(b->client, &req, (uint64_t)i, &target) != RL_OK) abort();
        }
        return;
    }
    b->got[c->tag] = *c;
    __atomic_add_fetch(&b->done, 1, __ATOMIC_RELEASE);
}

/* A decision Redis refuses (its key holds another type) in the middle of a
 * batch fails alone; the others are decided (and consumed), asynchronously
 * and in rl_execute_each. */
static void test_error_element(void)
{
    redis_flush(&redis);
    rl_client *c = client_with(16);
    break_key(c, "batch-err", "e4", RL_FIXED_WINDOW);
    burst b = {.client = c, .first = 1};
    rl_target target = {burst_done, &b, NULL};
    rl_request warm = {.name = "batch-err", .id = "warm", .spec = spec_for(RL_FIXED_WINDOW, 5), .permits = 1,
                       .op = RL_OP_ACQUIRE, .max_wait_ms = 0, .now_ms = 0};
    CHECK_OK(rl_submit(c, &warm, 0, &target));
    for (int64_t end = now_ms() + 10000; __atomic_load_n(&b.done, __ATOMIC_ACQUIRE) < ELEMENTS && now_ms() < end;)
        sleep_ms(1);
    CHECK_EQ(b.done, ELEMENTS);
    for (int i = 0; i < ELEMENTS; i++) {
        if (i == BROKEN) {
            CHECK_EQ(b.got[i].status, RL_ERR_REDIS);
            CHECK(strstr(b.got[i].error, "WRONGTYPE") != NULL);
        } else {
            CHECK_EQ(b.got[i].status, RL_OK);
            CHECK_EQ(b.got[i].result.allowed, 1);
            CHECK_EQ(b.got[i].result.remaining, 3);
        }
    }
    redisContext *raw = redis_raw(&redis);
    CHECK_EQ(redis_int(raw, "HINCRBY rl:{batch-err:e0}:fixed_window count 0"), 2);
    redisFree(raw);

    /* explicit: one batch call, the same outcomes; consumed a second time */
    rl_request reqs[ELEMENTS];
    rl_result rs[ELEMENTS];
    rl_outcome os[ELEMENTS];
    char ids[ELEMENTS][16];
    for (int i = 0; i < ELEMENTS; i++) {
        snprintf(ids[i], sizeof ids[i], "e%d", i);
        reqs[i] = (rl_request){.name = "batch-err", .id = ids[i], .spec = spec_for(RL_FIXED_WINDOW, 5),
                               .permits = 2, .op = RL_OP_ACQUIRE, .max_wait_ms = 0, .now_ms = 0};
    }
    long before = redis_scripts_run(&redis);
    CHECK_EQ(rl_execute_each(c, reqs, ELEMENTS, rs, os), RL_ERR_REDIS);
    CHECK_EQ(redis_scripts_run(&redis) - before, 1);
    for (int i = 0; i < ELEMENTS; i++) {
        if (i == BROKEN) {
            CHECK_EQ(os[i].status, RL_ERR_REDIS);
            CHECK(strstr(os[i].error, "WRONGTYPE") != NULL);
        } else {
            CHECK_EQ(os[i].status, RL_OK);
            CHECK_EQ(rs[i].allowed, 1);
            CHECK_EQ(rs[i].remaining, 1);
        }
    }
    rl_client_close(c);
}

/* rl_execute: plain decisions in batch calls of up to max_batch, exact per
 * key, whatever the order of keys and ops (refunds among acquires); lease
 * and other requests keep their own calls. */
static void test_explicit(void)
{
    enum { N = 40, KEYS = 3 };
    for (size_t a = 0; a < NALG; a++) {
        redis_flush(&redis);
        rl_client *c = client_with(16), *one = client_with(1);
        rl_request reqs[N];
        rl_result rs[N], single[N];
        rl_outcome os[N];
        char ids[KEYS][8];
        for (int k = 0; k < KEYS; k++) snprintf(ids[k], sizeof ids[k], "x%d", k);
        for (int i = 0; i < N; i++)
            reqs[i] = (rl_request){.name = "batch-explicit", .id = ids[i % KEYS], .spec = spec_for(algorithms[a], 7),
                                   .permits = 1 + i % 3, /* a repeated call sends its own permits */
                                   /* up to: the full form among short ones */
                                   .op = i % 10 == 9 ? RL_OP_REFUND : i % 10 == 4 ? RL_OP_ACQUIRE_UP_TO : RL_OP_ACQUIRE,
                                   .max_wait_ms = 0, .now_ms = 0};
        long before = redis_scripts_run(&redis);
        CHECK_OK(rl_execute_each(c, reqs, N, rs, os));
        CHECK_EQ(redis_scripts_run(&redis) - before, (N + 15) / 16);
        /* the same sequence one call at a time, on other keys: the same decisions */
        for (int i = 0; i < N; i++) reqs[i].name = "batch-explicit-one";
        before = redis_scripts_run(&redis);
        CHECK_OK(rl_execute(one, reqs, N, single));
        CHECK_EQ(redis_scripts_run(&redis) - before, N);
        for (int i = 0; i < N; i++) {
            CHECK_EQ(rs[i].allowed, single[i].allowed);
            CHECK_EQ(rs[i].remaining, single[i].remaining);
            CHECK_EQ(rs[i].granted, single[i].granted);
        }
        rl_client_close(c);
        rl_client_close(one);
    }
}

static int64_t remaining(rl_client *c, rl_request req)
{
    rl_result peek = {0};
    req.op = RL_OP_PEEK;
    CHECK_OK(rl_execute(c, &req, 1, &peek));
    return peek.remaining;
}

/* Scripts flushed while batches are in flight or about to go: loaded again
 * and sent once more (they did not run): exact counts. */
static void test_noscript(void)
{
    redis_flush(&redis);
    rl_client *c = client_with(16);
    tally t;
    memset(&t, 0, sizeof t);
    rl_target target = {count, &t, NULL};
    rl_request req = {.name = "batch-noscript", .id = "x", .spec = spec_for(RL_TOKEN_BUCKET, 300), .permits = 1,
                      .op = RL_OP_ACQUIRE, .max_wait_ms = 0, .now_ms = 0};
    redisContext *raw = redis_raw(&redis);
    for (int round = 0; round < 5; round++) {
        freeReplyObject(redisCommand(raw, "SCRIPT FLUSH"));
        for (int i = 0; i < 200; i++) CHECK_OK(rl_submit(c, &req, 0, &target));
    }
    wait_done(&t.done, 1000, 60000);
    CHECK_EQ(t.done, 1000);
    CHECK_EQ(t.errors, 0);
    CHECK_EQ(t.allowed, 300);
    /* explicit */
    rl_request reqs[40];
    rl_result rs[40];
    for (int i = 0; i < 40; i++) reqs[i] = req, reqs[i].name = "batch-noscript-explicit";
    freeReplyObject(redisCommand(raw, "SCRIPT FLUSH"));
    CHECK_OK(rl_execute(c, reqs, 40, rs));
    int allowed = 0;
    for (int i = 0; i < 40; i++) allowed += rs[i].allowed;
    CHECK_EQ(allowed, 40);
    CHECK_EQ(remaining(c, reqs[0]), 300 - 40);
    redisFree(raw);
    rl_client_close(c);
}

/* Redis paused: every decision of a batch times out on its own, and none is
 * sent again; after, the counts show what ran. */
static void test_timeout(void)
{
    redis_flush(&redis);
    rl_options o = RL_OPTIONS_INIT;
    o.command_timeout_ms = 300;
    rl_client *c = open_client(&redis, &o);
    rl_completions *q;
    CHECK_OK(rl_completions_open(&q));
    rl_target target = {NULL, NULL, q};
    rl_request req = {.name = "batch-timeout", .id = "x", .spec = spec_for(RL_FIXED_WINDOW, 1000), .permits = 1,
                      .op = RL_OP_ACQUIRE, .max_wait_ms = 0, .now_ms = 0};
    rl_completion all[40];
    CHECK_OK(rl_submit(c, &req, 0, &target));
    CHECK_EQ(drain_completions(q, all, 1, 3000), 1);
    redis_pause(&redis);
    for (int i = 0; i < 40; i++) CHECK_OK(rl_submit(c, &req, (uint64_t)i, &target));
    CHECK_EQ(drain_completions(q, all, 40, 3000), 40);
    for (int i = 0; i < 40; i++) CHECK_EQ(all[i].status, RL_ERR_TIMEOUT);
    redis_resume(&redis);
    sleep_ms(200);
    /* they were sent: they ran once Redis went on, and only once */
    CHECK_EQ(remaining(c, req), 1000 - 41);
    rl_client_close(c);
    rl_completions_close(q);
}

int main(void)
{
    redis_start(&redis);
    test_batching_happens();
    test_chained_batches();
    test_packed_numbers();
    test_error_element();
    test_explicit();
    test_noscript();
    test_async_exact();
    test_timeout();
    redis_stop(&redis);
    return test_summary("batch");
}
