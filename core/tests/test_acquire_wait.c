/* rl_submit_acquire_wait: admitted after waiting retry_after on the I/O
 * thread, the last denial at once when waiting cannot help, cancelled,
 * closed, never more admitted than the limit, a dead Redis's error within
 * the timeout, the blocking call's refusals, and a stored spec followed
 * at every try. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static test_redis redis;

/* an acquire of 1 without a lease */
static rl_request acquire(const char *name, const char *id, rl_algorithm a, int64_t limit, int64_t period_ms)
{
    return leased(name, id, a, limit, period_ms, 0);
}

static int take_one(rl_completions *q, rl_completion *out, int64_t timeout_ms)
{
    return drain_completions(q, out, 1, timeout_ms) == 1;
}

/* A client of server and the queue its waits complete into. */
typedef struct {
    rl_client *c;
    rl_completions *q;
    rl_target target;
} fixture;

static fixture setup(const test_redis *server, const rl_options *options)
{
    fixture f;
    f.c = open_client(server, options);
    CHECK_OK(rl_completions_open(&f.q));
    f.target = (rl_target){NULL, NULL, f.q};
    return f;
}

static void teardown(fixture *f)
{
    if (f->c) rl_client_close(f->c);
    rl_completions_close(f->q);
}

/* Denied now, admitted once retry_after has passed, without a thread. */
static void test_admitted_after_a_wait(void)
{
    fixture f = setup(&redis, NULL);
    rl_completion done;
    rl_result r;
    rl_request req = acquire("aw-admit", "u", RL_GCRA, 2, 1000); /* one every 500 ms */
    req.permits = 2;
    CHECK_OK(rl_execute(f.c, &req, 1, &r));
    CHECK(r.allowed);
    req.permits = 1;
    int64_t at = now_ms();
    CHECK_OK(rl_submit_acquire_wait(f.c, &req, 3000, 7, &f.target));
    CHECK(take_one(f.q, &done, 5000));
    int64_t took = now_ms() - at;
    CHECK_EQ(done.tag, 7);
    CHECK_EQ(done.status, RL_OK);
    CHECK(done.result.allowed && !done.result.fallback);
    CHECK(took >= 400 && took < 2000);
    CHECK(!take_one(f.q, &done, 100)); /* exactly once */
    teardown(&f);
}

/* The next chance is past the deadline: the denial comes at once. */
static void test_gives_up_early(void)
{
    fixture f = setup(&redis, NULL);
    rl_completion done;
    rl_result r;
    rl_request req = acquire("aw-early", "u", RL_GCRA, 1, 10000);
    CHECK_OK(rl_execute(f.c, &req, 1, &r));
    int64_t at = now_ms();
    CHECK_OK(rl_submit_acquire_wait(f.c, &req, 1000, 8, &f.target));
    CHECK(take_one(f.q, &done, 5000));
    CHECK_EQ(done.status, RL_OK);
    CHECK(!done.result.allowed && done.result.retry_after_ms > 1000);
    CHECK(now_ms() - at < 500);
    /* and as the blocking call answers */
    rl_wait wait = {1000, NULL, NULL};
    CHECK_OK(rl_acquire_wait(f.c, &req, &wait, &r));
    CHECK(!r.allowed && r.retry_after_ms > 1000);
    teardown(&f);
}

/* rl_cancel ends a waiting acquire, which takes nothing afterwards. */
static void test_cancel(void)
{
    fixture f = setup(&redis, NULL);
    rl_completion done;
    rl_result r;
    rl_request req = acquire("aw-cancel", "u", RL_GCRA, 1, 1000);
    CHECK_OK(rl_execute(f.c, &req, 1, &r));
    CHECK_OK(rl_submit_acquire_wait(f.c, &req, 10000, 9, &f.target));
    sleep_ms(200); /* denied, sleeping until its next try */
    int64_t at = now_ms();
    CHECK_OK(rl_cancel(f.c, 9));
    CHECK(take_one(f.q, &done, 5000));
    CHECK(now_ms() - at < 500);
    CHECK_EQ(done.status, RL_ERR_CANCELLED);
    sleep_ms(1200); /* past the slot a try would have taken */
    rl_request peek = req;
    peek.op = RL_OP_PEEK;
    CHECK_OK(rl_execute(f.c, &peek, 1, &r));
    CHECK(r.allowed);
    /* cancelled before its first try came back: cancelled all the same */
    CHECK_OK(rl_execute(f.c, &req, 1, &r));
    CHECK_OK(rl_submit_acquire_wait(f.c, &req, 10000, 10, &f.target));
    CHECK_OK(rl_cancel(f.c, 10));
    CHECK(take_one(f.q, &done, 5000));
    CHECK_EQ(done.status, RL_ERR_CANCELLED);
    teardown(&f);
}

