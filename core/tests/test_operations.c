/* Several rates in one decision, acquire up to n, refunds, per-client
 * quotas and stored specs: exact under many threads, on the blocking and the
 * async paths. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define THREADS 16
/* The explicit clock stands still while real time passes, but Redis expires
 * a key on real time when its state would be fresh again (a bucket after one
 * token: period / limit). The rates below are per day and week, so that is
 * minutes, not the 200 ms that a thread stalled under valgrind outlived
 * (300/minute lost a token: remaining 181). */
#define T0 1700000000000LL
#define DAY 86400000LL
#define WEEK (7 * DAY)

static test_redis redis;
static rl_client *client;

typedef struct {
    rl_request req;
    int calls;
    long admitted, granted, errors;
} job;

static void *worker(void *arg)
{
    job *j = arg;
    rl_result r;
    for (int i = 0; i < j->calls; i++) {
        if (rl_execute(client, &j->req, 1, &r) != RL_OK) {
            j->errors++;
        } else if (r.allowed) {
            j->admitted++;
            j->granted += r.granted;
        }
    }
    return NULL;
}

/* THREADS threads x calls of req; totals in *proto */
static void run(job *proto)
{
    pthread_t threads[THREADS];
    job jobs[THREADS];
    for (int i = 0; i < THREADS; i++) {
        jobs[i] = *proto;
        pthread_create(&threads[i], NULL, worker, &jobs[i]);
    }
    proto->admitted = proto->granted = proto->errors = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
        proto->admitted += jobs[i].admitted;
        proto->granted += jobs[i].granted;
        proto->errors += jobs[i].errors;
    }
}

/* 300 per day and 120 per week at one instant: exactly 120 pass, and the
 * first rate consumed exactly those (all or nothing). */
static void two_rates_under_load(rl_algorithm a)
{
    rl_spec both = {.algorithm = a, .limit = 300, .period_ms = DAY, .more_count = 1,
                    .more = {{.limit = 120, .period_ms = WEEK}}};
    job j = {.req = {.name = "multi", .id = rl_algorithm_name(a), .spec = both, .permits = 1, .now_ms = T0},
             .calls = 20};
    run(&j);
    CHECK_EQ(j.errors, 0);
    CHECK_EQ(j.admitted, 120);
    /* the first rate alone is the same key: it holds 120, not more */
    rl_spec first = {.algorithm = a, .limit = 300, .period_ms = DAY};
    rl_request peek = {.name = "multi", .id = rl_algorithm_name(a), .spec = first, .permits = 1, .op = RL_OP_PEEK,
                       .now_ms = T0};
    rl_result r;
    CHECK_OK(rl_execute(client, &peek, 1, &r));
    CHECK_EQ(r.remaining, 180);
    CHECK_OK(rl_execute(client, &j.req, 1, &r));
    CHECK_EQ(r.allowed, 0);
    CHECK_EQ(r.rate_index, 1);
    CHECK_EQ(r.limit, 120);
}

/* Acquire up to 7 from 16 threads: the grants add up to the limit exactly. */
static void up_to_under_load(rl_algorithm a)
{
    rl_spec s = {.algorithm = a, .limit = 100, .period_ms = DAY};
    job j = {.req = {.name = "upto", .id = rl_algorithm_name(a), .spec = s, .permits = 7,
                     .op = RL_OP_ACQUIRE_UP_TO, .now_ms = T0},
             .calls = 5};
    run(&j);
    CHECK_EQ(j.errors, 0);
    CHECK_EQ(j.granted, 100);
}

static void per_client(void)
{
    rl_options o = RL_OPTIONS_INIT;
    rl_spec mine = {.algorithm = RL_FIXED_WINDOW, .limit = 2, .period_ms = 60000, .scope = RL_SCOPE_PER_CLIENT};
    rl_result r;
    rl_client *other = open_client(&redis, NULL);
    CHECK(strlen(rl_client_id(client)) == 32 && strcmp(rl_client_id(client), rl_client_id(other)));
    for (int i = 0; i < 2; i++) {
        CHECK_OK(rl_acquire(client, "pc", "alice", &mine, 1, &r));
        CHECK_EQ(r.allowed, 1);
        CHECK_OK(rl_acquire(other, "pc", "alice", &mine, 1, &r));
        CHECK_EQ(r.allowed, 1);
    }
    CHECK_OK(rl_acquire(client, "pc", "alice", &mine, 1, &r));
    CHECK_EQ(r.allowed, 0);
    rl_client_close(other);

    /* a chosen id keeps its quota across a reopen */
    o.client_id = "pod-7";
    other = open_client(&redis, &o);
    CHECK_OK(rl_acquire(other, "pc", "alice", &mine, 2, &r));
    CHECK_EQ(r.allowed, 1);
    rl_client_close(other);
    other = open_client(&redis, &o);
    CHECK(strcmp(rl_client_id(other), "pod-7") == 0);
    CHECK_OK(rl_acquire(other, "pc", "alice", &mine, 1, &r));
    CHECK_EQ(r.allowed, 0);
    rl_client_close(other);

    /* an id that would need escaping in keys is refused */
    rl_client *bad = NULL;
    const char *ids[] = {"", "has space", "brace{", "a:b", "x%P"};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        o.client_id = ids[i];
        CHECK_EQ(rl_client_open(&bad, redis.url, &o), RL_ERR_INVALID);
        CHECK(bad == NULL);
    }
}

