/* Metrics (rl_client_stats): exact counts per limiter name after known
 * sequences on the blocking and asynchronous paths (allowed, denied,
 * fallback, errors; invalid calls not counted), latencies in the right
 * buckets, exact totals from many threads interning names at once, the
 * overflow entry, and metrics turned off. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static test_redis redis;

/* The counters of one name ("" = the overflow entry); zeros when absent. */
static rl_limiter_stats stats_of(const rl_client *c, const char *name)
{
    rl_limiter_stats found, *all;
    size_t n = 0, total = 0;
    memset(&found, 0, sizeof found);
    CHECK_OK(rl_client_stats(c, NULL, 0, &n));
    all = calloc(n + 1, sizeof *all);
    CHECK_OK(rl_client_stats(c, all, n + 1, &total));
    CHECK(total >= n);
    for (size_t i = 0; i < total && i <= n; i++)
        if (!strcmp(all[i].name, name)) found = all[i];
    free(all);
    return found;
}

static uint64_t decisions(const rl_limiter_stats *s)
{
    return s->allowed + s->denied + s->fallback + s->errors;
}

static uint64_t bucket_total(const rl_limiter_stats *s)
{
    uint64_t n = 0;
    for (int b = 0; b < RL_STATS_BUCKETS; b++) n += s->latency_buckets[b];
    return n;
}

/* One name's outcomes and its histogram's total; returns its counters. */
#define EXPECT_COUNTS(client, name, a, d, f, e)                                        \
    ({                                                                                 \
        rl_limiter_stats s_ = stats_of(client, name);                                  \
        CHECK_EQ(s_.allowed, a);                                                       \
        CHECK_EQ(s_.denied, d);                                                        \
        CHECK_EQ(s_.fallback, f);                                                      \
        CHECK_EQ(s_.errors, e);                                                        \
        CHECK_EQ(bucket_total(&s_), (a) + (d) + (f) + (e));                            \
        s_;                                                                            \
    })

/* Makes the limiter's key a list, so its script fails with WRONGTYPE. */
static void break_key(rl_client *c, const char *name, const char *id, rl_algorithm a)
{
    char key[256];
    redisContext *raw = redis_raw(&redis);
    CHECK(rl_key(c, name, id, a, key, sizeof key) > 0);
    redis_int(raw, "DEL %s", key);
    redis_int(raw, "RPUSH %s x", key);
    redisFree(raw);
}

static void test_blocking_sequence(void)
{
    rl_client *c = open_client(&redis, NULL);
    rl_spec three = {.algorithm = RL_FIXED_WINDOW, .limit = 3, .period_ms = 3600000, .burst = 0};
    rl_result r;
    size_t n = 99;

    CHECK_OK(rl_client_stats(c, NULL, 0, &n));
    CHECK_EQ(n, 0); /* nothing decided yet */
    for (int i = 0; i < 5; i++) CHECK_OK(rl_acquire(c, "seq", "u", &three, 1, &r));
    CHECK_OK(rl_peek(c, "seq", "u", &three, 1, &r)); /* a decision too: denied */
    /* invalid: never reaches Redis, not counted */
    CHECK_EQ(rl_acquire(c, "seq", "u", &three, 0, &r), RL_ERR_INVALID);
    CHECK_EQ(rl_acquire(c, "seq", "", &three, 1, &r), RL_ERR_INVALID);
    /* a Redis error: counted as an error */
    break_key(c, "seq", "broken", RL_FIXED_WINDOW);
    CHECK_EQ(rl_acquire(c, "seq", "broken", &three, 1, &r), RL_ERR_REDIS);
    /* a batch: each request under its own name */
    rl_request batch[3] = {
        {.name = "seq", .id = "v", .spec = three, .permits = 1, .op = RL_OP_ACQUIRE, .max_wait_ms = 0, .now_ms = 0},
        {.name = "other", .id = "v", .spec = three, .permits = 3, .op = RL_OP_ACQUIRE, .max_wait_ms = 0, .now_ms = 0},
        {.name = "other", .id = "v", .spec = three, .permits = 1, .op = RL_OP_ACQUIRE, .max_wait_ms = 0, .now_ms = 0},
    };
    rl_result rs[3];
    CHECK_OK(rl_execute(c, batch, 3, rs));
    /* acquire_wait: every attempt is a decision (0 ms wait: one attempt) */
    rl_wait none = {0, NULL, NULL};
    CHECK_OK(rl_acquire_wait(c, &batch[2], &none, &r));

    rl_limiter_stats s = EXPECT_COUNTS(c, "seq", 4, 3, 0, 1);
    CHECK(s.latency_sum_us > 0);
    EXPECT_COUNTS(c, "other", 1, 2, 0, 0);
    CHECK_OK(rl_client_stats(c, NULL, 0, &n));
    CHECK_EQ(n, 2);

    /* fewer slots than names: the count says how many there are */
    rl_limiter_stats one;
    CHECK_OK(rl_client_stats(c, &one, 1, &n));
    CHECK_EQ(n, 2);
    CHECK(!strcmp(one.name, "seq") || !strcmp(one.name, "other"));
    CHECK_EQ(rl_client_stats(c, NULL, 0, NULL), RL_ERR_INVALID);
    CHECK_EQ(rl_client_stats(c, NULL, 1, &n), RL_ERR_INVALID);
    CHECK_EQ(rl_client_stats(NULL, NULL, 0, &n), RL_ERR_INVALID);
    rl_client_close(c);
}

