/* Every algorithm against a real redis-server, with explicit clocks so the
 * expected numbers are exact (docs/semantics.md works the same examples). */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static test_redis redis;
static rl_client *client;

#define T0 1700000000000LL

static rl_result run(const char *id, rl_spec spec, int64_t permits, rl_op op, int64_t max_wait, int64_t now)
{
    rl_request req = {.name = "test", .id = id, .spec = spec, .permits = permits, .op = op, .max_wait_ms = max_wait, .now_ms = now};
    rl_result res;
    memset(&res, 0xff, sizeof res);
    int rc = rl_execute(client, &req, 1, &res);
    if (rc) {
        fprintf(stderr, "rl_execute(%s @%lld): %s\n", id, (long long)(now - T0), rl_errmsg());
        test_failures++;
    }
    return res;
}

static long long pttl(const char *key)
{
    redisContext *c = redis_raw(&redis);
    long long v = redis_int(c, "PTTL %s", key);
    redisFree(c);
    return v;
}

static void test_fixed_window(void)
{
    rl_spec s = {.algorithm = RL_FIXED_WINDOW, .limit = 3, .period_ms = 1000, .burst = 0};
    EXPECT(run("fw", s, 1, RL_OP_ACQUIRE, 0, T0), 1, 2, -1, 1000);
    CHECK(pttl("rl:{test:fw}:fixed_window") > 900);
    EXPECT(run("fw", s, 2, RL_OP_ACQUIRE, 0, T0 + 100), 1, 0, -1, 900);
    EXPECT(run("fw", s, 1, RL_OP_ACQUIRE, 0, T0 + 200), 0, 0, 800, 800);
    EXPECT(run("fw", s, 1, RL_OP_PEEK, 0, T0 + 999), 0, 0, 1, 1);
    /* a new window opens at the first hit after the old one closed */
    EXPECT(run("fw", s, 1, RL_OP_ACQUIRE, 0, T0 + 1000), 1, 2, -1, 1000);
    EXPECT(run("fw", s, 2, RL_OP_ACQUIRE, 0, T0 + 1999), 1, 0, -1, 1);
    /* the boundary burst fixed windows allow: 3 more right after */
    EXPECT(run("fw", s, 3, RL_OP_ACQUIRE, 0, T0 + 2000), 1, 0, -1, 1000);
    EXPECT(run("fw", s, 1, RL_OP_PEEK, 0, T0 + 2001), 0, 0, 999, 999);
    EXPECT(run("fw-fresh", s, 1, RL_OP_PEEK, 0, T0), 1, 3, -1, 0);
}

static void test_sliding_log(void)
{
    rl_spec s = {.algorithm = RL_SLIDING_LOG, .limit = 3, .period_ms = 1000, .burst = 0};
    EXPECT(run("sl", s, 1, RL_OP_ACQUIRE, 0, T0), 1, 2, -1, 1000);
    EXPECT(run("sl", s, 1, RL_OP_ACQUIRE, 0, T0 + 100), 1, 1, -1, 1000);
    EXPECT(run("sl", s, 1, RL_OP_ACQUIRE, 0, T0 + 200), 1, 0, -1, 1000);
    EXPECT(run("sl", s, 1, RL_OP_ACQUIRE, 0, T0 + 300), 0, 0, 700, 900);
    /* exact at the boundary: the permit from T0 stops counting at T0+1000 */
    EXPECT(run("sl", s, 1, RL_OP_ACQUIRE, 0, T0 + 999), 0, 0, 1, 201);
    EXPECT(run("sl", s, 1, RL_OP_ACQUIRE, 0, T0 + 1000), 1, 0, -1, 1000);
    EXPECT(run("sl", s, 2, RL_OP_ACQUIRE, 0, T0 + 1000), 0, 0, 200, 1000);
    EXPECT(run("sl", s, 2, RL_OP_PEEK, 0, T0 + 1200), 1, 2, -1, 800);
    /* one member per call, "<ms>:<running total>:<permits>:<edge>", whatever its permits */
    EXPECT(run("sl", s, 2, RL_OP_ACQUIRE, 0, T0 + 1200), 1, 0, -1, 1000);
    redisContext *c = redis_raw(&redis);
    /* T0 was deleted once an admitted call's edge (T0 + 1000 - 1000) covered it */
    CHECK_EQ(redis_int(c, "ZCARD rl:{test:sl}:sliding_log"), 4);
    redisReply *r = redisCommand(c, "ZRANGE rl:{test:sl}:sliding_log -1 -1");
    CHECK(r && r->elements == 1 && !strcmp(r->element[0]->str, "1700000001200:0000000000000006:2:1700000000200"));
    freeReplyObject(r);
    redisFree(c);
}

