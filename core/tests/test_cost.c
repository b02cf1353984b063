/* Bounded server cost (docs/semantics.md, "Cost budget"): every script is
 * driven with the worst valid inputs (largest limits and permits, many calls
 * in a window, rate changes, the largest refunds of a 100,000-call log,
 * 100,000 expired holders and crashed waiters, a queue with 100,000 due
 * messages) and
 * Redis's own SLOWLOG (slowlog-log-slower-than 50000 us) must show no script
 * call that took 50 ms or more, while the results stay exact and every key
 * outlives its state. Runs against whatever redis-server is first on PATH
 * (scripts/matrix.sh puts Redis 8.0 or Valkey 9.1 there). */
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "harness.h"

static test_redis redis;
static rl_client *client;
static redisContext *raw;

#define T0 1700000000000LL
#define SLOW_US 50000

static void cmd(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(raw, fmt, ap);
    va_end(ap);
    if (!r || r->type == REDIS_REPLY_ERROR) {
        fprintf(stderr, "command %s failed: %s\n", fmt, r ? r->str : raw->errstr);
        test_failures++;
    }
    if (r) freeReplyObject(r);
}

/* pipelined writes for building large states quickly */
static int pending;
static void queue_cmd(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisvAppendCommand(raw, fmt, ap);
    va_end(ap);
    if (++pending == 1000) {
        for (; pending > 0; pending--) {
            void *r;
            if (redisGetReply(raw, &r) != REDIS_OK) {
                fprintf(stderr, "pipeline failed\n");
                exit(2);
            }
            freeReplyObject(r);
        }
    }
}
static void flush_cmds(void)
{
    for (; pending > 0; pending--) {
        void *r;
        if (redisGetReply(raw, &r) != REDIS_OK) exit(2);
        freeReplyObject(r);
    }
}

static long long redis_ms(void)
{
    redisReply *r = redisCommand(raw, "TIME");
    long long ms = atoll(r->element[0]->str) * 1000 + atoll(r->element[1]->str) / 1000;
    freeReplyObject(r);
    return ms;
}

static void slowlog_reset(void)
{
    cmd("SLOWLOG RESET");
}

/* RL_COST_REPORT=1: log calls of 1 ms or more and print the slowest script
 * call of each scenario (0: none took 1 ms); still fails at 50 ms */
static int report;

/* script calls of 50 ms or more seen by check_slowlog in this attempt */
static int slow_calls;

/* Counts every script call in SLOWLOG (>= 50 ms since the last reset). */
static void check_slowlog(const char *what)
{
    redisReply *r = redisCommand(raw, "SLOWLOG GET %d", report ? 10000 : 128);
    int slow = 0;
    long long slowest = 0;
    for (size_t i = 0; r && r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
        redisReply *e = r->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 4 || e->element[3]->type != REDIS_REPLY_ARRAY ||
            e->element[3]->elements == 0)
            continue;
        const char *name = e->element[3]->element[0]->str;
        if (strncasecmp(name, "EVAL", 4) && strncasecmp(name, "FCALL", 5)) continue;
        if (e->element[2]->integer > slowest) slowest = e->element[2]->integer;
        if (report && e->element[2]->integer >= 10000)
            printf("  %lld us: %s %s\n", e->element[2]->integer,
                   e->element[3]->elements > 3 ? e->element[3]->element[3]->str : "",
                   e->element[3]->elements > 7 ? e->element[3]->element[7]->str : "");
        if (e->element[2]->integer < SLOW_US) continue;
        fprintf(stderr, "%s: a script call took %lld us (SLOWLOG)\n", what, e->element[2]->integer);
        slow++;
    }
    if (report) printf("%-60s slowest script call %6lld us\n", what, slowest);
    slow_calls += slow;
    if (r) freeReplyObject(r);
    slowlog_reset();
}

