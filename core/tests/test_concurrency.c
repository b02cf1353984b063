/* Many threads on one key: a limiter never admits more than its limit. */
#include <pthread.h>
#include <string.h>

#include "harness.h"

#define THREADS 16

static test_redis redis;
static rl_client *client;

typedef struct {
    rl_spec spec;
    const char *id;
    int calls;
    int64_t now_ms;       /* 0: Redis time */
    int64_t run_until_ms; /* sustained mode: keep going until then */
    long admitted;
    long errors;
} job;

static void *worker(void *arg)
{
    job *j = arg;
    rl_request req = {.name = "conc", .id = j->id, .spec = j->spec, .permits = 1, .op = RL_OP_ACQUIRE, .max_wait_ms = 0, .now_ms = j->now_ms};
    rl_result r;
    for (int i = 0; i < j->calls || now_ms() < j->run_until_ms; i++) {
        if (rl_execute(client, &req, 1, &r) != RL_OK) j->errors++;
        else if (r.allowed) j->admitted++;
    }
    return NULL;
}

static long run_threads(job *proto, long *errors)
{
    pthread_t threads[THREADS];
    job jobs[THREADS];
    long admitted = 0;
    *errors = 0;
    for (int i = 0; i < THREADS; i++) {
        jobs[i] = *proto;
        pthread_create(&threads[i], NULL, worker, &jobs[i]);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
        admitted += jobs[i].admitted;
        *errors += jobs[i].errors;
    }
    return admitted;
}

/* A burst far beyond the limit at one instant: exactly `limit` get through. */
static void burst(rl_algorithm algorithm)
{
    long errors;
    job j = {{.algorithm = algorithm, .limit = 300, .period_ms = 60000, .burst = 0}, rl_algorithm_name(algorithm), 100, 1700000000000LL, 0, 0, 0};
    long admitted = run_threads(&j, &errors);
    CHECK_EQ(errors, 0);
    CHECK_EQ(admitted, 300);
    if (admitted != 300) fprintf(stderr, "  %s admitted %ld of 300\n", rl_algorithm_name(algorithm), admitted);
}

/* Sustained load on Redis time: never above burst + rate x elapsed. */
static void sustained(rl_algorithm algorithm)
{
    long errors;
    char id[64];
    snprintf(id, sizeof id, "sustained-%s", rl_algorithm_name(algorithm));
    int64_t start = now_ms();
    job j = {{.algorithm = algorithm, .limit = 50, .period_ms = 500, .burst = 0}, id, 0, 0, start + 1500, 0, 0};
    long admitted = run_threads(&j, &errors);
    double elapsed = (double)(now_ms() - start);
    double rate_part = 50.0 * elapsed / 500.0;
    /* windows can admit a full limit at each boundary they cross */
    double bound = algorithm == RL_FIXED_WINDOW || algorithm == RL_SLIDING_WINDOW ? 50.0 * (elapsed / 500.0 + 2)
                                                                                   : 50.0 + rate_part + 1;
    CHECK_EQ(errors, 0);
    CHECK(admitted <= (long)bound);
    /* and the limiter is not starving callers either */
    CHECK(admitted >= (long)(rate_part * 0.8));
    printf("  %-15s sustained: %ld admitted in %.0f ms (bound %.0f)\n", rl_algorithm_name(algorithm), admitted,
           elapsed, bound);
}

int main(void)
{
    rl_options o = RL_OPTIONS_INIT;
    o.command_timeout_ms = 5000;
    redis_start(&redis);
    client = open_client(&redis, &o);
    for (int a = 0; a < RL_ALGORITHM_COUNT; a++) burst((rl_algorithm)a);
    for (int a = 0; a < RL_ALGORITHM_COUNT; a++) sustained((rl_algorithm)a);
    rl_client_close(client);
    redis_stop(&redis);
    return test_summary("concurrency");
}