static void test_sliding_window(void)
{
    rl_spec s = {.algorithm = RL_SLIDING_WINDOW, .limit = 10, .period_ms = 1000, .burst = 0};
    EXPECT(run("sw", s, 5, RL_OP_ACQUIRE, 0, T0), 1, 5, -1, 2000);
    EXPECT(run("sw", s, 5, RL_OP_ACQUIRE, 0, T0 + 500), 1, 0, -1, 1500);
    EXPECT(run("sw", s, 1, RL_OP_ACQUIRE, 0, T0 + 600), 0, 0, 500, 1400);
    /* next window: the previous 10 weigh 90%, so exactly one more fits */
    EXPECT(run("sw", s, 1, RL_OP_ACQUIRE, 0, T0 + 1100), 1, 0, -1, 1900);
    EXPECT(run("sw", s, 1, RL_OP_ACQUIRE, 0, T0 + 1200), 1, 0, -1, 1800);
    EXPECT(run("sw", s, 1, RL_OP_ACQUIRE, 0, T0 + 1250), 0, 0, 50, 1750);
    EXPECT(run("sw", s, 1, RL_OP_ACQUIRE, 0, T0 + 1300), 1, 0, -1, 1700);
    EXPECT(run("sw", s, 10, RL_OP_ACQUIRE, 0, T0 + 3000), 1, 0, -1, 2000);
    /* a request that cannot fit before the next window waits for its start */
    rl_spec big = {.algorithm = RL_SLIDING_WINDOW, .limit = 10000, .period_ms = 1000, .burst = 0};
    EXPECT(run("sw-next", big, 10000, RL_OP_ACQUIRE, 0, T0), 1, 0, -1, 2000);
    EXPECT(run("sw-next", big, 1, RL_OP_ACQUIRE, 0, T0 + 1001), 1, 9, -1, 1999);
    EXPECT(run("sw-next", big, 9995, RL_OP_ACQUIRE, 0, T0 + 1001), 0, 9, 999, 1999);
    EXPECT(run("sw-next", big, 9995, RL_OP_PEEK, 0, T0 + 2000), 1, 9999, -1, 1000);
    CHECK(pttl("rl:{test:sw}:sliding_window") > 1900);
}

static void test_token_bucket(void)
{
    rl_spec s = {.algorithm = RL_TOKEN_BUCKET, .limit = 10, .period_ms = 1000, .burst = 5};
    EXPECT(run("tb", s, 5, RL_OP_ACQUIRE, 0, T0), 1, 0, -1, 500);
    EXPECT(run("tb", s, 1, RL_OP_ACQUIRE, 0, T0 + 50), 0, 0, 50, 450);
    EXPECT(run("tb", s, 1, RL_OP_ACQUIRE, 0, T0 + 100), 1, 0, -1, 500);
    EXPECT(run("tb", s, 1, RL_OP_PEEK, 0, T0 + 1000), 1, 5, -1, 0);
    EXPECT(run("tb", s, 3, RL_OP_ACQUIRE, 0, T0 + 1000), 1, 2, -1, 300);
    rl_result r = run("tb", s, 5, RL_OP_RESERVE, 1000, T0 + 1000);
    EXPECT(r, 1, 0, -1, 800);
    CHECK_EQ(r.wait_ms, 300);
    EXPECT(run("tb", s, 1, RL_OP_ACQUIRE, 0, T0 + 1000), 0, 0, 400, 800);
    EXPECT(run("tb", s, 5, RL_OP_RESERVE, 100, T0 + 1000), 0, 0, 700, 800);
    CHECK_EQ(run("tb", s, 1, RL_OP_ACQUIRE, 0, T0 + 1000).limit, 5);
    /* burst defaults to limit */
    rl_spec d = {.algorithm = RL_TOKEN_BUCKET, .limit = 4, .period_ms = 1000, .burst = 0};
    EXPECT(run("tb-default", d, 4, RL_OP_ACQUIRE, 0, T0), 1, 0, -1, 1000);
    /* 1/3 s refill is exact: 3 tokens after 1000 ms, not 2.999 */
    rl_spec third = {.algorithm = RL_TOKEN_BUCKET, .limit = 3, .period_ms = 1000, .burst = 3};
    EXPECT(run("tb-third", third, 3, RL_OP_ACQUIRE, 0, T0), 1, 0, -1, 1000);
    EXPECT(run("tb-third", third, 1, RL_OP_ACQUIRE, 0, T0 + 333), 0, 0, 1, 667);
    EXPECT(run("tb-third", third, 1, RL_OP_ACQUIRE, 0, T0 + 334), 1, 0, -1, 1000);
    EXPECT(run("tb-third", third, 2, RL_OP_ACQUIRE, 0, T0 + 1000), 1, 0, -1, 1000);
}

