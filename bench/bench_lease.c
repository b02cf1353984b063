/* Leases on one hot key (issue 25): decisions/s of a gcra limiter with
 * lease_ms = 50 against the same limiter without, in one run on one Redis,
 * and decisions per Redis script call (INFO commandstats: EVALSHA calls,
 * LEASE and GIVE_BACK included, over decisions made). Rows: one thread; 8 threads on one client;
 * rl_submit with 64 in flight. The limit is generous (1,000,000/s, burst
 * 10^9): every decision is an admission, so the ratio is the cost of a
 * decision, not of a denial.
 * Usage: bench_lease [seconds]  (REDIS_URL, default redis://127.0.0.1:6379) */
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include "ratelimit.h"
#include "bench_common.h"

static double seconds = 2.0;
static rl_client *client;

static long long scripts_run(void)
{
    redisContext *c = redisConnect(host, port);
    redisReply *r = c && !c->err ? redisCommand(c, "INFO commandstats") : NULL;
    const char *at = r && r->type == REDIS_REPLY_STRING ? strstr(r->str, "cmdstat_evalsha:calls=") : NULL;
    long long n = at ? atoll(at + strlen("cmdstat_evalsha:calls=")) : 0;
    if (r) freeReplyObject(r);
    if (c) redisFree(c);
    return n;
}

typedef struct {
    rl_request req;
    long decisions, allowed;
    int in_flight; /* 0: blocking */
} worker;

static void run_async(worker *w, double end)
{
    rl_completions *q;
    rl_completion done[256];
    if (rl_completions_open(&q)) exit(1);
    rl_target t = {NULL, NULL, q};
    long flying = 0;
    for (int i = 0; i < w->in_flight; i++, flying++)
        if (rl_submit(client, &w->req, 0, &t)) exit(1);
    while (flying) {
        struct pollfd p = {rl_completions_fd(q), POLLIN, 0};
        poll(&p, 1, 100);
        size_t n = rl_completions_take(q, done, 256);
        int more = now_s() < end;
        for (size_t k = 0; k < n; k++) {
            flying--;
            w->decisions++;
            w->allowed += done[k].status == RL_OK && done[k].result.allowed;
            if (more) {
                if (rl_submit(client, &w->req, 0, &t)) exit(1);
                flying++;
            }
        }
    }
    rl_completions_close(q);
}

static void *run(void *arg)
{
    worker *w = arg;
    double end = now_s() + seconds;
    if (w->in_flight) {
        run_async(w, end);
        return NULL;
    }
    rl_result r;
    while (now_s() < end) {
        for (int i = 0; i < 64; i++) { /* the clock read 64 times less */
            if (rl_execute(client, &w->req, 1, &r)) exit(1);
            w->decisions++;
            w->allowed += r.allowed;
        }
    }
    return NULL;
}

typedef struct {
    double per_s, scripts_per_decision, allowed;
} figures;

static figures measure(int threads, int in_flight, int64_t lease_ms, const char *id)
{
    worker w[64];
    pthread_t t[64];
    long long scripts = scripts_run();
    double start = now_s();
    for (int i = 0; i < threads; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].req.name = "bench-lease";
        w[i].req.id = id;
        w[i].req.spec = (rl_spec){.algorithm = RL_GCRA, .limit = 1000000, .period_ms = 1000, .burst = 1000000000};
        w[i].req.permits = 1;
        w[i].req.op = RL_OP_ACQUIRE;
        w[i].req.lease_ms = lease_ms;
        w[i].in_flight = in_flight;
        pthread_create(&t[i], NULL, run, &w[i]);
    }
    long decisions = 0, allowed = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        decisions += w[i].decisions;
        allowed += w[i].allowed;
    }
    double elapsed = now_s() - start;
    rl_leases_give_back(client, NULL);
    figures f = {decisions / elapsed, (double)(scripts_run() - scripts) / (double)decisions,
                 (double)allowed / (double)decisions};
    return f;
}

static void row(const char *what, int threads, int in_flight)
{
    char id[64];
    snprintf(id, sizeof id, "%s-plain", what);
    figures plain = measure(threads, in_flight, 0, id);
    snprintf(id, sizeof id, "%s-lease", what);
    figures leased = measure(threads, in_flight, 50, id);
    printf("%-26s %11.0f %11.0f %7.1fx %9.2f %11.0f %8.0f%%\n", what, plain.per_s, leased.per_s,
           leased.per_s / plain.per_s, 1 / plain.scripts_per_decision, 1 / leased.scripts_per_decision,
           100 * leased.allowed);
}

int main(int argc, char **argv)
{
    if (argc > 1) seconds = atof(argv[1]);
    if (bench_redis_from_env("bench_lease")) return 1;
    rl_options o = RL_OPTIONS_INIT;
    o.pool_size = 8;
    if (rl_client_open(&client, url, &o)) {
        fprintf(stderr, "%s\n", rl_errmsg());
        return 1;
    }
    printf("gcra 1000000/s burst 10^9, one key, %.1f s per measure, against %s\n", seconds, url);
    printf("%-26s %11s %11s %8s %9s %11s %9s\n", "", "no lease/s", "lease 50/s", "ratio", "d/script",
           "leased d/s.", "allowed");
    row("1 thread", 1, 0);
    row("8 threads, one client", 8, 0);
    row("rl_submit, 64 in flight", 1, 64);
    rl_client_close(client);
    return 0;
}
