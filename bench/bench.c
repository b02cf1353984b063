/* Throughput of each limiter and semaphore wake-up latency, as ratios
 * against a baseline measured in the same run on the same Redis:
 *   - raw: a hiredis round trip doing the same amount of Redis work as the
 *     simplest limiter (EVALSHA of a one-INCR script), per thread;
 *   - each algorithm through rl_acquire with the same thread count.
 * Then the server time per call of each algorithm's script at permits = 1,
 * 1,000 and 1,000,000, from Redis's own INFO commandstats (EVALSHA usec per
 * call, so without the round trip): what one call costs every other client of
 * that Redis, which runs one script at a time.
 * Usage: bench [threads] [seconds]  (REDIS_URL or a local redis-server) */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include "ratelimit.h"
#include "bench_common.h"

/* find limit.lua (every algorithm's decision) among the embedded scripts */
static size_t limit_script_index(void)
{
    const char *name;
    for (size_t i = 0; i < rl_script_count(); i++)
        if (rl_script_info(i, &name, NULL) == RL_OK && !strcmp(name, "limit")) return i;
    return 0;
}

static double seconds = 2.0;
static rl_client *client;

typedef struct {
    int index;
    int algorithm; /* -1: raw INCR script, -2: raw gcra decision, -3: gcra with the spec stored in Redis,
                    * -4: gcra with two rates */
    long ops;
} worker;

static void *run(void *arg)
{
    worker *w = arg;
    double end = now_s() + seconds;
    char id[32];
    snprintf(id, sizeof id, "user-%d", w->index);
    if (w->algorithm < 0) {
        redisContext *c = redisConnect(host, port);
        const char *sha1 = NULL;
        rl_script_info(limit_script_index(), NULL, &sha1);
        redisReply *r = redisCommand(c, "SCRIPT LOAD %s", "return redis.call('INCR', KEYS[1])");
        char sha[64];
        snprintf(sha, sizeof sha, "%s", w->algorithm == -1 ? r->str : sha1);
        freeReplyObject(r);
        /* what rl_acquire sends: the short form, op 0, permits 1, limit, period, burst packed complemented */
        const int64_t numbers[5] = {0, 1, 1000000000, 1000, 1000000000};
        unsigned char packed[40];
        for (int i = 0; i < 40; i++) packed[i] = (unsigned char)(~(uint64_t)numbers[i / 8] >> (8 * (i % 8)));
        while (now_s() < end) {
            if (w->algorithm == -1) r = redisCommand(c, "EVALSHA %s 1 bench:raw:%s", sha, id);
            else r = redisCommand(c, "EVALSHA %s 1 bench:rawgcra:%s gcra %b", sha, id, packed, sizeof packed);
            freeReplyObject(r);
            w->ops++;
        }
        redisFree(c);
        return NULL;
    }
    rl_spec spec = {.algorithm = (rl_algorithm)w->algorithm, .limit = 1000000000, .period_ms = 1000, .burst = 0};
    if (w->algorithm == -3 || w->algorithm == -4) spec.algorithm = RL_GCRA;
    if (w->algorithm == -4) spec.more_count = 1, spec.more[0] = (rl_rate){.limit = 1000000000, .period_ms = 60000};
    rl_result res;
    while (now_s() < end) {
        if (rl_acquire(client, "bench", id, w->algorithm == -3 ? NULL : &spec, 1, &res) != RL_OK) {
            fprintf(stderr, "acquire: %s\n", rl_errmsg());
            exit(1);
        }
        w->ops++;
    }
    return NULL;
}

static double measure(int algorithm, int threads)
{
    pthread_t t[64];
    worker w[64];
    long total = 0;
    double start = now_s();
    for (int i = 0; i < threads; i++) {
        w[i] = (worker){i, algorithm, 0};
        pthread_create(&t[i], NULL, run, &w[i]);
    }
    for (int i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        total += w[i].ops;
    }
    return total / (now_s() - start);
}

typedef struct {
    rl_permit permit;
    double woke_at;
} waiter_ctx;

static void *wait_for_permit(void *arg)
{
    waiter_ctx *w = arg;
    rl_wait wait = {5000, NULL, NULL};
    rl_semaphore_acquire(client, "bench-sem", 1, 10000, &wait, &w->permit);
    w->woke_at = now_s();
    return NULL;
}

/* A waiter blocks on a full semaphore; time from release to its wake-up. */
static void wake_latency(int rounds)
{
    double total = 0, worst = 0;
    for (int i = 0; i < rounds; i++) {
        rl_permit hold;
        rl_wait none = {0, NULL, NULL};
        waiter_ctx w = {{0}, 0};
        pthread_t t;
        int released;
        rl_semaphore_acquire(client, "bench-sem", 1, 10000, &none, &hold);
        pthread_create(&t, NULL, wait_for_permit, &w);
        struct timespec pause = {0, 50 * 1000000L}; /* let it subscribe and queue */
        nanosleep(&pause, NULL);
        double released_at = now_s();
        rl_semaphore_release(client, "bench-sem", hold.id, &released);
        pthread_join(t, NULL);
        double ms = (w.woke_at - released_at) * 1000;
        total += ms;
        if (ms > worst) worst = ms;
        rl_semaphore_release(client, "bench-sem", w.permit.id, &released);
    }
    printf("semaphore wake-up after release: mean %.2f ms, worst %.2f ms over %d rounds\n", total / rounds, worst,
           rounds);
}