static void test_leaky_bucket(void)
{
    rl_spec s = {.algorithm = RL_LEAKY_BUCKET, .limit = 4, .period_ms = 2000, .burst = 0};
    EXPECT(run("lb", s, 1, RL_OP_ACQUIRE, 0, T0), 1, 3, -1, 500);
    EXPECT(run("lb", s, 3, RL_OP_ACQUIRE, 0, T0), 1, 0, -1, 2000);
    EXPECT(run("lb", s, 1, RL_OP_ACQUIRE, 0, T0 + 100), 0, 0, 400, 1900);
    EXPECT(run("lb", s, 1, RL_OP_ACQUIRE, 0, T0 + 500), 1, 0, -1, 2000);
    CHECK(pttl("rl:{test:lb}:leaky_bucket") > 1900);
    /* reserve: a FIFO queue draining one permit per 500 ms */
    int64_t waits[4] = {0, 500, 1000, 1500};
    for (int i = 0; i < 4; i++) {
        rl_result r = run("lbq", s, 1, RL_OP_RESERVE, 10000, T0);
        CHECK_EQ(r.allowed, 1);
        CHECK_EQ(r.wait_ms, waits[i]);
    }
    EXPECT(run("lbq", s, 1, RL_OP_RESERVE, 10000, T0), 0, 0, 500, 2000);
    EXPECT(run("lbq", s, 1, RL_OP_RESERVE, 10000, T0 + 500), 1, 0, -1, 2000);
    /* a wait longer than max_wait is refused without booking */
    run("lbw", s, 1, RL_OP_RESERVE, 700, T0);
    run("lbw", s, 1, RL_OP_RESERVE, 700, T0);
    EXPECT(run("lbw", s, 1, RL_OP_RESERVE, 700, T0), 0, 2, 300, 1000);
}

static void test_gcra(void)
{
    /* go-redis redis_rate: PerSecond(10) */
    rl_spec s = {.algorithm = RL_GCRA, .limit = 10, .period_ms = 1000, .burst = 10};
    EXPECT(run("g", s, 1, RL_OP_ACQUIRE, 0, T0), 1, 9, -1, 100);
    EXPECT(run("g", s, 2, RL_OP_ACQUIRE, 0, T0), 1, 7, -1, 300);
    EXPECT(run("g", s, 7, RL_OP_ACQUIRE, 0, T0), 1, 0, -1, 1000);
    EXPECT(run("g", s, 1, RL_OP_ACQUIRE, 0, T0), 0, 0, 100, 1000);
    EXPECT(run("g", s, 1, RL_OP_ACQUIRE, 0, T0 + 100), 1, 0, -1, 1000);
    rl_result r = run("g", s, 1, RL_OP_RESERVE, 500, T0 + 100);
    EXPECT(r, 1, 0, -1, 1100);
    CHECK_EQ(r.wait_ms, 100);
    /* redis-cell README: CL.THROTTLE user123 15 30 60 */
    rl_spec cell = {.algorithm = RL_GCRA, .limit = 30, .period_ms = 60000, .burst = 16};
    r = run("user123", cell, 1, RL_OP_ACQUIRE, 0, T0);
    EXPECT(r, 1, 15, -1, 2000);
    CHECK_EQ(r.limit, 16);
    char key[128];
    CHECK(rl_key(client, "test", "user123", RL_GCRA, key, sizeof key) > 0);
    CHECK(!strcmp(key, "rl:{test:user123}:gcra"));
    CHECK(pttl(key) > 1900 && pttl(key) <= 2000);
}

static void test_peek_writes_nothing(void)
{
    for (int a = 0; a < RL_ALGORITHM_COUNT; a++) {
        rl_spec s = {.algorithm = (rl_algorithm)a, .limit = 5, .period_ms = 1000, .burst = 0};
        redis_flush(&redis);
        rl_result r = run("peek", s, 2, RL_OP_PEEK, 0, 0);
        CHECK_EQ(r.allowed, 1);
        CHECK_EQ(r.remaining, 5);
        CHECK_EQ(redis_dbsize(&redis), 0);
        CHECK_OK(rl_acquire(client, "test", "peek", &s, 2, &r));
        CHECK_EQ(r.remaining, 3);
        redisContext *c = redis_raw(&redis);
        redisReply *before = redisCommand(c, "DUMP rl:{test:peek}:%s", rl_algorithm_name(s.algorithm));
        CHECK_OK(rl_peek(client, "test", "peek", &s, 5, &r));
        CHECK_EQ(r.allowed, 0);
        redisReply *after = redisCommand(c, "DUMP rl:{test:peek}:%s", rl_algorithm_name(s.algorithm));
        CHECK(before && after && before->len == after->len && !memcmp(before->str, after->str, before->len));
        freeReplyObject(before);
        freeReplyObject(after);
        /* reset deletes the state: full again */
        CHECK_OK(rl_reset(client, "test", "peek", &s));
        CHECK_EQ(redis_dbsize(&redis), 0);
        CHECK_OK(rl_acquire(client, "test", "peek", &s, 5, &r));
        CHECK_EQ(r.allowed, 1);
        redisFree(c);
    }
}