/* Redis down: the policy decides (fallback), or the call fails (errors). */
static void test_fallback_and_timeout(void)
{
    test_redis dead;
    memset(&dead, 0, sizeof dead);
    redis_start(&dead);
    redis_kill(&dead); /* nothing listens on its port now */
    rl_spec spec = {.algorithm = RL_GCRA, .limit = 10, .period_ms = 1000, .burst = 0};
    rl_result r;
    for (int policy = RL_ON_ERROR_ALLOW; policy <= RL_ON_ERROR_DENY; policy++) {
        rl_options o = RL_OPTIONS_INIT;
        o.on_error = (rl_on_error)policy;
        o.connect_timeout_ms = 200;
        rl_client *c = open_client(&dead, &o);
        for (int i = 0; i < 3; i++) {
            CHECK_OK(rl_acquire(c, "down", "u", &spec, 1, &r));
            CHECK_EQ(r.fallback, 1);
        }
        /* a stored spec that cannot be read: the policy decides too */
        rl_request stored = {.name = "down-stored", .id = "u", .permits = 1, .stored_spec = 1};
        CHECK_OK(rl_execute(c, &stored, 1, &r));
        CHECK_EQ(r.fallback, 1);
        EXPECT_COUNTS(c, "down", 0, 0, 3, 0);
        EXPECT_COUNTS(c, "down-stored", 0, 0, 1, 0);
        rl_client_close(c);
    }

    /* a paused Redis: a timeout error, and its latency in a slow bucket */
    rl_options o = RL_OPTIONS_INIT;
    o.command_timeout_ms = 300;
    rl_client *c = open_client(&redis, &o);
    CHECK_OK(rl_acquire(c, "slow", "u", &spec, 1, &r));
    redis_pause(&redis);
    CHECK_EQ(rl_acquire(c, "slow", "u", &spec, 1, &r), RL_ERR_TIMEOUT);
    redis_resume(&redis);
    rl_limiter_stats s = EXPECT_COUNTS(c, "slow", 1, 0, 0, 1);
    CHECK(s.latency_sum_us >= 300000);
    /* 300 ms lies in (262,144, 524,288] us: bucket 16 */
    CHECK_EQ(RL_STATS_BUCKET_US(16), 524288);
    uint64_t slow = 0;
    for (int b = 16; b < RL_STATS_BUCKETS; b++) slow += s.latency_buckets[b];
    CHECK_EQ(slow, 1);
    rl_client_close(c);
}

typedef struct {
    long done;
} tally;

static void on_done(void *ctx, const rl_completion *c)
{
    (void)c;
    __atomic_add_fetch(&((tally *)ctx)->done, 1, __ATOMIC_RELEASE);
}