static rl_result decide(const char *id, rl_spec spec, int64_t permits, rl_op op, int64_t now)
{
    rl_request req = {.name = "cost", .id = id, .spec = spec, .permits = permits, .op = op, .max_wait_ms = 0, .now_ms = now};
    rl_result res;
    memset(&res, 0xff, sizeof res);
    if (rl_execute(client, &req, 1, &res) != RL_OK) {
        fprintf(stderr, "rl_execute(%s): %s\n", id, rl_errmsg());
        test_failures++;
    }
    return res;
}

/* ---- every limiter at its largest valid limit and permits ------------- */

static void test_limiters_worst(void)
{
    const int64_t exact = (int64_t)1 << 53, product = (int64_t)1 << 51;
    rl_spec specs[] = {
        {.algorithm = RL_FIXED_WINDOW, .limit = exact / 2, .period_ms = 1000, .burst = 0}, /* the largest valid limit: count + permits stay exact */
        {.algorithm = RL_SLIDING_LOG, .limit = 1000000000000000LL, .period_ms = 1000, .burst = 0},
        {.algorithm = RL_SLIDING_WINDOW, .limit = product / 1000, .period_ms = 1000, .burst = 0},
        {.algorithm = RL_TOKEN_BUCKET, .limit = product / 1000, .period_ms = 1000, .burst = 0},
        {.algorithm = RL_LEAKY_BUCKET, .limit = product / 1000, .period_ms = 1000, .burst = 0},
        {.algorithm = RL_GCRA, .limit = 1000000, .period_ms = 1000, .burst = product / 1000},
    };
    slowlog_reset();
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        rl_spec s = specs[i];
        int64_t cap = s.burst ? s.burst : s.limit;
        const char *name = rl_algorithm_name(s.algorithm);
        int64_t now = redis_ms(); /* one instant: refills of 10^12 a second would blur it */
        rl_result r = decide(name, s, cap, RL_OP_ACQUIRE, now);
        CHECK_EQ(r.allowed, 1);
        CHECK_EQ(r.remaining, 0);
        r = decide(name, s, 1, RL_OP_ACQUIRE, now);
        CHECK_EQ(r.allowed, 0);
        r = decide(name, s, cap, RL_OP_PEEK, now);
        CHECK_EQ(r.allowed, 0);
        char key[128];
        snprintf(key, sizeof key, "rl:{cost:%s}:%s", name, name);
        CHECK(redis_int(raw, "PTTL %s", key) > 0);
    }
    check_slowlog("largest limits and permits");

    /* the case: 1,000,000 per 2 s, 999,999 at once (was 1.6-3.6 s of
     * one script, and on Valkey the key had expired when the call returned) */
    rl_spec sl = {.algorithm = RL_SLIDING_LOG, .limit = 1000000, .period_ms = 2000, .burst = 0};
    rl_result r = decide("big", sl, 999999, RL_OP_ACQUIRE, 0);
    EXPECT(r, 1, 1, -1, 2000);
    CHECK(redis_int(raw, "PTTL rl:{cost:big}:sliding_log") > 1500);
    CHECK_EQ(redis_int(raw, "ZCARD rl:{cost:big}:sliding_log"), 1);
    r = decide("big", sl, 1, RL_OP_PEEK, 0);
    CHECK_EQ(r.allowed, 1);
    CHECK_EQ(r.remaining, 1);
    r = decide("big", sl, 2, RL_OP_ACQUIRE, 0);
    CHECK_EQ(r.allowed, 0);
    check_slowlog("sliding_log 999,999 of 1,000,000/2 s");

    /* many rate changes: every call with another limit and period */
    srand(7);
    for (int i = 0; i < 3000; i++) {
        rl_spec s = specs[i % 6];
        int64_t cap_max = s.burst ? s.burst : s.limit;
        int64_t cap = 1 + (int64_t)((double)rand() / RAND_MAX * (double)(cap_max - 1));
        s.period_ms = 1 + rand() % 1000;
        if (s.burst) s.burst = cap;
        else s.limit = cap;
        if (s.algorithm == RL_GCRA) s.limit = 1 + rand() % 1000000;
        if (rl_spec_validate(&s) != RL_OK) continue;
        int64_t permits = 1 + (int64_t)((double)rand() / RAND_MAX * (double)(cap - 1));
        char id[16];
        snprintf(id, sizeof id, "rc%d", i % 6);
        decide(id, s, permits, rand() % 4 == 0 ? RL_OP_PEEK : RL_OP_ACQUIRE, 0);
    }
    check_slowlog("3000 calls, each with another rate");
}

