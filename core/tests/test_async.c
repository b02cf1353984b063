/* rl_submit: exactness with thousands in flight, both completion targets,
 * NOSCRIPT, timeouts, Redis down, and closing with requests in flight. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#ifndef _WIN32
#include <sys/wait.h>
#include <unistd.h>
#endif

#include "harness.h"

static test_redis redis;

/* Tests that count exact outcomes must not see timeouts when the process
 * runs slowly (valgrind, TSan): a generous command timeout. */
static rl_client *patient_client(void)
{
    rl_options o = RL_OPTIONS_INIT;
    o.command_timeout_ms = 60000;
    return open_client(&redis, &o);
}

typedef struct {
    rl_client *client;
    rl_completions *queue;
    const char *name;
    rl_spec spec;
    int first_tag, count;
    int rejected;
} submitter;

static void *submit_run(void *arg)
{
    submitter *s = arg;
    rl_target target = {NULL, NULL, s->queue};
    rl_request req = {.name = s->name, .id = "hot", .spec = s->spec, .permits = 1, .op = RL_OP_ACQUIRE, .max_wait_ms = 0, .now_ms = 0};
    for (int i = 0; i < s->count; i++)
        if (rl_submit(s->client, &req, (uint64_t)(s->first_tag + i), &target) != RL_OK) s->rejected++;
    return NULL;
}

static void test_queue_exact(void)
{
    enum { THREADS = 4, EACH = 2500, N = THREADS * EACH };
    rl_client *c = patient_client();
    rl_completions *q;
    CHECK_OK(rl_completions_open(&q));
    submitter s[THREADS];
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        s[i] = (submitter){c, q, "async-exact", {.algorithm = RL_FIXED_WINDOW, .limit = 1000, .period_ms = 3600000, .burst = 0}, i * EACH, EACH, 0};
        pthread_create(&t[i], NULL, submit_run, &s[i]);
    }
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    rl_completion *all = calloc(N, sizeof *all);
    size_t got = drain_completions(q, all, N, 10000);
    CHECK_EQ(got, N);
    char *seen = calloc(N, 1);
    long allowed = 0, errors = 0, duplicates = 0;
    for (size_t i = 0; i < got; i++) {
        if (all[i].status != RL_OK) errors++;
        else allowed += all[i].result.allowed;
        if (all[i].tag < N && seen[all[i].tag]++) duplicates++;
    }
    CHECK_EQ(errors, 0);
    CHECK_EQ(allowed, 1000);
    CHECK_EQ(duplicates, 0);
    CHECK_EQ(rl_completions_take(q, all, 1), 0);
    /* the queue's fd is quiet again once drained */
    CHECK_EQ(wait_readable(rl_completions_fd(q), 0), 0);
    free(seen);
    free(all);
    rl_client_close(c);
    rl_completions_close(q);
}

typedef struct {
    long done, allowed, errors, closed;
} tally;

static void count(void *ctx, const rl_completion *c)
{
    tally *t = ctx;
    if (c->status == RL_OK) t->allowed += c->result.allowed;
    else if (c->status == RL_ERR_CLOSED) t->closed++;
    else t->errors++;
    __atomic_add_fetch(&t->done, 1, __ATOMIC_RELEASE); /* only the I/O thread writes the others */
}

static void wait_done(tally *t, long n, int64_t timeout_ms)
{
    int64_t end = now_ms() + timeout_ms;
    while (__atomic_load_n(&t->done, __ATOMIC_ACQUIRE) < n && now_ms() < end) sleep_ms(1);
}

static void test_callback_and_noscript(void)
{
    rl_client *c = patient_client();
    tally t = {0, 0, 0, 0};
    rl_target target = {count, &t, NULL};
    rl_request req = {.name = "async-cb", .id = "x", .spec = {.algorithm = RL_GCRA, .limit = 50, .period_ms = 60000, .burst = 0}, .permits = 1, .op = RL_OP_ACQUIRE, .max_wait_ms = 0, .now_ms = 0};
    redisContext *raw = redis_raw(&redis);
    redisReply *r = redisCommand(raw, "SCRIPT FLUSH");
    freeReplyObject(r);
    for (int i = 0; i < 200; i++) CHECK_OK(rl_submit(c, &req, (uint64_t)i, &target));
    wait_done(&t, 200, 5000);
    CHECK_EQ(t.done, 200);
    CHECK_EQ(t.errors, 0);
    CHECK_EQ(t.allowed, 50);
    /* scripts flushed while requests are in flight are loaded again, once */
    for (int round = 0; round < 3; round++) {
        r = redisCommand(raw, "SCRIPT FLUSH");
        freeReplyObject(r);
        for (int i = 0; i < 100; i++) CHECK_OK(rl_submit(c, &req, (uint64_t)i, &target));
    }
    wait_done(&t, 500, 5000);
    CHECK_EQ(t.done, 500);
    CHECK_EQ(t.errors, 0);
    CHECK_EQ(t.allowed, 50);
    redisFree(raw);

    /* bad requests and targets: refused at once, nothing written */
    redis_flush(&redis);
    rl_request bad = req;
    bad.permits = 0;
    CHECK_EQ(rl_submit(c, &bad, 1, &target), RL_ERR_INVALID);
    bad = req;
    bad.id = "";
    CHECK_EQ(rl_submit(c, &bad, 1, &target), RL_ERR_INVALID);
    rl_target neither = {NULL, NULL, NULL};
    CHECK_EQ(rl_submit(c, &req, 1, &neither), RL_ERR_INVALID);
    CHECK_EQ(rl_submit(NULL, &req, 1, &target), RL_ERR_INVALID);
    sleep_ms(50);
    CHECK_EQ(redis_dbsize(&redis), 0);
    CHECK_EQ(t.done, 500);
    rl_client_close(c);
}