static void wait_done(tally *t, long n)
{
    int64_t end = now_ms() + 30000;
    while (__atomic_load_n(&t->done, __ATOMIC_ACQUIRE) < n && now_ms() < end) sleep_ms(1);
    CHECK_EQ(__atomic_load_n(&t->done, __ATOMIC_ACQUIRE), n);
}

static void test_async_sequence(void)
{
    rl_options o = RL_OPTIONS_INIT;
    o.command_timeout_ms = 60000; /* exact counts even under valgrind */
    rl_client *c = open_client(&redis, &o);
    tally t = {0};
    rl_target target = {on_done, &t, NULL};
    rl_spec two = {.algorithm = RL_FIXED_WINDOW, .limit = 2, .period_ms = 3600000, .burst = 0};
    rl_request req = {.name = "async-seq", .id = "u", .spec = two, .permits = 1, .op = RL_OP_ACQUIRE, .max_wait_ms = 0, .now_ms = 0};
    for (int i = 0; i < 5; i++) CHECK_OK(rl_submit(c, &req, (uint64_t)i, &target));
    rl_request bad = req;
    bad.permits = 3;
    CHECK_EQ(rl_submit(c, &bad, 9, &target), RL_ERR_INVALID); /* not counted */
    break_key(c, "async-seq", "broken", RL_FIXED_WINDOW);
    rl_request broken = req;
    broken.id = "broken";
    CHECK_OK(rl_submit(c, &broken, 10, &target));
    /* the primitives are not limiter decisions */
    CHECK_OK(rl_submit_lock_acquire(c, "async-seq", 1000, 0, 11, &target));
    wait_done(&t, 7);
    EXPECT_COUNTS(c, "async-seq", 2, 3, 0, 1);
    rl_client_close(c);

    /* fallback on the asynchronous path */
    test_redis dead;
    memset(&dead, 0, sizeof dead);
    redis_start(&dead);
    redis_kill(&dead);
    o.on_error = RL_ON_ERROR_DENY;
    o.command_timeout_ms = 500;
    o.connect_timeout_ms = 200;
    c = open_client(&dead, &o);
    t.done = 0;
    for (int i = 0; i < 4; i++) CHECK_OK(rl_submit(c, &req, (uint64_t)i, &target));
    wait_done(&t, 4);
    EXPECT_COUNTS(c, "async-seq", 0, 0, 4, 0);
    rl_client_close(c);
}

/* Threads on the blocking and asynchronous paths at once, interning the same
 * new names at the same moment: every name appears once, totals are exact. */
enum { THREADS = 8, NAMES = 40, ROUNDS = 25, LIMIT = 150 };

typedef struct {
    rl_client *client;
    int index;
    pthread_barrier_t *start;
    tally *async_done;
    int failed; /* calls that did not return RL_OK (CHECK is not thread-safe) */
} racer;

static void *race(void *arg)
{
    racer *w = arg;
    rl_spec spec = {.algorithm = RL_FIXED_WINDOW, .limit = LIMIT, .period_ms = 3600000, .burst = 0};
    rl_target target = {on_done, w->async_done, NULL};
    char names[NAMES][16];
    rl_request reqs[NAMES];
    rl_result rs[NAMES];
    for (int k = 0; k < NAMES; k++) {
        snprintf(names[k], sizeof names[k], "race-%d", k);
        reqs[k] = (rl_request){.name = names[k], .id = "u", .spec = spec, .permits = 1, .op = RL_OP_ACQUIRE};
    }
    pthread_barrier_wait(w->start);
    for (int round = 0; round < ROUNDS; round++) {
        if (w->index % 2) {
            w->failed += rl_execute(w->client, reqs, NAMES, rs) != RL_OK;
        } else {
            for (int k = 0; k < NAMES; k++) w->failed += rl_submit(w->client, &reqs[k], 0, &target) != RL_OK;
        }
    }
    return NULL;
}