/* ---- sliding_log: exact against a model -------------------------------- */

typedef struct {
    int64_t at, permits;
} model_entry;

typedef struct {
    model_entry *e;
    size_t n, cap;
    int64_t edge; /* what had slid out when the last call was admitted */
    int any;
} model;

static void model_add(model *m, int64_t at, int64_t permits)
{
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 64;
        m->e = realloc(m->e, m->cap * sizeof *m->e);
    }
    m->e[m->n++] = (model_entry){at, permits};
}

/* What docs/semantics.md says sliding_log answers. */
static rl_result model_decide(model *m, int64_t limit, int64_t period, int64_t permits, rl_op op, int64_t now)
{
    rl_result r = {.allowed = 0, .limit = limit, .retry_after_ms = -1};
    int64_t count = 0, newest = m->n ? m->e[m->n - 1].at : 0;
    int64_t edge = m->any && m->edge > now - period ? m->edge : now - period;
    size_t first = 0;
    while (first < m->n && m->e[first].at <= edge) first++;
    for (size_t i = first; i < m->n; i++) count += m->e[i].permits;
    if (count + permits > limit) {
        int64_t need = count + permits - limit, out = 0;
        size_t i = first;
        for (; i < m->n; i++)
            if ((out += m->e[i].permits) >= need) break;
        r.remaining = limit - count > 0 ? limit - count : 0;
        r.retry_after_ms = m->e[i].at + period - now;
        r.reset_after_ms = newest + period - now;
        return r;
    }
    r.allowed = 1;
    if (op == RL_OP_PEEK) {
        r.remaining = limit - count;
        r.reset_after_ms = count > 0 ? newest + period - now : 0;
        return r;
    }
    int64_t at = m->n && newest > now ? newest : now;
    model_add(m, at, permits);
    m->edge = edge;
    m->any = 1;
    r.remaining = limit - count - permits;
    r.reset_after_ms = at + period - now;
    return r;
}

static int same(rl_result a, rl_result b)
{
    return a.allowed == b.allowed && a.remaining == b.remaining && a.retry_after_ms == b.retry_after_ms &&
           a.reset_after_ms == b.reset_after_ms && a.limit == b.limit;
}

static void test_sliding_log_model(void)
{
    static const int64_t limits[] = {1, 2, 3, 10, 100, 1000000000000000LL};
    /* an admitted call sets a TTL of at least its period, which the PERSIST
     * right after must beat: no period of a few ms here */
    static const int64_t periods[] = {1000, 3000, 100000, 86400000};
    int mismatches = 0;
    srand(11);
    slowlog_reset();
    for (int c = 0; c < 40; c++) {
        model m = {0};
        char id[16];
        snprintf(id, sizeof id, "model%d", c);
        int64_t now = T0, limit = limits[rand() % 6], period = periods[rand() % 4];
        for (int step = 0; step < 150; step++) {
            int jump = rand() % 8;
            now += jump < 3 ? 0 : jump < 5 ? rand() % 3 : jump < 7 ? rand() % (period + 1) : period;
            if (rand() % 10 == 0) limit = limits[rand() % 6];
            if (rand() % 20 == 0) period = periods[rand() % 4];
            int64_t permits = limit <= 1 ? 1 : 1 + (int64_t)((double)rand() / RAND_MAX * (double)(limit - 1));
            if (rand() % 3 == 0) permits = limit;
            rl_op op = rand() % 4 == 0 ? RL_OP_PEEK : RL_OP_ACQUIRE;
            rl_spec s = {.algorithm = RL_SLIDING_LOG, .limit = limit, .period_ms = period, .burst = 0};
            rl_result want = model_decide(&m, limit, period, permits, op, now);
            rl_result got = decide(id, s, permits, op, now);
            /* explicit clocks are not Redis's: keep the key from expiring in real time */
            cmd("PERSIST rl:{cost:%s}:sliding_log", id);
            if (getenv("COST_DEBUG") && atoi(getenv("COST_DEBUG")) == c)
                fprintf(stderr, "%d: now +%lld limit %lld period %lld permits %lld op %d -> %d/%lld/%lld/%lld vs %d/%lld\n",
                        step, (long long)(now - T0), (long long)limit, (long long)period, (long long)permits, (int)op,
                        got.allowed, (long long)got.remaining, (long long)got.retry_after_ms,
                        (long long)got.reset_after_ms, want.allowed, (long long)want.remaining);
            if (!same(want, got) && mismatches++ < 10)
                fprintf(stderr,
                        "sliding_log %s step %d (limit %lld period %lld permits %lld op %d at +%lld): "
                        "got %d/%lld/%lld/%lld, model %d/%lld/%lld/%lld\n",
                        id, step, (long long)limit, (long long)period, (long long)permits, (int)op,
                        (long long)(now - T0), got.allowed, (long long)got.remaining,
                        (long long)got.retry_after_ms, (long long)got.reset_after_ms, want.allowed,
                        (long long)want.remaining, (long long)want.retry_after_ms, (long long)want.reset_after_ms);
        }
        free(m.e);
    }
    CHECK_EQ(mismatches, 0);
    check_slowlog("sliding_log against the model");
}