/* Closing the client completes a waiting acquire with RL_ERR_CLOSED. */
static void test_close_while_waiting(void)
{
    fixture f = setup(&redis, NULL);
    rl_completion done[2];
    rl_result r;
    rl_request req = acquire("aw-close", "u", RL_GCRA, 1, 5000);
    CHECK_OK(rl_execute(f.c, &req, 1, &r));
    CHECK_OK(rl_submit_acquire_wait(f.c, &req, 20000, 11, &f.target));
    CHECK_OK(rl_submit_acquire_wait(f.c, &req, 20000, 12, &f.target)); /* its try maybe in flight */
    sleep_ms(100);
    int64_t at = now_ms();
    rl_client_close(f.c);
    CHECK_EQ(drain_completions(f.q, done, 2, 2000), 2);
    CHECK(now_ms() - at < 2000);
    CHECK_EQ(done[0].status, RL_ERR_CLOSED);
    CHECK_EQ(done[1].status, RL_ERR_CLOSED);
    f.c = NULL;
    teardown(&f);
}

/* Many waiters on one entity: never more admitted than the limit allows,
 * each completed exactly once, through callbacks as well as a queue. */
typedef struct {
    pthread_mutex_t mutex;
    int completed, admitted;
} tally;

static void count(void *ctx, const rl_completion *done)
{
    tally *t = ctx;
    pthread_mutex_lock(&t->mutex);
    t->completed++;
    t->admitted += done->status == RL_OK && done->result.allowed;
    pthread_mutex_unlock(&t->mutex);
}

static void test_concurrent_waiters_never_over_admit(void)
{
    enum { WAITERS = 40 };
    rl_client *c = open_client(&redis, NULL);
    tally t = {PTHREAD_MUTEX_INITIALIZER, 0, 0};
    rl_target target = {count, &t, NULL};
    rl_request req = acquire("aw-many", "u", RL_SLIDING_LOG, 5, 1000); /* exact: 5 in any second */
    int64_t at = now_ms();
    for (int i = 0; i < WAITERS; i++) CHECK_OK(rl_submit_acquire_wait(c, &req, 1500, (uint64_t)(100 + i), &target));
    for (int i = 0; i < 100; i++) {
        pthread_mutex_lock(&t.mutex);
        int completed = t.completed;
        pthread_mutex_unlock(&t.mutex);
        if (completed == WAITERS) break;
        sleep_ms(50);
    }
    int64_t took = now_ms() - at;
    rl_client_close(c);
    CHECK_EQ(t.completed, WAITERS);
    /* within took < 2 s: at most two windows' worth */
    CHECK(took < 2000);
    CHECK(t.admitted >= 5 && t.admitted <= 10);
}

/* Redis gone (on_error RAISE): its typed error, within the timeout. */
static void test_dead_redis(void)
{
    test_redis dead = {0};
    redis_start(&dead);
    rl_options o = RL_OPTIONS_INIT;
    o.on_error = RL_ON_ERROR_RAISE;
    o.command_timeout_ms = 300;
    o.connect_timeout_ms = 300;
    fixture f = setup(&dead, &o);
    rl_completion done;
    rl_result r;
    rl_request req = acquire("aw-dead", "u", RL_GCRA, 1, 2000);
    CHECK_OK(rl_execute(f.c, &req, 1, &r));
    redis_kill(&dead);
    int64_t at = now_ms();
    CHECK_OK(rl_submit_acquire_wait(f.c, &req, 5000, 13, &f.target));
    CHECK(take_one(f.q, &done, 10000));
    CHECK(now_ms() - at < 5000);
    CHECK(done.status == RL_ERR_CONNECTION || done.status == RL_ERR_TIMEOUT);
    CHECK(done.error[0] != '\0');
    teardown(&f);
}