static void test_server_time_and_expiry(void)
{
    for (int a = 0; a < RL_ALGORITHM_COUNT; a++) {
        rl_spec s = {.algorithm = (rl_algorithm)a, .limit = 3, .period_ms = 300, .burst = 0};
        rl_result r;
        redis_flush(&redis);
        int admitted = 0;
        for (int i = 0; i < 5; i++) {
            CHECK_OK(rl_acquire(client, "exp", "x", &s, 1, &r));
            admitted += r.allowed;
        }
        CHECK_EQ(admitted, 3);
        CHECK(r.retry_after_ms > 0 && r.retry_after_ms <= (a == RL_SLIDING_WINDOW ? 600 : 300));
        CHECK_EQ(redis_dbsize(&redis), 1);
        /* every key carries a TTL: an idle entity leaves nothing behind */
        sleep_ms(a == RL_SLIDING_WINDOW ? 650 : 350);
        CHECK_EQ(redis_live_keys(&redis), 0);
        CHECK_OK(rl_acquire(client, "exp", "x", &s, 3, &r));
        CHECK_EQ(r.allowed, 1);
    }
}

static void test_script_flush(void)
{
    rl_spec s = {.algorithm = RL_GCRA, .limit = 5, .period_ms = 1000, .burst = 0};
    rl_result r;
    redis_flush(&redis);
    CHECK_OK(rl_acquire(client, "flush", "x", &s, 1, &r));
    redisContext *c = redis_raw(&redis);
    freeReplyObject(redisCommand(c, "SCRIPT FLUSH"));
    CHECK_OK(rl_acquire(client, "flush", "x", &s, 1, &r));
    CHECK_EQ(r.remaining, 3);
    freeReplyObject(redisCommand(c, "SCRIPT FLUSH"));
    /* a batch after a flush: every call runs exactly once */
    rl_request reqs[3] = {{.name = "flush", .id = "x", .spec = s, .permits = 1, .op = RL_OP_ACQUIRE, .max_wait_ms = 0, .now_ms = 0},
                          {.name = "flush", .id = "y", .spec = s, .permits = 1, .op = RL_OP_ACQUIRE, .max_wait_ms = 0, .now_ms = 0},
                          {.name = "flush", .id = "x", .spec = s, .permits = 1, .op = RL_OP_ACQUIRE, .max_wait_ms = 0, .now_ms = 0}};
    rl_result rs[3];
    CHECK_OK(rl_execute(client, reqs, 3, rs));
    CHECK_EQ(rs[0].remaining + rs[2].remaining, 2 + 1);
    CHECK_EQ(rs[1].remaining, 4);
    redisFree(c);
}

static void test_batch(void)
{
    rl_spec fw = {.algorithm = RL_FIXED_WINDOW, .limit = 2, .period_ms = 1000, .burst = 0}, tb = {.algorithm = RL_TOKEN_BUCKET, .limit = 3, .period_ms = 1000, .burst = 0};
    rl_request reqs[4] = {{.name = "b", .id = "u1", .spec = fw, .permits = 1, .op = RL_OP_ACQUIRE, .max_wait_ms = 0, .now_ms = T0},
                          {.name = "b", .id = "u2", .spec = tb, .permits = 3, .op = RL_OP_ACQUIRE, .max_wait_ms = 0, .now_ms = T0},
                          {.name = "b", .id = "u1", .spec = fw, .permits = 2, .op = RL_OP_ACQUIRE, .max_wait_ms = 0, .now_ms = T0},
                          {.name = "b", .id = "u2", .spec = tb, .permits = 1, .op = RL_OP_PEEK, .max_wait_ms = 0, .now_ms = T0}};
    rl_result rs[4];
    redis_flush(&redis);
    CHECK_OK(rl_execute(client, reqs, 4, rs));
    CHECK_EQ(rs[0].allowed, 1);
    CHECK_EQ(rs[1].allowed, 1);
    CHECK_EQ(rs[2].allowed, 0);
    CHECK_EQ(rs[3].allowed, 0);
    CHECK_EQ(rs[3].retry_after_ms, 334);
}

/* A request Redis refuses (its key holds another type) fails alone: the
 * others' decisions, consumed in Redis, are reported, under every policy. */