/* ---- sliding_log: 100,000 calls in one window, then all slide out ------ */

static void test_sliding_log_many_calls(void)
{
    enum { N = 100000 };
    const int64_t limit = 1000000000000000LL, period = 10000000;
    rl_spec s = {.algorithm = RL_SLIDING_LOG, .limit = limit, .period_ms = period, .burst = 0};
    rl_request *reqs = calloc(N, sizeof *reqs);
    rl_result *res = calloc(N, sizeof *res);
    for (int i = 0; i < N; i++) reqs[i] = (rl_request){.name = "cost", .id = "many", .spec = s, .permits = 1 + i % 3, .op = RL_OP_ACQUIRE, .max_wait_ms = 0, .now_ms = T0 + i / 10};
    CHECK_OK(rl_execute(client, reqs, N, res));
    int64_t taken = 0;
    for (int i = 0; i < N; i++) taken += 1 + i % 3;
    CHECK_EQ(res[N - 1].remaining, limit - taken);
    CHECK_EQ(redis_int(raw, "ZCARD rl:{cost:many}:sliding_log"), N);
    slowlog_reset();
    int64_t end = T0 + (N - 1) / 10;
    /* denied: every live permit has to slide out (binary search over 100,000) */
    EXPECT(decide("many", s, limit, RL_OP_ACQUIRE, end), 0, limit - taken, period, period);
    /* one permit more than fits: the oldest call (1 permit at T0) */
    EXPECT(decide("many", s, limit - taken + 1, RL_OP_PEEK, end), 0, limit - taken, period - (end - T0), period);
    /* 2 more than fit: the first two calls (1 + 2 permits, T0) */
    EXPECT(decide("many", s, limit - taken + 2, RL_OP_PEEK, end), 0, limit - taken, period - (end - T0), period);
    /* 20 more than fit: the first ten calls (19 permits, at T0) and the 11th, at T0 + 1 */
    EXPECT(decide("many", s, limit - taken + 20, RL_OP_PEEK, end), 0, limit - taken, period - (end - T0) + 1,
           period);
    /* all slid out: results exact all along, whatever is left to delete */
    int64_t later = end + period + 5;
    for (int i = 0; i < 10; i++) {
        rl_result r = decide("many", s, 1, RL_OP_ACQUIRE, later + i);
        EXPECT(r, 1, limit - 1 - i, -1, period);
    }
    /* deleted: 1,000 per acquire once an admitted call has moved the edge past them */
    CHECK_EQ(redis_int(raw, "ZCARD rl:{cost:many}:sliding_log"), N - 9 * 1000 + 10);
    EXPECT(decide("many", s, limit - 9, RL_OP_PEEK, later + 10), 0, limit - 10, period - 10, period - 1);
    EXPECT(decide("many", s, limit - 10, RL_OP_PEEK, later + 10), 1, limit - 10, -1, period - 1);
    /* a batch as large as a client sends in one script call (max_batch, 16 by default): its decisions
     * share the call's budget of 1,000 deletions */
    enum { BATCH = 16 };
    rl_request batch[BATCH];
    rl_result got[BATCH];
    for (int i = 0; i < BATCH; i++)
        batch[i] = (rl_request){.name = "cost", .id = "many", .spec = s, .permits = 1, .op = RL_OP_ACQUIRE,
                                .now_ms = later + 11 + i};
    CHECK_OK(rl_execute(client, batch, BATCH, got));
    for (int i = 0; i < BATCH; i++) EXPECT(got[i], 1, limit - 11 - i, -1, period);
    CHECK_EQ(redis_int(raw, "ZCARD rl:{cost:many}:sliding_log"),
             N - 10 * 1000 + 10 + BATCH);
    check_slowlog("sliding_log with 100,000 calls in the window");
    free(reqs);
    free(res);
}