static void test_close_in_flight(void)
{
    rl_client *c = patient_client();
    tally t = {0, 0, 0, 0};
    rl_target target = {count, &t, NULL};
    rl_request req = {.name = "async-close", .id = "x", .spec = {.algorithm = RL_TOKEN_BUCKET, .limit = 1000000, .period_ms = 1000, .burst = 0}, .permits = 1, .op = RL_OP_ACQUIRE, .max_wait_ms = 0, .now_ms = 0};
    for (int i = 0; i < 20000; i++) CHECK_OK(rl_submit(c, &req, (uint64_t)i, &target));
    rl_client_close(c); /* completes everything before it returns */
    CHECK_EQ(t.done, 20000);
    CHECK_EQ(t.errors, 0);
    printf("  close with 20000 in flight: %ld decided, %ld closed\n", t.done - t.closed, t.closed);
}

static void test_timeout_and_outage(void)
{
    rl_options o = RL_OPTIONS_INIT;
    o.command_timeout_ms = 300;
    o.connect_timeout_ms = 300;
    o.reconnect_max_ms = 200;
    rl_client *c = open_client(&redis, &o);
    rl_completions *q;
    CHECK_OK(rl_completions_open(&q));
    rl_target target = {NULL, NULL, q};
    rl_request req = {.name = "async-to", .id = "x", .spec = {.algorithm = RL_TOKEN_BUCKET, .limit = 1000000, .period_ms = 1000, .burst = 0}, .permits = 1, .op = RL_OP_ACQUIRE, .max_wait_ms = 0, .now_ms = 0};
    rl_completion all[100];

    redis_pause(&redis);
    int64_t t = now_ms();
    for (int i = 0; i < 10; i++) CHECK_OK(rl_submit(c, &req, (uint64_t)i, &target));
    CHECK_EQ(drain_completions(q, all, 10, 3000), 10);
    int64_t took = now_ms() - t;
    CHECK(took >= 250 && took < 1500);
    for (int i = 0; i < 10; i++) CHECK_EQ(all[i].status, RL_ERR_TIMEOUT);
    redis_resume(&redis);
    sleep_ms(50);
    /* an idle connection owes nothing: after a pause past two timeouts the
     * next request is answered, not taken for a stuck server */
    CHECK_OK(rl_submit(c, &req, 0, &target));
    CHECK_EQ(drain_completions(q, all, 1, 3000), 1);
    sleep_ms(700);
    CHECK_OK(rl_submit(c, &req, 0, &target));
    CHECK_EQ(drain_completions(q, all, 1, 3000), 1);
    CHECK_EQ(all[0].status, RL_OK);
    for (int i = 0; i < 10; i++) CHECK_OK(rl_submit(c, &req, (uint64_t)i, &target));
    CHECK_EQ(drain_completions(q, all, 10, 3000), 10);
    int ok = 0;
    for (int i = 0; i < 10; i++) ok += all[i].status == RL_OK && all[i].result.allowed;
    CHECK_EQ(ok, 10);
    rl_client_close(c);

    /* Redis down and the allow policy: decided at once, by the policy */
    o.on_error = RL_ON_ERROR_ALLOW;
    redis_kill(&redis);
    c = open_client(&redis, &o);
    t = now_ms();
    for (int i = 0; i < 100; i++) CHECK_OK(rl_submit(c, &req, (uint64_t)i, &target));
    CHECK_EQ(drain_completions(q, all, 100, 3000), 100);
    int fallbacks = 0;
    for (int i = 0; i < 100; i++) fallbacks += all[i].status == RL_OK && all[i].result.fallback && all[i].result.allowed;
    CHECK_EQ(fallbacks, 100);
    CHECK(now_ms() - t < 1000);
    redis_restart(&redis);
    t = now_ms();
    int back = 0;
    while (!back && now_ms() - t < 2000) {
        CHECK_OK(rl_submit(c, &req, 0, &target));
        CHECK_EQ(drain_completions(q, all, 1, 2000), 1);
        back = all[0].status == RL_OK && !all[0].result.fallback;
        if (!back) sleep_ms(5);
    }
    CHECK(back);
    rl_client_close(c);
    rl_completions_close(q);
}