/* Bad input: what rl_acquire_wait refuses, nothing queued. */
static void test_refused(void)
{
    fixture f = setup(&redis, NULL);
    rl_completion done;
    rl_result r;
    rl_target neither = {NULL, NULL, NULL};
    rl_request ok = acquire("aw-bad", "u", RL_GCRA, 1, 1000), bad[4] = {ok, ok, ok, ok};
    bad[0].op = RL_OP_PEEK;
    bad[1].now_ms = 1700000000000;
    bad[2].permits = 0;
    bad[3].spec.limit = 0;
    rl_wait wait = {1000, NULL, NULL};
    for (int i = 0; i < 4; i++) {
        CHECK_EQ(rl_submit_acquire_wait(f.c, &bad[i], 1000, 14, &f.target), RL_ERR_INVALID);
        char async_said[512];
        snprintf(async_said, sizeof async_said, "%s", rl_errmsg());
        CHECK_EQ(rl_acquire_wait(f.c, &bad[i], &wait, &r), RL_ERR_INVALID);
        CHECK(strcmp(async_said, rl_errmsg()) == 0);
    }
    CHECK_EQ(rl_submit_acquire_wait(f.c, &ok, -1, 14, &f.target), RL_ERR_INVALID);
    CHECK_EQ(rl_submit_acquire_wait(f.c, &ok, RL_MAX_PERIOD_MS + 1, 14, &f.target), RL_ERR_INVALID);
    CHECK_EQ(rl_submit_acquire_wait(f.c, &ok, 1000, 14, &neither), RL_ERR_INVALID);
    CHECK_EQ(rl_submit_acquire_wait(f.c, NULL, 1000, 14, &f.target), RL_ERR_INVALID);
    CHECK(!take_one(f.q, &done, 200));
    /* an explicit clock without a timeout is one decision, as the blocking call's */
    CHECK_OK(rl_submit_acquire_wait(f.c, &bad[1], 0, 15, &f.target));
    CHECK(take_one(f.q, &done, 5000));
    CHECK_EQ(done.status, RL_OK);
    CHECK(done.result.allowed);
    teardown(&f);
}

/* With a lease: decided from the block, and admitted after a wait. */
static void test_leased(void)
{
    fixture f = setup(&redis, NULL);
    rl_completion done;
    rl_request req = leased("aw-lease", "u", RL_GCRA, 4, 1000, 200); /* one every 250 ms */
    int admitted = 0;
    int64_t at = now_ms();
    for (int i = 0; i < 6; i++) {
        CHECK_OK(rl_submit_acquire_wait(f.c, &req, 3000, (uint64_t)(20 + i), &f.target));
        CHECK(take_one(f.q, &done, 5000));
        CHECK_EQ(done.status, RL_OK);
        admitted += done.result.allowed;
    }
    CHECK_EQ(admitted, 6);
    CHECK(now_ms() - at >= 200); /* the last two waited for their slots */
    teardown(&f);
}

/* HMGET calls Redis has run (INFO commandstats): reads of stored specs. */
static long long spec_reads(void)
{
    redisContext *c = redis_raw(&redis);
    redisReply *info = redisCommand(c, "INFO commandstats");
    const char *at = info && info->type == REDIS_REPLY_STRING ? strstr(info->str, "cmdstat_hmget:calls=") : NULL;
    long long n = at ? atoll(at + strlen("cmdstat_hmget:calls=")) : 0;
    if (info) freeReplyObject(info);
    redisFree(c);
    return n;
}

/* A stored spec is looked up again at every try, as rl_acquire_wait does:
 * lowered by another client mid-wait (this one's cache goes stale and is
 * read again), the waiters are held to the new rate, not the one they were
 * submitted with. gcra 5/s, 5 taken, then 1 a minute: the stored TAT lets
 * one through under the new rate; the old would admit one every 200 ms. */