/* ---- refunds: the largest refund, against the longest log ---------------- */

/* a log of n calls of 1 permit, 10 a ms from T0, under 10^15 per 10^7 ms */
static void log_calls(const char *id, int n)
{
    rl_spec s = {.algorithm = RL_SLIDING_LOG, .limit = 1000000000000000LL, .period_ms = 10000000, .burst = 0};
    rl_request *reqs = calloc(n, sizeof *reqs);
    rl_result *res = calloc(n, sizeof *res);
    for (int i = 0; i < n; i++)
        reqs[i] = (rl_request){.name = "cost", .id = id, .spec = s, .permits = 1, .op = RL_OP_ACQUIRE, .now_ms = T0 + i / 10};
    CHECK_OK(rl_execute(client, reqs, n, res));
    CHECK_EQ(res[n - 1].remaining, s.limit - n);
    free(reqs);
    free(res);
}

static void test_refunds(void)
{
    /* every algorithm at its largest limit: all of it taken, then all of it back in one refund */
    const int64_t exact = (int64_t)1 << 53, product = (int64_t)1 << 51;
    rl_spec specs[] = {
        {.algorithm = RL_FIXED_WINDOW, .limit = exact / 2, .period_ms = 1000, .burst = 0},
        {.algorithm = RL_SLIDING_LOG, .limit = 1000000000000000LL, .period_ms = 1000, .burst = 0},
        {.algorithm = RL_SLIDING_WINDOW, .limit = product / 1000, .period_ms = 1000, .burst = 0},
        {.algorithm = RL_TOKEN_BUCKET, .limit = product / 1000, .period_ms = 1000, .burst = 0},
        {.algorithm = RL_LEAKY_BUCKET, .limit = product / 1000, .period_ms = 1000, .burst = 0},
        {.algorithm = RL_GCRA, .limit = 1000000, .period_ms = 1000, .burst = product / 1000},
    };
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        rl_spec s = specs[i];
        int64_t cap = s.burst ? s.burst : s.limit;
        const char *name = rl_algorithm_name(s.algorithm);
        int64_t now = redis_ms();
        rl_result r = decide(name, s, cap, RL_OP_ACQUIRE, now);
        CHECK_EQ(r.allowed, 1);
        CHECK_EQ(r.remaining, 0);
        r = decide(name, s, cap, RL_OP_REFUND, now);
        CHECK_EQ(r.allowed, 1);
        CHECK_EQ(r.remaining, cap);
        r = decide(name, s, cap, RL_OP_ACQUIRE, now);
        CHECK_EQ(r.allowed, 1);
        CHECK_EQ(r.remaining, 0);
        char key[128];
        snprintf(key, sizeof key, "rl:{cost:%s}:%s", name, name);
        CHECK(redis_int(raw, "PTTL %s", key) > 0);
    }
    check_slowlog("every algorithm: its largest refund");

    /* sliding_log, the case: 100,000 calls of 1 permit, then one refund of 100,000 (was one script
     * call of 0.66-1.12 s: the refund read and rewrote each call it took back) */
    enum { N = 100000 };
    const int64_t limit = 1000000000000000LL, period = 10000000;
    rl_spec s = {.algorithm = RL_SLIDING_LOG, .limit = limit, .period_ms = period, .burst = 0};
    int64_t end = T0 + (N - 1) / 10;
    log_calls("log", N);
    slowlog_reset();
    EXPECT(decide("log", s, N, RL_OP_REFUND, end), 1, limit, -1, 0);
    CHECK_EQ(redis_int(raw, "ZCARD rl:{cost:log}:sliding_log"), N + 1); /* the calls, and the marker */
    EXPECT(decide("log", s, limit, RL_OP_PEEK, end), 1, limit, -1, 0);
    EXPECT(decide("log", s, 1, RL_OP_ACQUIRE, end), 1, limit - 1, -1, period);
    /* the oldest live permits went: all of the log's, so the new one alone counts until it slides out */
    EXPECT(decide("log", s, limit, RL_OP_PEEK, end), 0, limit - 1, period, period);
    check_slowlog("sliding_log: a refund of 100,000 calls");

    /* the largest refund (the limit) against the same log, and part of it: the oldest go first */
    cmd("DEL rl:{cost:log}:sliding_log");
    log_calls("log", N);
    slowlog_reset();
    EXPECT(decide("log", s, N / 2 + 5, RL_OP_REFUND, end), 1, limit - N / 2 + 5, -1, period);
    /* 6 more than fit: 5 of the 10 calls at T0 + 5000 went back, so the other 5 and one at T0 + 5001 must
     * slide out */
    EXPECT(decide("log", s, limit - N / 2 + 11, RL_OP_PEEK, end), 0, limit - N / 2 + 5,
           T0 + N / 20 + 1 + period - end, period);
    EXPECT(decide("log", s, limit - N / 2 + 10, RL_OP_PEEK, end), 0, limit - N / 2 + 5, T0 + N / 20 + period - end,
           period);
    EXPECT(decide("log", s, limit, RL_OP_REFUND, end), 1, limit, -1, 0);
    EXPECT(decide("log", s, limit, RL_OP_ACQUIRE, end), 1, 0, -1, period);
    CHECK(redis_int(raw, "PTTL rl:{cost:log}:sliding_log") > 0);
    check_slowlog("sliding_log: the largest refund of 100,000 calls");
}

