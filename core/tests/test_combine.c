/* Blocking callers that overlap share batch calls (combine.c): exact
 * counts, one caller's timeout or cancellation touches nobody else. Sets
 * the client's count of decisions out (internal.h) to force the combined
 * path where timing would make it a matter of luck. */
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

/* as if n more decisions were out: with pool_size out, callers queue */
static void pretend_out(int n)
{
    pthread_mutex_lock(&client->combining.mutex);
    client->combining.leaders += n;
    pthread_mutex_unlock(&client->combining.mutex);
}

static void nothing_out_or_queued(void)
{
    pthread_mutex_lock(&client->combining.mutex);
    CHECK_EQ(client->combining.leaders, 0);
    CHECK(client->combining.head == NULL && client->combining.last == NULL);
    pthread_mutex_unlock(&client->combining.mutex);
}

/* Every pooled connection busy: A (asked at 100 ms, deadline 2100 ms) and B..E (at
 * 900 ms, deadline 2900 ms) queue. At 1000 ms one call comes back (E leads)
 * and the five go in one batch call, to a server paused from 1000 to 2400
 * ms: A times out alone, B..E are decided. */
static void one_timeout_in_a_batch(void)
{
    enum { CALLERS = 5 };
    caller callers[CALLERS];
    pthread_t threads[CALLERS];
    pretend_out(client->options.pool_size);
    for (int i = 0; i < CALLERS; i++) {
        callers[i] = (caller){.start_in_ms = i == 0 ? 100 : 900};
        pthread_create(&threads[i], NULL, call_once, &callers[i]);
    }
    sleep_ms(1000);
    long long scripts = redis_scripts_run(&redis);
    redis_pause(&redis);
    rl_combine_done(client);
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
    pretend_out(1 - client->options.pool_size); /* the batch's leader gave back one */
    nothing_out_or_queued();
}

#ifdef __GLIBC__
/* Callers cancelled while they wait in the queue, or when their turn to
 * lead came, leave the others their decisions and the queue in order. */
static void cancelled_callers(void)
{
    enum { CALLERS = 5 };
    caller callers[CALLERS];
    pthread_t threads[CALLERS];
    pretend_out(client->options.pool_size);
    for (int i = 0; i < CALLERS; i++) {
        callers[i] = (caller){.start_in_ms = 50 * i}; /* queued in this order */
        pthread_create(&threads[i], NULL, call_once, &callers[i]);
    }
    sleep_ms(400);
    pthread_cancel(threads[0]); /* the oldest, queued */
    pthread_join(threads[0], NULL);
    CHECK(!callers[0].returned);
    /* the newest's turn to lead, and it is cancelled before it wakes: the
     * lead goes to the next newest */
    pthread_mutex_lock(&client->combining.mutex);
    pthread_cancel(threads[CALLERS - 1]);
    sleep_ms(100); /* it wakes to leave, and waits for the mutex */
    rl_combine_pass(&client->combining);
    pthread_mutex_unlock(&client->combining.mutex);
    pthread_join(threads[CALLERS - 1], NULL);
    CHECK(!callers[CALLERS - 1].returned);
    for (int i = 1; i < CALLERS - 1; i++) {
        pthread_join(threads[i], NULL);
        CHECK_EQ(callers[i].status, RL_OK);
    }
    pretend_out(1 - client->options.pool_size);
    nothing_out_or_queued();
    rl_result r;
    rl_spec spec = {.algorithm = RL_GCRA, .limit = 1000, .period_ms = 1000};
    CHECK_EQ(rl_acquire(client, "combine-late", "after", &spec, 1, &r), RL_OK);
}
#else
/* musl, macOS, winpthreads: a caller cancelled while it waits in the queue
 * is cancelled once its call has returned (calls.c), decided with the
 * others; nothing stays counted or queued. */
static void cancelled_callers(void)
{
    enum { CALLERS = 3 };
    caller callers[CALLERS];
    pthread_t threads[CALLERS];
    pretend_out(client->options.pool_size);
    for (int i = 0; i < CALLERS; i++) {
        callers[i] = (caller){.start_in_ms = 50 * i};
        pthread_create(&threads[i], NULL, call_once, &callers[i]);
    }
    sleep_ms(400);
    pthread_cancel(threads[0]); /* the oldest, queued */
    sleep_ms(100);
    CHECK(!callers[0].returned); /* still queued: the cancellation waits */
    rl_combine_done(client);     /* one call comes back: the queue goes in one batch call */
    for (int i = 0; i < CALLERS; i++) {
        pthread_join(threads[i], NULL);
        CHECK(callers[i].returned);
        CHECK_EQ(callers[i].status, RL_OK);
    }
    pretend_out(1 - client->options.pool_size);
    nothing_out_or_queued();
}
#endif

int main(void)
{
    redis_start(&redis);
    rl_options o = RL_OPTIONS_INIT;
    o.command_timeout_ms = 2000;
    o.pool_size = 4; /* 16 threads: at least 12 queue */
    client = open_client(&redis, &o);
    exact_counts(1);
    exact_counts(KEYS);
    nothing_out_or_queued();
    one_timeout_in_a_batch();
    cancelled_callers();
    rl_client_close(client);
    redis_stop(&redis);
    return test_summary("combine");
}