static void test_threads_exact(void)
{
    rl_options o = RL_OPTIONS_INIT;
    o.command_timeout_ms = 60000;
    o.pool_size = THREADS;
    rl_client *c = open_client(&redis, &o);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, THREADS);
    tally async_done = {0};
    racer w[THREADS];
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (racer){c, i, &start, &async_done, 0};
        pthread_create(&t[i], NULL, race, &w[i]);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        CHECK_EQ(w[i].failed, 0);
    }
    wait_done(&async_done, (long)(THREADS / 2) * ROUNDS * NAMES);
    pthread_barrier_destroy(&start);

    size_t n = 0;
    rl_limiter_stats all[NAMES + 1];
    CHECK_OK(rl_client_stats(c, all, NAMES + 1, &n));
    CHECK_EQ(n, NAMES);
    for (size_t i = 0; i < n && i < NAMES; i++) {
        /* every name: THREADS x ROUNDS acquires, LIMIT of them admitted */
        CHECK_EQ(all[i].allowed, LIMIT);
        CHECK_EQ(all[i].denied, THREADS * ROUNDS - LIMIT);
        CHECK_EQ(all[i].errors + all[i].fallback, 0);
        CHECK_EQ(bucket_total(&all[i]), THREADS * ROUNDS);
        for (size_t j = 0; j < i; j++) CHECK(strcmp(all[i].name, all[j].name) != 0);
    }
    rl_client_close(c);
}

/* Past RL_STATS_MAX_NAMES names, decisions go to the entry named "". */
static void test_overflow(void)
{
    enum { EXTRA = 10, TOTAL = RL_STATS_MAX_NAMES + EXTRA };
    rl_client *c = open_client(&redis, NULL);
    rl_spec spec = {.algorithm = RL_GCRA, .limit = 10, .period_ms = 1000, .burst = 0};
    rl_request *reqs = calloc(TOTAL, sizeof *reqs);
    rl_result *rs = calloc(TOTAL, sizeof *rs);
    char (*names)[16] = calloc(TOTAL, sizeof *names);
    for (int i = 0; i < TOTAL; i++) {
        snprintf(names[i], sizeof names[i], "many-%d", i);
        reqs[i] = (rl_request){.name = names[i], .id = "u", .spec = spec, .permits = 1, .op = RL_OP_PEEK};
    }
    CHECK_OK(rl_execute(c, reqs, TOTAL, rs));
    CHECK_OK(rl_execute(c, reqs + RL_STATS_MAX_NAMES, EXTRA, rs)); /* still the overflow entry */
    rl_limiter_stats *all = calloc(TOTAL + 1, sizeof *all);
    size_t n = 0;
    CHECK_OK(rl_client_stats(c, all, TOTAL + 1, &n));
    CHECK_EQ(n, RL_STATS_MAX_NAMES + 1);
    uint64_t sum = 0, named = 0;
    for (size_t i = 0; i < n; i++) {
        sum += decisions(&all[i]);
        if (!all[i].name[0]) CHECK_EQ(decisions(&all[i]), 2 * EXTRA);
        else named += decisions(&all[i]) == 1;
    }
    CHECK_EQ(named, RL_STATS_MAX_NAMES);
    CHECK_EQ(sum, TOTAL + EXTRA);
    free(all);
    free(names);
    free(rs);
    free(reqs);
    rl_client_close(c);
}

static void test_off(void)
{
    rl_options o = RL_OPTIONS_INIT;
    o.metrics_off = 1;
    rl_client *c = open_client(&redis, &o);
    rl_spec spec = {.algorithm = RL_GCRA, .limit = 10, .period_ms = 1000, .burst = 0};
    rl_result r;
    CHECK_OK(rl_acquire(c, "off", "u", &spec, 1, &r));
    size_t n = 99;
    CHECK_OK(rl_client_stats(c, NULL, 0, &n));
    CHECK_EQ(n, 0);
    rl_client_close(c);
    rl_client *bad = NULL;
    o.metrics_off = 2;
    CHECK_EQ(rl_client_open(&bad, redis.url, &o), RL_ERR_INVALID);
    CHECK(bad == NULL);
}

int main(void)
{
    redis_start(&redis);
    test_blocking_sequence();
    test_fallback_and_timeout();
    test_async_sequence();
    test_threads_exact();
    test_overflow();
    test_off();
    redis_stop(&redis);
    return test_summary("stats");
}