static void stored_specs(void)
{
    rl_options o = RL_OPTIONS_INIT;
    rl_spec five = {.algorithm = RL_FIXED_WINDOW, .limit = 5, .period_ms = 60000};
    rl_spec ten = {.algorithm = RL_FIXED_WINDOW, .limit = 10, .period_ms = 60000};
    rl_result r;
    int found = 0, set = 0;
    o.config_refresh_ms = 200;
    rl_client *reader = open_client(&redis, &o);

    CHECK_EQ(rl_acquire(reader, "cfg", "u", NULL, 1, &r), RL_ERR_INVALID);
    CHECK(strstr(rl_errmsg(), "cfg") != NULL);
    /* a bad spec writes nothing */
    long long keys = redis_dbsize(&redis);
    rl_spec bad = {.algorithm = RL_GCRA, .limit = 0, .period_ms = 1000};
    CHECK_EQ(rl_config_set(client, "cfg", &bad), RL_ERR_INVALID);
    CHECK_EQ(redis_dbsize(&redis), keys);

    CHECK_OK(rl_config_set_if_absent(client, "cfg", &five, &set));
    CHECK_EQ(set, 1);
    CHECK_OK(rl_config_set_if_absent(client, "cfg", &ten, &set));
    CHECK_EQ(set, 0);
    /* the reader found nothing a moment ago: it asks again within its refresh */
    sleep_ms(o.config_refresh_ms + 10);
    for (int i = 0; i < 5; i++) CHECK_OK(rl_acquire(reader, "cfg", "u", NULL, 1, &r));
    CHECK_OK(rl_acquire(reader, "cfg", "u", NULL, 1, &r));
    CHECK_EQ(r.allowed, 0);

    /* another client raises the rate: once a refresh has passed, the reader's
     * next call obeys (a stall only lengthens the wait, never shortens it) */
    CHECK_OK(rl_config_set(client, "cfg", &ten));
    sleep_ms(o.config_refresh_ms + 10);
    CHECK_OK(rl_acquire(reader, "cfg", "u", NULL, 1, &r));
    CHECK_EQ(r.allowed, 1);
    CHECK_EQ(r.limit, 10);
    CHECK_EQ(r.remaining, 4); /* the 5 taken before the change still count */

    /* a limiter made with a spec that disagrees is refused, naming both */
    CHECK_EQ(rl_config_check(reader, "cfg", &five), RL_ERR_INVALID);
    CHECK(strstr(rl_errmsg(), "fixed_window 10/minute") && strstr(rl_errmsg(), "fixed_window 5/minute"));
    CHECK_OK(rl_config_check(client, "cfg", &ten));
    CHECK_OK(rl_config_check(client, "nothing-stored", &five));

    rl_spec got;
    CHECK_OK(rl_config_get(reader, "cfg", &got, &found));
    CHECK_EQ(found, 1);
    CHECK_EQ(got.limit, 10);

    /* something this library did not write is a protocol error, not a guess */
    redisContext *raw = redis_raw(&redis);
    freeReplyObject(redisCommand(raw, "HSET rl:config:junk algorithm gcra rates 10/x/0 initial_tokens 0 scope overall"));
    redisFree(raw);
    CHECK_EQ(rl_config_get(client, "junk", &got, &found), RL_ERR_PROTOCOL);

    int deleted = 0;
    CHECK_OK(rl_config_delete(client, "cfg", &deleted));
    CHECK_EQ(deleted, 1);
    rl_client_close(reader);
}

typedef struct {
    atomic_long done, allowed, granted;
} tally;

static void on_done(void *ctx, const rl_completion *c)
{
    tally *t = ctx;
    if (c->status == RL_OK && c->result.allowed) {
        atomic_fetch_add(&t->allowed, 1);
        atomic_fetch_add(&t->granted, c->result.granted);
    }
    atomic_fetch_add(&t->done, 1);
}

/* The async path: thousands in flight on one multi-rate key. */
static void async_two_rates(void)
{
    tally t = {0};
    rl_target target = {.fn = on_done, .ctx = &t};
    rl_spec both = {.algorithm = RL_GCRA, .limit = 500, .period_ms = DAY, .more_count = 1,
                    .more = {{.limit = 250, .period_ms = WEEK}}};
    rl_request req = {.name = "async-multi", .id = "x", .spec = both, .permits = 2, .op = RL_OP_ACQUIRE_UP_TO,
                      .now_ms = T0};
    for (int i = 0; i < 2000; i++) CHECK_OK(rl_submit(client, &req, (uint64_t)i, &target));
    while (atomic_load(&t.done) < 2000) sleep_ms(5);
    CHECK_EQ(atomic_load(&t.granted), 250);
}

typedef struct {
    atomic_int done;
    rl_completion c;
} one;