static void test_batch_outcomes(void)
{
    rl_spec fw = {.algorithm = RL_FIXED_WINDOW, .limit = 5, .period_ms = 60000, .burst = 0};
    rl_request reqs[3] = {{.name = "o", .id = "alice", .spec = fw, .permits = 2, .op = RL_OP_ACQUIRE, .max_wait_ms = 0, .now_ms = T0},
                          {.name = "o", .id = "victim", .spec = fw, .permits = 1, .op = RL_OP_ACQUIRE, .max_wait_ms = 0, .now_ms = T0},
                          {.name = "o", .id = "carol", .spec = fw, .permits = 5, .op = RL_OP_ACQUIRE, .max_wait_ms = 0, .now_ms = T0}};
    rl_result rs[3];
    rl_outcome os[3];
    char key[256];
    redis_flush(&redis);
    CHECK(rl_key(client, "o", "victim", RL_FIXED_WINDOW, key, sizeof key) > 0);
    redisContext *raw = redis_raw(&redis);
    freeReplyObject(redisCommand(raw, "LPUSH %s x", key));

    CHECK_EQ(rl_execute_each(client, reqs, 3, rs, os), RL_ERR_REDIS);
    CHECK(strstr(rl_errmsg(), "request 1: ") == rl_errmsg() && strstr(rl_errmsg(), "WRONGTYPE"));
    CHECK_EQ(os[0].status, RL_OK);
    CHECK_EQ(os[0].error[0], '\0');
    EXPECT(rs[0], 1, 3, -1, 60000);
    CHECK_EQ(rs[0].fallback, 0);
    CHECK_EQ(os[1].status, RL_ERR_REDIS);
    CHECK(strstr(os[1].error, "WRONGTYPE") != NULL);
    CHECK_EQ(os[2].status, RL_OK);
    EXPECT(rs[2], 1, 0, -1, 60000);
    /* rl_execute: the same status and message, and the results Redis decided */
    memset(rs, 0, sizeof rs);
    CHECK_EQ(rl_execute(client, reqs, 3, rs), RL_ERR_REDIS);
    CHECK(strstr(rl_errmsg(), "request 1: ") == rl_errmsg());
    EXPECT(rs[0], 1, 1, -1, 60000);
    EXPECT(rs[2], 0, 0, 60000, 60000);
    CHECK_EQ(redis_int(raw, "HINCRBY rl:{o:alice}:fixed_window count 0"), 4);

    /* the policy decides for requests Redis could not be asked, never for
     * its own errors: WRONGTYPE stays an error under ALLOW */
    rl_options o = RL_OPTIONS_INIT;
    o.on_error = RL_ON_ERROR_ALLOW;
    rl_client *open = open_client(&redis, &o);
    reqs[0].id = "dave";
    CHECK_EQ(rl_execute_each(open, reqs, 3, rs, os), RL_ERR_REDIS);
    CHECK_EQ(os[0].status, RL_OK);
    CHECK_EQ(rs[0].allowed, 1);
    CHECK_EQ(rs[0].fallback, 0);
    CHECK_EQ(os[1].status, RL_ERR_REDIS);
    rl_client_close(open);
    reqs[0].id = "alice";

    /* an invalid request: nothing sent, every outcome says why */
    reqs[2].permits = 0;
    CHECK_EQ(rl_execute_each(client, reqs, 3, rs, os), RL_ERR_INVALID);
    CHECK(strstr(rl_errmsg(), "request 2: permits") == rl_errmsg());
    CHECK_EQ(os[0].status, RL_ERR_INVALID);
    CHECK(strcmp(os[0].error, "not sent: request 2 is invalid") == 0);
    CHECK_EQ(os[1].status, RL_ERR_INVALID);
    CHECK(strstr(os[2].error, "permits") == os[2].error);
    CHECK_EQ(redis_int(raw, "HINCRBY rl:{o:alice}:fixed_window count 0"), 4);
    /* a stored spec that is not there is invalid input too */
    reqs[2].permits = 1;
    reqs[2].stored_spec = 1;
    reqs[2].name = "nothing-stored";
    CHECK_EQ(rl_execute_each(client, reqs, 3, rs, os), RL_ERR_INVALID);
    CHECK_EQ(os[0].status, RL_ERR_INVALID);
    CHECK_EQ(redis_int(raw, "HINCRBY rl:{o:alice}:fixed_window count 0"), 4);

    /* every request fine: RL_OK and every outcome RL_OK, as before */
    freeReplyObject(redisCommand(raw, "DEL %s", key));
    reqs[2] = reqs[1];
    CHECK_OK(rl_execute_each(client, reqs, 3, rs, os));
    for (int i = 0; i < 3; i++) CHECK_EQ(os[i].status, RL_OK);
    EXPECT(rs[0], 0, 1, 60000, 60000);
    EXPECT(rs[1], 1, 4, -1, 60000);
    EXPECT(rs[2], 1, 3, -1, 60000);
    CHECK_OK(rl_execute_each(client, reqs, 0, NULL, NULL));
    /* metrics: each request counted by its own outcome, invalid batches not at all */
    rl_limiter_stats stats[64];
    size_t count = 0;
    CHECK_OK(rl_client_stats(client, stats, 64, &count));
    int found = 0;
    for (size_t i = 0; i < count && i < 64; i++) {
        if (strcmp(stats[i].name, "o")) continue;
        found = 1;
        CHECK_EQ(stats[i].allowed, 5);
        CHECK_EQ(stats[i].denied, 2);
        CHECK_EQ(stats[i].errors, 2);
        CHECK_EQ(stats[i].fallback, 0);
    }
    CHECK(found);
    redisFree(raw);
}

