/* Leases never over-admit: for every algorithm, threads (blocking calls,
 * batches, acquire up to n) and asynchronous submitters (rl_submit, many in
 * flight), some leasing and some not, hammer one key for a few periods.
 * The actors are spread over three clients, so that several leases are held
 * at once. Each admission is known to lie between CLOCK_MONOTONIC read before its
 * call and after its result; the admissions certainly inside an interval
 * must obey the algorithm's bound there:
 *   sliding_log: at most limit in any interval of period (less the 1 ms
 *     its log rounds to);
 *   token_bucket, gcra, leaky_bucket: at most burst + rate x t in any
 *     interval t (plus the 1 ms their clock rounds to);
 *   fixed_window: at most limit per window (the windows' starts read from
 *     Redis as the run goes);
 *   sliding_window: at most limit per aligned window (Redis time, mapped to
 *     the monotonic clock through TIME).
 * And the key is not starved: most of what the bound allows is admitted. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

#define LIMIT 200
#define PERIOD_MS 1000
#define RUN_MS 2500
#define LEASE_MS 50
#define MAX_ADMISSIONS 20000

typedef struct {
    int64_t lo, hi; /* monotonic us */
    int64_t permits;
} admission;

static test_redis redis;
#define CLIENTS 3 /* several leases held at once on one key */
static rl_client *clients[CLIENTS];
static rl_spec spec;
static const char *key_id;
static int64_t run_until_us;

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

typedef enum { BLOCKING, BATCH, UP_TO, ASYNC } kind;

typedef struct {
    kind kind;
    int64_t lease_ms;
    rl_client *client;
    admission *got;
    size_t n;
    long errors;
} actor;

static rl_request request_of(const actor *a)
{
    rl_request req;
    memset(&req, 0, sizeof req);
    req.name = "bound";
    req.id = key_id;
    req.spec = spec;
    req.permits = a->kind == UP_TO ? 3 : 1;
    req.op = a->kind == UP_TO ? RL_OP_ACQUIRE_UP_TO : RL_OP_ACQUIRE;
    req.lease_ms = a->lease_ms;
    return req;
}

static void record(actor *a, int64_t lo, int64_t hi, const rl_result *r)
{
    if (!r->allowed || a->n == MAX_ADMISSIONS) return;
    a->got[a->n++] = (admission){lo, hi, r->granted};
}

static void run_async(actor *a)
{
    enum { IN_FLIGHT = 16 };
    rl_completions *q;
    int64_t lo[IN_FLIGHT];
    rl_completion done[IN_FLIGHT];
    rl_request req = request_of(a);
    if (rl_completions_open(&q)) {
        a->errors++;
        return;
    }
    rl_target t = {NULL, NULL, q};
    size_t flying = 0;
    for (int i = 0; i < IN_FLIGHT; i++) {
        lo[i] = mono_us();
        if (rl_submit(a->client, &req, (uint64_t)i, &t)) a->errors++;
        else flying++;
    }
    while (flying) {
        wait_readable(rl_completions_fd(q), 100);
        size_t n = rl_completions_take(q, done, IN_FLIGHT);
        int64_t hi = mono_us();
        for (size_t k = 0; k < n; k++) {
            flying--;
            uint64_t i = done[k].tag;
            if (done[k].status) a->errors++;
            else record(a, lo[i], hi, &done[k].result);
            if (hi < run_until_us) {
                lo[i] = mono_us();
                if (rl_submit(a->client, &req, i, &t)) a->errors++;
                else flying++;
            }
        }
    }
    rl_completions_close(q);
}

static void *act(void *arg)
{
    actor *a = arg;
    if (a->kind == ASYNC) {
        run_async(a);
        return NULL;
    }
    rl_request reqs[2] = {request_of(a), request_of(a)};
    rl_result res[2];
    size_t n = a->kind == BATCH ? 2 : 1;
    while (mono_us() < run_until_us) {
        int64_t lo = mono_us();
        int rc = rl_execute(a->client, reqs, n, res);
        int64_t hi = mono_us();
        if (rc) a->errors++;
        for (size_t i = 0; i < n && !rc; i++) record(a, lo, hi, &res[i]);
    }
    return NULL;
}

/* ---- where admissions certainly lie ------------------------------------------- */

static admission *all;
static size_t count;

static int by_lo(const void *x, const void *y)
{
    const admission *a = x, *b = y;
    return a->lo < b->lo ? -1 : a->lo > b->lo;
}

/* The most admitted certainly within [s, s + span_us) over every start s
 * (an admission's lo): sliding_log's bound. */