static void on_one(void *ctx, const rl_completion *c)
{
    one *o = ctx;
    o->c = *c;
    atomic_store(&o->done, 1);
}

/* Redis down and no stored spec cached: the policy decides, on both paths. */
static void stored_spec_in_an_outage(void)
{
    rl_options o = RL_OPTIONS_INIT;
    rl_client *down = NULL;
    rl_result r;
    one done = {0};
    rl_target target = {.fn = on_one, .ctx = &done};
    rl_request req = {.name = "cfg-down", .id = "u", .permits = 1, .stored_spec = 1};
    o.on_error = RL_ON_ERROR_ALLOW;
    o.connect_timeout_ms = 200;
    CHECK_OK(rl_client_open(&down, "redis://127.0.0.1:1", &o));
    CHECK_OK(rl_acquire(down, "cfg-down", "u", NULL, 1, &r));
    CHECK(r.allowed && r.fallback);
    CHECK_OK(rl_submit(down, &req, 7, &target));
    while (!atomic_load(&done.done)) sleep_ms(5);
    CHECK_EQ(done.c.status, RL_OK);
    CHECK_EQ(done.c.tag, 7);
    CHECK(done.c.result.allowed && done.c.result.fallback);
    CHECK(done.c.error[0] != '\0');
    rl_client_close(down);
}

static void validation(void)
{
    rl_result r;
    rl_spec s = {.algorithm = RL_GCRA, .limit = 10, .period_ms = 1000, .more_count = 1, .more = {{.limit = 3, .period_ms = 100}}};
    long long keys = redis_dbsize(&redis);
    CHECK_EQ(rl_acquire(client, "v", "u", &s, 4, &r), RL_ERR_INVALID); /* the second rate holds 3 */
    CHECK(strstr(rl_errmsg(), "(3)") != NULL);
    s.more_count = RL_MAX_RATES;
    CHECK_EQ(rl_acquire(client, "v", "u", &s, 1, &r), RL_ERR_INVALID);
    s.more_count = 1;
    s.more[0].limit = 0;
    CHECK_EQ(rl_acquire(client, "v", "u", &s, 1, &r), RL_ERR_INVALID);
    CHECK(strstr(rl_errmsg(), "rate 2") != NULL);
    rl_spec fw = {.algorithm = RL_FIXED_WINDOW, .limit = 10, .period_ms = 1000, .initial_tokens = 3};
    CHECK_EQ(rl_acquire(client, "v", "u", &fw, 1, &r), RL_ERR_INVALID);
    rl_spec scoped = {.algorithm = RL_GCRA, .limit = 10, .period_ms = 1000, .scope = (rl_scope)5};
    CHECK_EQ(rl_acquire(client, "v", "u", &scoped, 1, &r), RL_ERR_INVALID);
    rl_request refund = {.name = "v", .id = "u", .spec = {.algorithm = RL_GCRA, .limit = 10, .period_ms = 1000},
                         .permits = 11, .op = RL_OP_REFUND};
    CHECK_EQ(rl_execute(client, &refund, 1, &r), RL_ERR_INVALID);
    refund.op = (rl_op)9;
    CHECK_EQ(rl_execute(client, &refund, 1, &r), RL_ERR_INVALID);
    CHECK_EQ(redis_dbsize(&redis), keys);
}

/* Every key a refund leaves behind still expires, for every algorithm (a
 * sliding_log refund of part of its only call once left it without a TTL). */
static void refunds_keep_ttls(void)
{
    redisContext *raw = redis_raw(&redis);
    for (int a = 0; a < RL_ALGORITHM_COUNT; a++) {
        rl_spec s = {.algorithm = (rl_algorithm)a, .limit = 10, .period_ms = 2000};
        rl_request req = {.name = "refund-ttl", .id = "u", .spec = s, .permits = 3, .op = RL_OP_ACQUIRE};
        rl_result r;
        char key[256];
        CHECK_OK(rl_execute(client, &req, 1, &r));
        req.permits = 1;
        req.op = RL_OP_REFUND;
        CHECK_OK(rl_execute(client, &req, 1, &r));
        CHECK(rl_key(client, "refund-ttl", "u", (rl_algorithm)a, key, sizeof key) > 0);
        long long ttl = redis_int(raw, "PTTL %s", key);
        if (ttl <= 0) fprintf(stderr, "%s: PTTL %lld after a refund\n", rl_algorithm_name((rl_algorithm)a), ttl);
        CHECK(ttl > 0 || ttl == -2); /* expiring, or gone */
    }
    redisFree(raw);
}

int main(void)
{
    rl_options o = RL_OPTIONS_INIT;
    o.command_timeout_ms = 5000;
    redis_start(&redis);
    client = open_client(&redis, &o);
    for (int a = 0; a < RL_ALGORITHM_COUNT; a++) two_rates_under_load((rl_algorithm)a);
    for (int a = 0; a < RL_ALGORITHM_COUNT; a++) up_to_under_load((rl_algorithm)a);
    per_client();
    stored_specs();
    async_two_rates();
    stored_spec_in_an_outage();
    validation();
    refunds_keep_ttls();
    rl_client_close(client);
    redis_stop(&redis);
    return test_summary("operations");
}