/* usec_per_call of cmdstat_evalsha, or -1 */
static double evalsha_usec_per_call(redisContext *c)
{
    double usec = -1;
    redisReply *r = redisCommand(c, "INFO commandstats");
    if (r && r->type == REDIS_REPLY_STRING) {
        const char *line = strstr(r->str, "cmdstat_evalsha:");
        const char *at = line ? strstr(line, "usec_per_call=") : NULL;
        if (at) usec = atof(at + strlen("usec_per_call="));
    }
    if (r) freeReplyObject(r);
    return usec;
}

/* Server time per acquire, admitted, at several permit counts: every call
 * takes `permits` from a limiter of 10^12 per second that can hold them. */
static void server_time(void)
{
    static const int64_t permits[] = {1, 1000, 1000000};
    redisContext *c = redisConnect(host, port);
    if (!c || c->err) {
        fprintf(stderr, "server_time: cannot connect\n");
        return;
    }
    printf("\nserver time per call (INFO commandstats, EVALSHA usec_per_call; admitted acquires)\n");
    printf("%-16s %12s %12s %12s\n", "algorithm", "permits 1", "1,000", "1,000,000");
    for (int a = 0; a < RL_ALGORITHM_COUNT; a++) {
        printf("%-16s", rl_algorithm_name((rl_algorithm)a));
        for (size_t p = 0; p < sizeof permits / sizeof permits[0]; p++) {
            rl_spec spec = {.algorithm = (rl_algorithm)a, .limit = 1000000000000LL, .period_ms = 1000, .burst = 0};
            rl_result res;
            char id[32];
            int calls = 200;
            snprintf(id, sizeof id, "cost-%lld", (long long)permits[p]);
            rl_acquire(client, "bench-cost", id, &spec, 1, &res); /* loads the script */
            freeReplyObject(redisCommand(c, "CONFIG RESETSTAT"));
            for (int i = 0; i < calls; i++) {
                if (rl_acquire(client, "bench-cost", id, &spec, permits[p], &res) != RL_OK || !res.allowed) {
                    fprintf(stderr, "\n%s: acquire(%lld): %s\n", rl_algorithm_name((rl_algorithm)a),
                            (long long)permits[p], res.allowed ? rl_errmsg() : "denied");
                    exit(1);
                }
            }
            printf(" %9.1f us", evalsha_usec_per_call(c));
        }
        printf("\n");
    }
    redisFree(c);
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 4;
    if (argc > 2) seconds = atof(argv[2]);
    if (bench_redis_from_env("bench")) return 1;
    rl_options o = RL_OPTIONS_INIT;
    o.pool_size = threads;
    if (rl_client_open(&client, url, &o)) {
        fprintf(stderr, "%s\n", rl_errmsg());
        return 1;
    }
    double base = measure(-1, threads);
    printf("%d threads, %.1f s each, against %s\n", threads, seconds, url);
    printf("%-24s %10.0f ops/s  1.00x\n", "raw EVALSHA (one INCR)", base);
    double raw_gcra = measure(-2, threads);
    printf("%-24s %10.0f ops/s  %.2fx\n", "raw EVALSHA limit.lua", raw_gcra, raw_gcra / base);
    double gcra = 0;
    for (int a = 0; a < RL_ALGORITHM_COUNT; a++) {
        double r = measure(a, threads);
        if (a == RL_GCRA) gcra = r;
        printf("%-24s %10.0f ops/s  %.2fx\n", rl_algorithm_name((rl_algorithm)a), r, r / base);
    }
    /* what a stored spec costs per decision: a cache lookup, no round trip */
    rl_spec stored = {.algorithm = RL_GCRA, .limit = 1000000000, .period_ms = 1000};
    if (rl_config_set(client, "bench", &stored) != RL_OK) {
        fprintf(stderr, "config set: %s\n", rl_errmsg());
        return 1;
    }
    double r = measure(-3, threads);
    printf("%-24s %10.0f ops/s  %.2fx  (%.2fx gcra)\n", "gcra, stored spec", r, r / base, r / gcra);
    r = measure(-4, threads);
    printf("%-24s %10.0f ops/s  %.2fx  (%.2fx gcra)\n", "gcra, two rates", r, r / base, r / gcra);
    rl_config_delete(client, "bench", NULL);
    wake_latency(20);
    server_time();
    rl_client_close(client);
    return 0;
}