/* ---- semaphore: 100,000 expired holders and crashed waiters -------------- */

typedef struct {
    const char *name;
    int64_t max, timeout;
    rl_permit permit;
    int rc;
} waiter;

static void *wait_permit(void *arg)
{
    waiter *w = arg;
    rl_wait wait = {w->timeout, NULL, NULL};
    w->rc = rl_semaphore_acquire(client, w->name, w->max, 60000, &wait, &w->permit);
    return NULL;
}

static void add_dead(const char *name, int from, int n, long long now)
{
    for (int i = from; i < from + n; i++) {
        queue_cmd("ZADD rl:{%s}:semaphore %lld h%031d", name, now - 1 - i % 1000, i);
        queue_cmd("ZADD rl:{%s}:semaphore:queue %d w%031d", name, i + 1, i);
        queue_cmd("ZADD rl:{%s}:semaphore:waiters %lld w%031d", name, now - 1 - i % 700, i);
    }
    flush_cmds();
}

static void test_semaphore(void)
{
    enum { N = 100000 };
    long long now = redis_ms();
    rl_permit live, p;
    rl_wait none = {0, NULL, NULL};
    int64_t n;
    int done;

    CHECK_OK(rl_semaphore_acquire(client, "sem", 1, 60000, &none, &live));
    CHECK(live.acquired);
    add_dead("sem", 0, N, now);
    cmd("HSET rl:{sem}:semaphore:meta seq %d", N + 10);
    cmd("PEXPIRE rl:{sem}:semaphore:queue 60000");
    cmd("PEXPIRE rl:{sem}:semaphore:waiters 60000");
    slowlog_reset();
    /* exact at once, whatever is left to delete */
    CHECK_OK(rl_semaphore_holders(client, "sem", &n));
    CHECK_EQ(n, 1);
    CHECK_OK(rl_semaphore_available(client, "sem", 2, &n));
    CHECK_EQ(n, 1);
    CHECK_OK(rl_semaphore_acquire(client, "sem", 1, 60000, &none, &p));
    CHECK(!p.acquired);
    CHECK_OK(rl_semaphore_acquire(client, "sem", 2, 60000, &none, &p));
    CHECK(p.acquired);
    CHECK_OK(rl_semaphore_release(client, "sem", p.id, &done));
    CHECK(done);
    /* an expired holder is gone even before its clean-up */
    CHECK_OK(rl_semaphore_release(client, "sem", "h0000000000000000000000000099999", &done));
    CHECK(!done);
    CHECK_OK(rl_semaphore_refresh(client, "sem", "h0000000000000000000000000099998", 1000, &done));
    CHECK(!done);

    /* a waiter queued behind 100,000 crashed ones, then 50,000 more crashed
     * behind it: it gets the permit released while it waits */
    waiter w = {"sem", 1, 10000, {0}, 0};
    pthread_t t;
    pthread_create(&t, NULL, wait_permit, &w);
    sleep_ms(300);
    add_dead("sem", N, N / 2, now);
    CHECK_OK(rl_semaphore_release(client, "sem", live.id, &done));
    CHECK(done);
    pthread_join(t, NULL);
    CHECK_OK(w.rc);
    CHECK(w.permit.acquired);
    CHECK_OK(rl_semaphore_holders(client, "sem", &n));
    CHECK_EQ(n, 1);
    CHECK(redis_int(raw, "PTTL rl:{sem}:semaphore") > 50000);
    CHECK(redis_int(raw, "PTTL rl:{sem}:semaphore:meta") > 50000);
    /* the clean-up finishes over later calls */
    for (int i = 0; i < 1000 && (redis_int(raw, "ZCARD rl:{sem}:semaphore:queue") > 0 ||
                                 redis_int(raw, "ZCARD rl:{sem}:semaphore") > 1);
         i++)
        CHECK_OK(rl_semaphore_acquire(client, "sem", 1, 60000, &none, &p));
    CHECK_EQ(redis_int(raw, "ZCARD rl:{sem}:semaphore:queue"), 0);
    CHECK_EQ(redis_int(raw, "ZCARD rl:{sem}:semaphore:waiters"), 0);
    CHECK_EQ(redis_int(raw, "ZCARD rl:{sem}:semaphore"), 1);
    CHECK_OK(rl_semaphore_release(client, "sem", w.permit.id, &done));
    CHECK(done);
    check_slowlog("semaphore with 150,000 expired holders and crashed waiters");

    /* permits_max raised to 1,000,000 with 100,000 live waiters queued: a
     * bounded number are woken per call */
    now = redis_ms();
    for (int i = 0; i < N; i++) {
        queue_cmd("ZADD rl:{sem2}:semaphore:queue %d w%031d", i + 1, i);
        queue_cmd("ZADD rl:{sem2}:semaphore:waiters %lld w%031d", now + 60000, i);
    }
    flush_cmds();
    cmd("HSET rl:{sem2}:semaphore:meta seq %d max 1", N + 1);
    slowlog_reset();
    CHECK_OK(rl_semaphore_acquire(client, "sem2", 1, 60000, &none, &p));
    CHECK(!p.acquired);
    CHECK_OK(rl_semaphore_acquire(client, "sem2", 1000000, 60000, &none, &p));
    CHECK(p.acquired);
    CHECK_OK(rl_semaphore_available(client, "sem2", 1000000, &n));
    CHECK_EQ(n, 999999);
    check_slowlog("semaphore of 1,000,000 with 100,000 waiters");
}