static void test_follows_the_stored_spec(void)
{
    enum { WAITERS = 20 };
    rl_options o = RL_OPTIONS_INIT;
    o.config_refresh_ms = 100;
    rl_client *c = open_client(&redis, &o), *admin = open_client(&redis, NULL);
    tally t = {PTHREAD_MUTEX_INITIALIZER, 0, 0};
    rl_target target = {count, &t, NULL};
    rl_spec fast = {.algorithm = RL_GCRA, .limit = 5, .period_ms = 1000};
    rl_spec slow = {.algorithm = RL_GCRA, .limit = 1, .period_ms = 60000};
    rl_request req = {.name = "aw-stored", .id = "u", .permits = 1, .stored_spec = 1};
    rl_result r;
    CHECK_OK(rl_config_set(c, "aw-stored", &fast));
    for (int i = 0; i < 5; i++) {
        CHECK_OK(rl_execute(c, &req, 1, &r));
        CHECK(r.allowed);
    }
    long long reads = spec_reads();
    for (int i = 0; i < WAITERS; i++) CHECK_OK(rl_submit_acquire_wait(c, &req, 3000, (uint64_t)(200 + i), &target));
    CHECK_OK(rl_config_set(admin, "aw-stored", &slow)); /* before their first retry, 200 ms on */
    int64_t at = now_ms();
    for (int i = 0; i < 100; i++) {
        pthread_mutex_lock(&t.mutex);
        int completed = t.completed;
        pthread_mutex_unlock(&t.mutex);
        if (completed == WAITERS) break;
        sleep_ms(50);
    }
    int64_t took = now_ms() - at;
    reads = spec_reads() - reads;
    rl_client_close(c);
    rl_client_close(admin);
    CHECK_EQ(t.completed, WAITERS);
    CHECK(t.admitted <= 1);
    /* retrying together, the waiters share a read of the stale spec (about
     * one, not one each) */
    CHECK(reads >= 1 && reads < WAITERS / 2);
    /* the rest gave up when the new rate put their next chance past the deadline */
    CHECK(took < 2500);
}

/* The stored spec deleted mid-wait: the waiter ends as rl_acquire_wait
 * would, with RL_ERR_INVALID, instead of deciding under the old spec. */
static void test_stored_spec_deleted(void)
{
    rl_options o = RL_OPTIONS_INIT;
    o.config_refresh_ms = 100;
    fixture f = setup(&redis, &o);
    rl_client *admin = open_client(&redis, NULL);
    rl_spec spec = {.algorithm = RL_GCRA, .limit = 1, .period_ms = 1000};
    rl_request req = {.name = "aw-deleted", .id = "u", .permits = 1, .stored_spec = 1};
    rl_completion done;
    rl_result r;
    int deleted;
    CHECK_OK(rl_config_set(f.c, "aw-deleted", &spec));
    CHECK_OK(rl_execute(f.c, &req, 1, &r));
    CHECK_OK(rl_submit_acquire_wait(f.c, &req, 3000, 30, &f.target));
    CHECK_OK(rl_config_delete(admin, "aw-deleted", &deleted));
    CHECK(deleted);
    CHECK(take_one(f.q, &done, 5000));
    CHECK_EQ(done.status, RL_ERR_INVALID);
    CHECK(strstr(done.error, "no configuration is stored") != NULL);
    rl_wait wait = {3000, NULL, NULL};
    CHECK_EQ(rl_acquire_wait(f.c, &req, &wait, &r), RL_ERR_INVALID);
    rl_client_close(admin);
    teardown(&f);
}

int main(void)
{
    redis_start(&redis);
    test_admitted_after_a_wait();
    test_gives_up_early();
    test_cancel();
    test_close_while_waiting();
    test_concurrent_waiters_never_over_admit();
    test_dead_redis();
    test_refused();
    test_leased();
    test_follows_the_stored_spec();
    test_stored_spec_deleted();
    redis_stop(&redis);
    return test_summary("acquire_wait");
}