static void test_invalid_input_writes_nothing(void)
{
    rl_spec good = {.algorithm = RL_TOKEN_BUCKET, .limit = 10, .period_ms = 1000, .burst = 0};
    rl_result r;
    struct {
        rl_request req;
        const char *mentions;
    } cases[] = {
        {{.name = "n", .id = "i", .spec = {.algorithm = RL_TOKEN_BUCKET, .limit = 0, .period_ms = 1000, .burst = 0}, .permits = 1, .op = 0, .max_wait_ms = 0, .now_ms = 0}, "limit"},
        {{.name = "n", .id = "i", .spec = {.algorithm = RL_TOKEN_BUCKET, .limit = -5, .period_ms = 1000, .burst = 0}, .permits = 1, .op = 0, .max_wait_ms = 0, .now_ms = 0}, "limit"},
        {{.name = "n", .id = "i", .spec = {.algorithm = RL_GCRA, .limit = 10, .period_ms = 0, .burst = 0}, .permits = 1, .op = 0, .max_wait_ms = 0, .now_ms = 0}, "period_ms"},
        {{.name = "n", .id = "i", .spec = {.algorithm = RL_GCRA, .limit = 10, .period_ms = -1, .burst = 0}, .permits = 1, .op = 0, .max_wait_ms = 0, .now_ms = 0}, "period_ms"},
        {{.name = "n", .id = "i", .spec = {.algorithm = RL_GCRA, .limit = 10, .period_ms = 1000, .burst = -2}, .permits = 1, .op = 0, .max_wait_ms = 0, .now_ms = 0}, "burst"},
        {{.name = "n", .id = "i", .spec = {.algorithm = RL_FIXED_WINDOW, .limit = 10, .period_ms = 1000, .burst = 20}, .permits = 1, .op = 0, .max_wait_ms = 0, .now_ms = 0}, "burst"},
        {{.name = "n", .id = "i", .spec = good, .permits = 0, .op = 0, .max_wait_ms = 0, .now_ms = 0}, "permits"},
        {{.name = "n", .id = "i", .spec = good, .permits = -1, .op = 0, .max_wait_ms = 0, .now_ms = 0}, "permits"},
        {{.name = "n", .id = "i", .spec = good, .permits = 11, .op = 0, .max_wait_ms = 0, .now_ms = 0}, "exceed"},
        {{.name = "n", .id = "i", .spec = {.algorithm = RL_GCRA, .limit = 10, .period_ms = 1000, .burst = 20}, .permits = 21, .op = 0, .max_wait_ms = 0, .now_ms = 0}, "exceed"},
        {{.name = "", .id = "i", .spec = good, .permits = 1, .op = 0, .max_wait_ms = 0, .now_ms = 0}, "name"},
        {{.name = "n", .id = "", .spec = good, .permits = 1, .op = 0, .max_wait_ms = 0, .now_ms = 0}, "id"},
        {{.name = NULL, .id = "i", .spec = good, .permits = 1, .op = 0, .max_wait_ms = 0, .now_ms = 0}, "name"},
        {{.name = "n", .id = "i", .spec = {.algorithm = (rl_algorithm)9, .limit = 10, .period_ms = 1000, .burst = 0}, .permits = 1, .op = 0, .max_wait_ms = 0, .now_ms = 0}, "algorithm"},
        {{.name = "n", .id = "i", .spec = {.algorithm = RL_FIXED_WINDOW, .limit = 10, .period_ms = 1000, .burst = 0}, .permits = 1, .op = RL_OP_RESERVE, .max_wait_ms = 10, .now_ms = 0}, "reserve"},
        {{.name = "n", .id = "i", .spec = good, .permits = 1, .op = RL_OP_ACQUIRE, .max_wait_ms = 10, .now_ms = 0}, "max_wait"},
        {{.name = "n", .id = "i", .spec = good, .permits = 1, .op = (rl_op)7, .max_wait_ms = 0, .now_ms = 0}, "operation"},
        {{.name = "n", .id = "i", .spec = good, .permits = 1, .op = 0, .max_wait_ms = 0, .now_ms = -5}, "now_ms"},
        {{.name = "n", .id = "i", .spec = {.algorithm = RL_TOKEN_BUCKET, .limit = INT64_MAX, .period_ms = 1000, .burst = 0}, .permits = 1, .op = 0, .max_wait_ms = 0, .now_ms = 0}, "limit"},
        {{.name = "n", .id = "i", .spec = {.algorithm = RL_SLIDING_WINDOW, .limit = (int64_t)1 << 50, .period_ms = (int64_t)1 << 20, .burst = 0}, .permits = 1, .op = 0, .max_wait_ms = 0, .now_ms = 0}, "too large"},
        {{.name = "n", .id = "i", .spec = {.algorithm = RL_SLIDING_LOG, .limit = 1000000000000001LL, .period_ms = 1000, .burst = 0}, .permits = 1, .op = 0, .max_wait_ms = 0, .now_ms = 0}, "sliding_log"},
        {{.name = "n", .id = "i", .spec = {.algorithm = RL_GCRA, .limit = 10, .period_ms = INT64_MAX, .burst = 0}, .permits = 1, .op = 0, .max_wait_ms = 0, .now_ms = 0}, "period_ms"},
    };
    redis_flush(&redis);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = rl_execute(client, &cases[i].req, 1, &r);
        CHECK_EQ(rc, RL_ERR_INVALID);
        if (!strstr(rl_errmsg(), cases[i].mentions)) {
            fprintf(stderr, "case %zu: message '%s' does not mention '%s'\n", i, rl_errmsg(), cases[i].mentions);
            test_failures++;
        }
    }
    rl_spec bad_spec = {.algorithm = RL_FIXED_WINDOW, .limit = 10, .period_ms = 1000, .burst = 20};
    CHECK_EQ(rl_spec_validate(&bad_spec), RL_ERR_INVALID);
    CHECK(strstr(rl_errmsg(), "burst") != NULL);
    CHECK_OK(rl_spec_validate(&good));
    CHECK_EQ(rl_spec_validate(NULL), RL_ERR_INVALID);
    /* one bad request in a batch: nothing at all is sent */
    rl_request batch[2] = {{.name = "n", .id = "ok", .spec = good, .permits = 1, .op = 0, .max_wait_ms = 0, .now_ms = 0}, {.name = "n", .id = "bad", .spec = good, .permits = 0, .op = 0, .max_wait_ms = 0, .now_ms = 0}};
    rl_result rs[2];
    CHECK_EQ(rl_execute(client, batch, 2, rs), RL_ERR_INVALID);
    CHECK(strstr(rl_errmsg(), "request 1") != NULL);
    CHECK_EQ(rl_acquire(client, "n", "i", NULL, 1, &r), RL_ERR_INVALID);
    CHECK_EQ(rl_reset(client, "", "i", &good), RL_ERR_INVALID);
    CHECK_EQ(rl_acquire(NULL, "n", "i", &good, 1, &r), RL_ERR_INVALID);
    CHECK_EQ(redis_dbsize(&redis), 0);
}