/* ---- delay queue: 100,000 due messages ----------------------------------- */

static void test_delay_queue(void)
{
    enum { N = 100000 };
    long long now = redis_ms();
    for (int i = 0; i < N; i++) queue_cmd("ZADD rl:{dq}:delay_queue %lld m%06d", now - 100000 + i, i);
    flush_cmds();
    cmd("PEXPIRE rl:{dq}:delay_queue 600000");
    slowlog_reset();
    int next = 0, in_order = 1;
    for (int round = 0; round < 10; round++) {
        rl_messages m;
        CHECK_OK(rl_queue_pop_ready(client, "dq", 10000, &m));
        CHECK_EQ(m.count, 10000);
        for (size_t i = 0; i < m.count; i++) {
            char want[16];
            snprintf(want, sizeof want, "m%06d", next++);
            if (strcmp(m.items[i], want)) in_order = 0;
        }
        rl_messages_free(&m);
    }
    CHECK(in_order);
    int64_t size;
    CHECK_OK(rl_queue_size(client, "dq", &size));
    CHECK_EQ(size, 0);
    /* a raw caller asking for more gets 10,000 at most */
    for (int i = 0; i < 20000; i++) queue_cmd("ZADD rl:{dq}:delay_queue %lld x%06d", now - 1, i);
    flush_cmds();
    slowlog_reset();
    const char *sha = NULL, *name;
    for (size_t i = 0; i < rl_script_count(); i++)
        if (rl_script_info(i, &name, NULL) == RL_OK && !strcmp(name, "delay_queue")) rl_script_info(i, NULL, &sha);
    redisReply *r = redisCommand(raw, "EVALSHA %s 1 rl:{dq}:delay_queue pop 1000000000", sha);
    CHECK(r && r->type == REDIS_REPLY_ARRAY && r->elements == 10001);
    if (r) freeReplyObject(r);
    CHECK_OK(rl_queue_size(client, "dq", &size));
    CHECK_EQ(size, 10000);
    int added;
    CHECK_OK(rl_queue_push(client, "dq", "later", 5, 60000, &added));
    CHECK(redis_int(raw, "PTTL rl:{dq}:delay_queue") > 7LL * 24 * 3600 * 1000);
    check_slowlog("delay queue with 100,000 due messages");
}