#ifndef _WIN32 /* no fork */
/* A forked child must not use the parent's sockets nor wait on its I/O
 * thread (which did not survive the fork): both paths start afresh. */
static void test_fork(void)
{
    rl_client *c = patient_client();
    rl_request req = {.name = "async-fork", .id = "x", .spec = {.algorithm = RL_FIXED_WINDOW, .limit = 1000, .period_ms = 3600000, .burst = 0}, .permits = 1, .op = RL_OP_ACQUIRE, .max_wait_ms = 0, .now_ms = 0};
    tally t = {0, 0, 0, 0};
    rl_target target = {count, &t, NULL};
    rl_result r;
    CHECK_OK(rl_submit(c, &req, 0, &target)); /* the parent's I/O thread runs */
    wait_done(&t, 1, 5000);
    pid_t pid = fork();
    if (pid == 0) {
        tally ct = {0, 0, 0, 0};
        rl_target child_target = {count, &ct, NULL};
        int ok = 1;
        for (int i = 0; i < 50; i++) ok &= rl_execute(c, &req, 1, &r) == RL_OK && r.allowed;
        for (int i = 0; i < 50; i++) ok &= rl_submit(c, &req, 0, &child_target) == RL_OK;
        wait_done(&ct, 50, 5000);
        ok &= ct.done == 50 && ct.allowed == 50;
        rl_client_close(c);
        _exit(ok ? 0 : 1);
    }
    for (int i = 0; i < 50; i++) CHECK_OK(rl_submit(c, &req, 0, &target));
    for (int i = 0; i < 50; i++) CHECK_OK(rl_execute(c, &req, 1, &r));
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    wait_done(&t, 51, 5000);
    req.op = RL_OP_PEEK;
    CHECK_OK(rl_execute(c, &req, 1, &r));
    CHECK_EQ(r.remaining, 1000 - 1 - 100 - 100); /* nothing lost or counted twice */
    rl_client_close(c);
}
#endif