/* Ids come from end users: no (name, id) pair may reach another's state. */
static void test_hostile_ids(void)
{
    rl_spec spec = {.algorithm = RL_FIXED_WINDOW, .limit = 1, .period_ms = 60000, .burst = 0};
    rl_result r;
    char key[512];
    redis_flush(&redis);
    CHECK_OK(rl_acquire(client, "sms:vip", "alice", &spec, 1, &r));
    CHECK_EQ(r.allowed, 1);
    CHECK_OK(rl_acquire(client, "sms", "vip:alice", &spec, 1, &r));
    CHECK_EQ(r.allowed, 1); /* a different entity, not the one above */
    CHECK_EQ(redis_dbsize(&redis), 2);
    CHECK(rl_key(client, "sms:vip", "alice", RL_FIXED_WINDOW, key, sizeof key) > 0);
    CHECK(!strcmp(key, "rl:{sms%3Avip:alice}:fixed_window"));
    CHECK(rl_key(client, "n", "}{evil", RL_GCRA, key, sizeof key) > 0);
    CHECK(!strcmp(key, "rl:{n:%7D%7Bevil}:gcra"));
    /* a 64 KiB id (a header used as a key) works, hashed into a short key */
    char *big = malloc(65537);
    memset(big, 'h', 65536);
    big[65536] = '\0';
    CHECK_OK(rl_acquire(client, "hdr", big, &spec, 1, &r));
    CHECK_EQ(r.allowed, 1);
    CHECK_OK(rl_acquire(client, "hdr", big, &spec, 1, &r));
    CHECK_EQ(r.allowed, 0);
    int len = rl_key(client, "hdr", big, RL_FIXED_WINDOW, key, sizeof key);
    CHECK(len > 0 && len < 100 && strstr(key, "%H") != NULL);
    big[65535] = 'i'; /* one byte apart: another entity */
    CHECK_OK(rl_acquire(client, "hdr", big, &spec, 1, &r));
    CHECK_EQ(r.allowed, 1);
    free(big);
    CHECK_OK(rl_acquire(client, "uni", "\xe7\x94\xa8\xe6\x88\xb7 \xff", &spec, 1, &r));
    CHECK_EQ(r.allowed, 1);
}

