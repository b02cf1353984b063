/* Blocking callers that overlap combine into the I/O thread's batch calls
 * (combine.c): exact counts, one caller's timeout or cancellation touches
 * nobody else. Reads the client's blocking_calls (internal.h) to force the
 * combined path where timing would make it a matter of luck. */
#include <pthread.h>
#include <string.h>

#include "harness.h"
#include "internal.h"

#define THREADS 16
#define KEYS 32

static test_redis redis;
static rl_client *client;

typedef struct {
    int index;
    int keys;    /* 1: every thread on one key; else spread over this many */
    int calls;
    long admitted[KEYS];
    long errors;
} job;

static void *decide(void *arg)
{
    job *j = arg;
    rl_spec spec = {.algorithm = RL_GCRA, .limit = 50, .period_ms = 60000};
    for (int i = 0; i < j->calls; i++) {
        int key = (j->index + i) % j->keys;
        char id[32];
        snprintf(id, sizeof id, "key-%d", key);
        rl_request req = {.name = "combine", .id = id, .spec = spec, .permits = 1, .op = RL_OP_ACQUIRE,
                          .now_ms = 1700000000000LL};
        rl_result r;
        if (rl_execute(client, &req, 1, &r) != RL_OK) j->errors++;
        else if (r.allowed) j->admitted[key]++;
    }
    return NULL;
}

/* Each of keys entities admits exactly its limit, and overlapping callers
 * went out together (fewer script calls than decisions). */
static void exact_counts(int keys)
{
    pthread_t threads[THREADS];
    static job jobs[THREADS];
    long long scripts = redis_scripts_run(&redis);
    redis_flush(&redis);
    for (int i = 0; i < THREADS; i++) {
        memset(&jobs[i], 0, sizeof jobs[i]);
        jobs[i] = (job){.index = i, .keys = keys, .calls = 200};
        pthread_create(&threads[i], NULL, decide, &jobs[i]);
    }
    long errors = 0, calls = 0;
    for (int k = 0; k < keys; k++) {
        long admitted = 0;
        for (int i = 0; i < THREADS; i++) {
            if (k == 0) pthread_join(threads[i], NULL), errors += jobs[i].errors, calls += jobs[i].calls;
            admitted += jobs[i].admitted[k];
        }
        CHECK_EQ(admitted, 50);
    }
    CHECK_EQ(errors, 0);
    long long sent = redis_scripts_run(&redis) - scripts;
    printf("  %d threads on %d key(s): %ld decisions in %lld script calls\n", THREADS, keys, calls, sent);
    CHECK(sent < calls);
}

/* ---- one caller out of a combined batch ----------------------------------- */

static int64_t blocker_ms;

/* keeps the I/O thread busy: what is submitted meanwhile goes out together */
static void hold_io_thread(void *ctx, const rl_completion *c)
{
    (void)ctx;
    (void)c;
    sleep_ms(blocker_ms);
}

typedef struct {
    int64_t start_in_ms;
    int status;
    rl_result result;
    int returned;
} caller;

static void *call_once(void *arg)
{
    caller *c = arg;
    rl_spec spec = {.algorithm = RL_GCRA, .limit = 1000, .period_ms = 1000};
    sleep_ms(c->start_in_ms);
    c->status = rl_acquire(client, "combine-late", "one", &spec, 1, &c->result);
    c->returned = 1;
    return NULL;
}

static void force_combining(int on)
{
    int pool = client->options.pool_size; /* combining starts once every pooled connection is taken */
    __atomic_fetch_add(&client->blocking_calls, on ? pool : -pool, __ATOMIC_RELAXED);
}

/* The I/O thread held for 1200 ms: A (asked at 100 ms, deadline 2100 ms)
 * and B..E (at 900 ms, deadline 2900 ms) go in one batch call, to a server
 * paused from 1000 to 2400 ms: A times out alone, B..E are decided. */
static void one_timeout_in_a_batch(void)
{
    enum { CALLERS = 5 };
    caller callers[CALLERS];
    pthread_t threads[CALLERS];
    rl_request req = {.name = "combine-late", .id = "blocker", .permits = 1, .op = RL_OP_ACQUIRE,
                      .spec = {.algorithm = RL_GCRA, .limit = 1000, .period_ms = 1000}};
    rl_target hold = {hold_io_thread, NULL, NULL};
    force_combining(1);
    blocker_ms = 1200;
    CHECK_EQ(rl_submit(client, &req, 0, &hold), RL_OK);
    for (int i = 0; i < CALLERS; i++) {
        callers[i] = (caller){.start_in_ms = i == 0 ? 100 : 900};
        pthread_create(&threads[i], NULL, call_once, &callers[i]);
    }
    sleep_ms(1000);
    long long scripts = redis_scripts_run(&redis);
    redis_pause(&redis);
    sleep_ms(1400);
    redis_resume(&redis);
    for (int i = 0; i < CALLERS; i++) pthread_join(threads[i], NULL);
    CHECK_EQ(callers[0].status, RL_ERR_TIMEOUT);
    for (int i = 1; i < CALLERS; i++) {
        CHECK_EQ(callers[i].status, RL_OK);
        CHECK(callers[i].result.allowed);
    }
    /* one batch call for the five */
    CHECK_EQ(redis_scripts_run(&redis) - scripts, 1);
    force_combining(0);
}

/* A caller cancelled while it waits leaves the others their decisions, and
 * the client its count of blocking calls. */
static void cancelled_caller(void)
{
    enum { CALLERS = 4 };
    caller callers[CALLERS];
    pthread_t threads[CALLERS];
    force_combining(1);
    redis_pause(&redis);
    for (int i = 0; i < CALLERS; i++) {
        callers[i] = (caller){.start_in_ms = 0};
        pthread_create(&threads[i], NULL, call_once, &callers[i]);
    }
    sleep_ms(200);
    pthread_cancel(threads[0]);
    pthread_join(threads[0], NULL);
    CHECK(!callers[0].returned);
    redis_resume(&redis);
    for (int i = 1; i < CALLERS; i++) {
        pthread_join(threads[i], NULL);
        CHECK_EQ(callers[i].status, RL_OK);
    }
    force_combining(0);
    CHECK_EQ(__atomic_load_n(&client->blocking_calls, __ATOMIC_RELAXED), 0);
    rl_result r;
    rl_spec spec = {.algorithm = RL_GCRA, .limit = 1000, .period_ms = 1000};
    CHECK_EQ(rl_acquire(client, "combine-late", "after", &spec, 1, &r), RL_OK);
}

int main(void)
{
    redis_start(&redis);
    rl_options o = RL_OPTIONS_INIT;
    o.command_timeout_ms = 2000;
    client = open_client(&redis, &o);
    exact_counts(1);
    exact_counts(KEYS);
    one_timeout_in_a_batch();
    cancelled_caller();
    rl_client_close(client);
    redis_stop(&redis);
    return test_summary("combine");
}