/* The primitives through rl_submit_*: one round trip each, no waiting. */
static void test_primitives(void)
{
    rl_client *c = patient_client();
    rl_completions *q;
    rl_completion all[8];
    CHECK_OK(rl_completions_open(&q));
    rl_target target = {NULL, NULL, q};
    for (int i = 0; i < 3; i++) CHECK_OK(rl_submit_semaphore_acquire(c, "async-sem", 2, 10000, 0, (uint64_t)i, &target));
    CHECK_EQ(drain_completions(q, all, 3, 5000), 3);
    int granted = 0;
    char first[RL_PERMIT_ID_SIZE] = "";
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(all[i].status, RL_OK);
        granted += all[i].acquired;
        if (all[i].acquired) {
            CHECK(all[i].fencing_token > 0 && strlen(all[i].permit_id) == 32);
            if (!first[0]) memcpy(first, all[i].permit_id, sizeof first);
        } else {
            CHECK(all[i].permit_id[0] == '\0');
        }
    }
    CHECK_EQ(granted, 2);
    int64_t holders = 0;
    CHECK_OK(rl_semaphore_holders(c, "async-sem", &holders));
    CHECK_EQ(holders, 2);
    CHECK_OK(rl_submit_semaphore_refresh(c, "async-sem", first, 20000, 10, &target));
    CHECK_OK(rl_submit_semaphore_release(c, "async-sem", first, 11, &target));
    CHECK_OK(rl_submit_semaphore_release(c, "async-sem", first, 12, &target)); /* twice: not held any more */
    CHECK_EQ(drain_completions(q, all, 3, 5000), 3);
    for (int i = 0; i < 3; i++) CHECK_EQ(all[i].value, all[i].tag == 12 ? 0 : 1);
    CHECK_OK(rl_semaphore_holders(c, "async-sem", &holders));
    CHECK_EQ(holders, 1);

    CHECK_OK(rl_submit_lock_acquire(c, "async-lock", 10000, 0, 20, &target));
    CHECK_OK(rl_submit_lock_acquire(c, "async-lock", 10000, 0, 21, &target));
    CHECK_EQ(drain_completions(q, all, 2, 5000), 2);
    CHECK_EQ(all[0].acquired + all[1].acquired, 1);
    rl_completion *held = all[0].acquired ? &all[0] : &all[1];
    char token[RL_PERMIT_ID_SIZE];
    memcpy(token, held->permit_id, sizeof token);
    CHECK_OK(rl_submit_lock_extend(c, "async-lock", token, 30000, 22, &target));
    CHECK_OK(rl_submit_lock_release(c, "async-lock", token, 23, &target));
    CHECK_EQ(drain_completions(q, all, 2, 5000), 2);
    CHECK_EQ(all[0].value + all[1].value, 2);

    CHECK_OK(rl_submit_queue_push(c, "async-q", "job\0x", 5, 0, 30, &target));
    CHECK_OK(rl_submit_queue_push(c, "async-q", "job\0x", 5, 0, 31, &target));
    CHECK_EQ(drain_completions(q, all, 2, 5000), 2);
    CHECK_EQ(all[0].value + all[1].value, 1); /* a message already queued is left as it is */
    rl_messages m;
    CHECK_OK(rl_queue_pop_ready(c, "async-q", 10, &m));
    CHECK_EQ(m.count, 1);
    if (m.count == 1) CHECK(m.lens[0] == 5 && !memcmp(m.items[0], "job\0x", 5));
    rl_messages_free(&m);

    /* the rest: one round trip each, a number back */
    CHECK_OK(rl_submit_semaphore_info(c, "async-sem", 0, 40, &target));   /* holders */
    CHECK_OK(rl_submit_semaphore_info(c, "async-sem", 5, 41, &target));   /* available of 5 */
    CHECK_OK(rl_submit_queue_push(c, "async-q", "m", 1, 0, 42, &target));
    CHECK_OK(rl_submit_queue_size(c, "async-q", 43, &target));
    CHECK_OK(rl_submit_queue_remove(c, "async-q", "m", 1, 44, &target));
    CHECK_OK(rl_submit_queue_remove(c, "async-q", "m", 1, 45, &target));
    rl_spec spec = {.algorithm = RL_GCRA, .limit = 10, .period_ms = 1000};
    rl_result res;
    CHECK_OK(rl_acquire(c, "async-reset", "u", &spec, 1, &res));
    CHECK_OK(rl_submit_reset(c, "async-reset", "u", &spec, 46, &target));
    CHECK_EQ(drain_completions(q, all, 7, 5000), 7);
    for (int i = 0; i < 7; i++) {
        CHECK_EQ(all[i].status, RL_OK);
        int64_t want[] = {1, 4, 1, 1, 1, 0, 1}; /* tags 40..46 */
        if (all[i].tag >= 40 && all[i].tag <= 46) CHECK_EQ(all[i].value, want[all[i].tag - 40]);
    }
    CHECK_OK(rl_peek(c, "async-reset", "u", &spec, 1, &res));
    CHECK_EQ(res.remaining, 10);

    /* bad arguments: refused at once */
    CHECK_EQ(rl_submit_semaphore_info(c, "", 0, 0, &target), RL_ERR_INVALID);
    CHECK_EQ(rl_submit_semaphore_info(c, "s", -1, 0, &target), RL_ERR_INVALID);
    CHECK_EQ(rl_submit_queue_size(c, "", 0, &target), RL_ERR_INVALID);
    CHECK_EQ(rl_submit_queue_remove(c, "q", NULL, 0, 0, &target), RL_ERR_INVALID);
    CHECK_EQ(rl_submit_reset(c, "n", "", &spec, 0, &target), RL_ERR_INVALID);
    CHECK_EQ(rl_submit_reset(c, "never-stored", "u", NULL, 0, &target), RL_ERR_INVALID);
    CHECK_EQ(rl_submit_semaphore_acquire(c, "", 2, 1000, 0, 0, &target), RL_ERR_INVALID);
    CHECK_EQ(rl_submit_semaphore_acquire(c, "s", 0, 1000, 0, 0, &target), RL_ERR_INVALID);
    CHECK_EQ(rl_submit_semaphore_refresh(c, "s", "id", 0, 0, &target), RL_ERR_INVALID);
    CHECK_EQ(rl_submit_lock_release(c, "s", "", 0, &target), RL_ERR_INVALID);
    CHECK_EQ(rl_submit_queue_push(c, "q", "", 0, 0, 0, &target), RL_ERR_INVALID);
    CHECK_EQ(rl_submit_queue_push(c, "q", "m", 1, -1, 0, &target), RL_ERR_INVALID);
    CHECK_EQ(rl_completions_take(q, all, 8), 0);
    rl_client_close(c);
    rl_completions_close(q);
}

int main(void)
{
    redis_start(&redis);
    test_queue_exact();
    test_callback_and_noscript();
    test_close_in_flight();
#ifndef _WIN32
    test_fork();
#else
    printf("fork: skipped (Windows has no fork)\n");
#endif
    test_primitives();
    test_timeout_and_outage();
    redis_stop(&redis);
    return test_summary("async");
}