/* Runs a scenario on an empty database. Results must be exact every time;
 * a call of 50 ms or more fails it only if it happens again on two more
 * runs: a bounded script is fast every time, while on a busy 2-core machine
 * the server can lose its CPU for tens of ms in the middle of any call. */
static void scenario(const char *name, void (*run)(void))
{
    for (int attempt = 1;; attempt++) {
        /* freed now, not by a background thread while the scenario runs
         * (Valkey frees lazily by default; with libc malloc, as Valkey's and
         * our Redis 8 builds use, that slows the main thread down) */
        cmd("FLUSHALL SYNC");
        slow_calls = 0;
        run();
        test_checks++;
        if (!slow_calls) return;
        if (attempt == 3) {
            fprintf(stderr, "%s: a script call took 50 ms or more in each of 3 runs\n", name);
            test_failures++;
            return;
        }
        fprintf(stderr, "%s: a script call took 50 ms or more; running it again (a busy machine?)\n", name);
    }
}

int main(void)
{
    redis_start(&redis);
    client = open_client(&redis, NULL);
    raw = redis_raw(&redis);
    report = getenv("RL_COST_REPORT") && !strcmp(getenv("RL_COST_REPORT"), "1");
    cmd("CONFIG SET slowlog-log-slower-than %d", report ? 1000 : SLOW_US);
    cmd("CONFIG SET slowlog-max-len %d", report ? 10000 : 1024);
    scenario("limiters", test_limiters_worst);
    scenario("sliding_log model", test_sliding_log_model);
    scenario("sliding_log many calls", test_sliding_log_many_calls);
    scenario("refunds", test_refunds);
    scenario("semaphore", test_semaphore);
    scenario("delay queue", test_delay_queue);
    redisFree(raw);
    rl_client_close(client);
    redis_stop(&redis);
    return test_summary("cost");
}