static int64_t most_in_any(int64_t span_us)
{
    int64_t most = 0;
    for (size_t i = 0; i < count; i++) {
        int64_t in = 0;
        for (size_t j = i; j < count && all[j].lo < all[i].lo + span_us; j++)
            if (all[j].hi < all[i].lo + span_us) in += all[j].permits;
        if (in > most) most = in;
    }
    return most;
}

static int by_hi(const void *x, const void *y)
{
    const admission *a = x, *b = y;
    return a->hi < b->hi ? -1 : a->hi > b->hi;
}

/* The buckets: every interval [lo_i, hi_j] holds at most burst + rate x t of
 * the admissions certainly inside it; returns the worst excess (<= 0: kept). */
static double worst_excess(double burst, double per_us)
{
    double worst = -1e18;
    admission *later = malloc(count * sizeof *later);
    for (size_t i = 0; i < count; i++) {
        /* those starting at or after lo_i, by their end */
        size_t m = count - i;
        memcpy(later, all + i, m * sizeof *later);
        qsort(later, m, sizeof *later, by_hi);
        int64_t in = 0;
        for (size_t e = 0; e < m; e++) {
            in += later[e].permits;
            /* token_bucket and leaky_bucket keep time in whole milliseconds:
             * an interval may have been credited up to 1 ms more refill */
            double excess = (double)in - (burst + per_us * (double)(later[e].hi - all[i].lo + 1000));
            if (excess > worst) worst = excess;
        }
    }
    free(later);
    return worst;
}

/* Redis time (us) minus monotonic, within +-*error. */
static int64_t redis_offset(int64_t *error)
{
    redisContext *c = redis_raw(&redis);
    int64_t best = 0, best_rtt = INT64_MAX;
    for (int i = 0; i < 20; i++) {
        int64_t before = mono_us();
        redisReply *r = redisCommand(c, "TIME");
        int64_t after = mono_us();
        int64_t t = atoll(r->element[0]->str) * 1000000 + atoll(r->element[1]->str);
        freeReplyObject(r);
        if (after - before < best_rtt) {
            best_rtt = after - before;
            best = t - (before + after) / 2;
        }
    }
    redisFree(c);
    *error = best_rtt / 2 + 1;
    return best;
}

/* Admissions certainly within the Redis-time window [from, from + span) (us). */
static int64_t in_window(int64_t offset, int64_t error, int64_t from, int64_t span)
{
    int64_t in = 0;
    for (size_t j = 0; j < count; j++)
        if (all[j].lo + offset - error >= from && all[j].hi + offset + error < from + span) in += all[j].permits;
    return in;
}

/* fixed_window: the starts of its windows, read while the run goes. */
static int64_t starts[1000];
static size_t nstarts;

static void *watch_windows(void *arg)
{
    const char *key = arg;
    redisContext *c = redis_raw(&redis);
    while (mono_us() < run_until_us + 100000) {
        redisReply *r = redisCommand(c, "HGET %s start", key);
        if (r && r->type == REDIS_REPLY_STRING) {
            int64_t s = atoll(r->str);
            if ((!nstarts || starts[nstarts - 1] != s) && nstarts < 1000) starts[nstarts++] = s;
        }
        if (r) freeReplyObject(r);
        sleep_ms(10);
    }
    redisFree(c);
    return NULL;
}