static void test_urls(void)
{
    rl_client *c = NULL;
    const char *bad[] = {"", "http://x", "redis://", "redis://host:notaport", "redis://host:70000",
                         "redis://host/db", "unix://relative", "unix:///x?db=z", "redis://h?ssl_cert_reqs=none",
                         "redis://[::1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_EQ(rl_client_open(&c, bad[i], NULL), RL_ERR_INVALID);
        CHECK(c == NULL);
    }
    CHECK_EQ(rl_client_open(&c, NULL, NULL), RL_ERR_INVALID);
    /* a closed port: TLS builds try to connect, others refuse the scheme */
    CHECK_EQ(rl_client_open(&c, "rediss://127.0.0.1:1", NULL), rl_tls_supported() ? RL_ERR_CONNECTION : RL_ERR_INVALID);
    if (!rl_tls_supported()) CHECK(strstr(rl_errmsg(), "no TLS") != NULL);
    rl_options o = RL_OPTIONS_INIT;
    o.pool_size = -1;
    CHECK_EQ(rl_client_open(&c, redis.url, &o), RL_ERR_INVALID);
    CHECK(strstr(rl_errmsg(), "pool_size") != NULL);
    o = (rl_options)RL_OPTIONS_INIT;
    o.command_timeout_ms = -5;
    CHECK_EQ(rl_client_open(&c, redis.url, &o), RL_ERR_INVALID);
    o = (rl_options)RL_OPTIONS_INIT;
    o.key_prefix = "";
    CHECK_EQ(rl_client_open(&c, redis.url, &o), RL_ERR_INVALID);
    /* nothing listens on port 1 */
    CHECK_EQ(rl_client_open(&c, "redis://127.0.0.1:1", NULL), RL_ERR_CONNECTION);
    /* a wrong password is a Redis error at open */
    char url[128];
    snprintf(url, sizeof url, "redis://:secret@127.0.0.1:%d", redis.port);
    CHECK_EQ(rl_client_open(&c, url, NULL), RL_ERR_REDIS);
    /* db selection and a custom prefix */
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/3", redis.port);
    o = (rl_options)RL_OPTIONS_INIT;
    o.key_prefix = "app";
    CHECK_OK(rl_client_open(&c, url, &o));
    rl_spec s = {.algorithm = RL_FIXED_WINDOW, .limit = 1, .period_ms = 1000, .burst = 0};
    rl_result r;
    redis_flush(&redis);
    CHECK_OK(rl_acquire(c, "n", "i", &s, 1, &r));
    redisContext *raw = redis_raw(&redis);
    freeReplyObject(redisCommand(raw, "SELECT 3"));
    CHECK_EQ(redis_int(raw, "EXISTS app:{n:i}:fixed_window"), 1);
    redisFree(raw);
    CHECK_EQ(redis_dbsize(&redis), 0); /* db 0 untouched */
    rl_client_close(c);
    rl_client_close(NULL);
}

/* A zeroed rl_options means every default, as RL_OPTIONS_INIT does. */
static void test_zeroed_options(void)
{
    rl_client *c = NULL;
    rl_options o = {0};
    CHECK_OK(rl_client_open(&c, redis.url, &o));
    CHECK(c != NULL && strcmp(rl_client_prefix(c), "rl") == 0);
    rl_spec s = {.algorithm = RL_FIXED_WINDOW, .limit = 1, .period_ms = 1000, .burst = 0};
    rl_result r;
    redis_flush(&redis);
    CHECK_OK(rl_acquire(c, "zero", "i", &s, 1, &r));
    CHECK_EQ(r.allowed, 1);
    CHECK_OK(rl_acquire(c, "zero", "i", &s, 1, &r));
    CHECK_EQ(r.allowed, 0);
    redisContext *raw = redis_raw(&redis);
    CHECK_EQ(redis_int(raw, "EXISTS rl:{zero:i}:fixed_window"), 1);
    redisFree(raw);
    rl_client_close(c);
    /* a zero in one field of an otherwise set struct: that field's default */
    o = (rl_options)RL_OPTIONS_INIT;
    o.pool_size = 0;
    o.reconnect_max_ms = 0;
    o.key_prefix = NULL;
    CHECK_OK(rl_client_open(&c, redis.url, &o));
    CHECK(strcmp(rl_client_prefix(c), "rl") == 0);
    rl_client_close(c);
}

int main(void)
{
    redis_start(&redis);
    client = open_client(&redis, NULL);
    test_fixed_window();
    test_sliding_log();
    test_sliding_window();
    test_token_bucket();
    test_leaky_bucket();
    test_gcra();
    test_peek_writes_nothing();
    test_batch();
    test_batch_outcomes();
    test_script_flush();
    test_invalid_input_writes_nothing();
    test_urls();
    test_zeroed_options();
    test_hostile_ids();
    test_server_time_and_expiry();
    rl_client_close(client);
    redis_stop(&redis);
    return test_summary("limiters");
}