static void bound(rl_algorithm algorithm)
{
    static const actor cast[] = {
        {BLOCKING, LEASE_MS, 0, 0, 0, 0}, {BLOCKING, LEASE_MS, 0, 0, 0, 0}, {BLOCKING, 0, 0, 0, 0, 0},
        {BATCH, LEASE_MS, 0, 0, 0, 0},    {UP_TO, LEASE_MS, 0, 0, 0, 0},    {UP_TO, 0, 0, 0, 0, 0},
        {ASYNC, LEASE_MS, 0, 0, 0, 0},    {ASYNC, 0, 0, 0, 0, 0},           {ASYNC, LEASE_MS, 0, 0, 0, 0},
    };
    enum { ACTORS = sizeof cast / sizeof cast[0] };
    actor actors[ACTORS];
    pthread_t threads[ACTORS], watcher;
    char key[256];
    memset(&spec, 0, sizeof spec);
    spec.algorithm = algorithm;
    spec.limit = LIMIT;
    spec.period_ms = PERIOD_MS;
    key_id = rl_algorithm_name(algorithm);
    CHECK(rl_key(clients[0], "bound", key_id, algorithm, key, sizeof key) > 0);
    int64_t error, offset = redis_offset(&error);
    int64_t start = mono_us();
    run_until_us = start + RUN_MS * 1000;
    nstarts = 0;
    if (algorithm == RL_FIXED_WINDOW) pthread_create(&watcher, NULL, watch_windows, key);
    for (int i = 0; i < ACTORS; i++) {
        actors[i] = cast[i];
        actors[i].client = clients[i % CLIENTS];
        if (getenv("RL_BOUND_NO_LEASE")) actors[i].lease_ms = 0;
        actors[i].got = malloc(MAX_ADMISSIONS * sizeof(admission));
        pthread_create(&threads[i], NULL, act, &actors[i]);
    }
    count = 0;
    long errors = 0;
    all = malloc(ACTORS * MAX_ADMISSIONS * sizeof *all);
    for (int i = 0; i < ACTORS; i++) {
        pthread_join(threads[i], NULL);
        memcpy(all + count, actors[i].got, actors[i].n * sizeof *all);
        count += actors[i].n;
        errors += actors[i].errors;
        free(actors[i].got);
    }
    if (algorithm == RL_FIXED_WINDOW) pthread_join(watcher, NULL);
    int64_t elapsed_us = mono_us() - start;
    qsort(all, count, sizeof *all, by_lo);
    int64_t admitted = 0;
    for (size_t i = 0; i < count; i++) admitted += all[i].permits;
    CHECK_EQ(errors, 0);
    double per_us = (double)LIMIT / (PERIOD_MS * 1000.0);
    /* what the limit allows while the actors were calling (RUN_MS; the
     * calls in flight at its end add to it) */
    double allowed_total = (double)LIMIT + per_us * RUN_MS * 1000.0;
    const char *name = rl_algorithm_name(algorithm);
    switch (algorithm) {
    case RL_SLIDING_LOG: {
        /* the log keeps whole milliseconds: a permit at t counts during
         * [floor(t), floor(t) + period), so the bound is exact for any
         * interval of period - 1 ms (with leases or without) */
        int64_t most = most_in_any((PERIOD_MS - 1) * 1000);
        printf("  %s: %lld admitted, at most %lld in any period (limit %d)\n", name, (long long)admitted,
               (long long)most, LIMIT);
        CHECK(most <= LIMIT);
        allowed_total = LIMIT * (double)((RUN_MS + PERIOD_MS - 1) / PERIOD_MS);
        break;
    }
    case RL_TOKEN_BUCKET:
    case RL_GCRA:
    case RL_LEAKY_BUCKET: {
        double worst = worst_excess(LIMIT, per_us);
        printf("  %s: %lld admitted, worst interval %.2f against burst + rate x t\n", name, (long long)admitted,
               worst);
        CHECK(worst <= 1e-9);
        break;
    }
    case RL_FIXED_WINDOW: {
        int64_t most = 0;
        int64_t unit = nstarts && starts[0] > 100000000000000LL ? 1 : 1000; /* the start in us or ms */
        for (size_t k = 0; k < nstarts; k++) {
            int64_t in = in_window(offset, error, starts[k] * unit, PERIOD_MS * 1000);
            if (in > most) most = in;
        }
        printf("  %s: %lld admitted, %zu windows seen, at most %lld in one (limit %d)\n", name, (long long)admitted,
               nstarts, (long long)most, LIMIT);
        CHECK(nstarts >= RUN_MS / PERIOD_MS);
        CHECK(most <= LIMIT);
        allowed_total = LIMIT * (double)nstarts;
        break;
    }
    default: { /* sliding_window: aligned windows */
        int64_t most = 0, period = PERIOD_MS * 1000, windows = 0;
        int64_t first = (start + offset) / period * period;
        for (int64_t w = first; w < start + offset + elapsed_us; w += period, windows++) {
            int64_t in = in_window(offset, error, w, period);
            if (in > most) most = in;
        }
        printf("  %s: %lld admitted, at most %lld in one aligned window (limit %d)\n", name, (long long)admitted,
               (long long)most, LIMIT);
        CHECK(most <= LIMIT);
        allowed_total = LIMIT * (double)windows; /* the aligned windows the run touched */
    }
    }
    /* not starved: saturated, the key admits most of what it may */
    printf("    admitted %.0f%% of what the limit allows over the run\n", 100.0 * (double)admitted / allowed_total);
    CHECK((double)admitted >= 0.6 * allowed_total);
    free(all);
}

int main(void)
{
    redis_start(&redis);
    for (int i = 0; i < CLIENTS; i++) clients[i] = open_client(&redis, NULL);
    for (int a = 0; a < RL_ALGORITHM_COUNT; a++)
        if (!getenv("RL_BOUND_ONLY") || atoi(getenv("RL_BOUND_ONLY")) == a) bound((rl_algorithm)a);
    for (int i = 0; i < CLIENTS; i++) rl_client_close(clients[i]);
    redis_stop(&redis);
    return test_summary("lease_bound");
}
