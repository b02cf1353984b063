/* Blocking rl_acquire against rl_submit (automatic pipelining), in one run on
 * one Redis, with the Redis CPU each decision costs (INFO cpu). The physical
 * limit, redis-benchmark -P 16 running the same script, is printed by
 * bench/bench_async.sh beside it.
 * Usage: bench_async [seconds]   (REDIS_URL=redis://host:port)
 *        bench_async metrics [seconds] [rounds]: what metrics cost (on / off)
 *        bench_async count N off async: N decisions and nothing else, for
 *          valgrind --tool=callgrind (off, async: 0 or 1)
 *        bench_async submit IN_FLIGHT [seconds] [max_batch]: decisions/s of
 *          rl_submit alone, and per decision (us) the client's CPU, Redis's
 *          CPU and Redis's time in scripts
 *          (bench_async.sh runs it against redis-benchmark, round by round)
 *        bench_async blocking THREADS [seconds]: the same for rl_acquire
 *          from THREADS threads on one client
 *        RL_BENCH_POOL=N (submit, blocking): the client's pool_size, how many
 *          plain decisions are out before blocking callers combine */
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include "ratelimit.h"
#include "bench_common.h"

static double seconds = 3.0;
static rl_client *client;
static const rl_spec spec = {.algorithm = RL_GCRA, .limit = 1000000000, .period_ms = 1000, .burst = 0};

/* the number after field in INFO section of Redis, after the text after
 * (NULL: from the start); 0 when missing */
static double redis_info(const char *section, const char *after, const char *field)
{
    redisContext *c = redisConnect(host, port);
    redisReply *r = redisCommand(c, "INFO %s", section);
    const char *at = r && r->type == REDIS_REPLY_STRING ? r->str : NULL;
    if (at && after) at = strstr(at, after);
    if (at) at = strstr(at, field);
    double v = at ? atof(at + strlen(field)) : 0;
    freeReplyObject(r);
    redisFree(c);
    return v;
}

/* Redis's own CPU seconds (user + sys) so far */
static double redis_cpu(void)
{
    return redis_info("cpu", NULL, "used_cpu_user:") + redis_info("cpu", NULL, "used_cpu_sys:");
}

/* microseconds Redis has spent in EVALSHA calls so far (INFO commandstats) */
static double redis_script_us(void)
{
    return redis_info("commandstats", "cmdstat_evalsha:", ",usec=");
}

typedef struct {
    int index;
    long ops;
} worker;

static void *blocking(void *arg)
{
    worker *w = arg;
    char id[32];
    rl_result res;
    double end = now_s() + seconds;
    snprintf(id, sizeof id, "user-%d", w->index);
    while (now_s() < end) {
        if (rl_acquire(client, "bench-async", id, &spec, 1, &res) != RL_OK) {
            fprintf(stderr, "acquire: %s\n", rl_errmsg());
            exit(1);
        }
        w->ops++;
    }
    return NULL;
}

/* a window of in-flight requests: each completion submits the next one */
typedef struct {
    long done;
    int stop;
    long outstanding;
    rl_request req;
} window;

static void on_done(void *ctx, const rl_completion *c)
{
    window *w = ctx;
    if (c->status != RL_OK) {
        fprintf(stderr, "async: %s\n", c->error);
        exit(1);
    }
    w->done++;
    if (__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE)) {
        __atomic_sub_fetch(&w->outstanding, 1, __ATOMIC_ACQ_REL);
        return;
    }
    rl_target target = {on_done, w, NULL};
    if (rl_submit(client, &w->req, 0, &target) != RL_OK) exit(1);
}

static long last_done; /* decisions of the last run_async or run_blocking */

static double run_async(int in_flight)
{
    window w;
    memset(&w, 0, sizeof w);
    w.req = (rl_request){.name = "bench-async", .id = "user-async", .spec = spec, .permits = 1, .op = RL_OP_ACQUIRE};
    w.outstanding = in_flight;
    rl_target target = {on_done, &w, NULL};
    double start = now_s();
    for (int i = 0; i < in_flight; i++) rl_submit(client, &w.req, 0, &target);
    struct timespec pause = {(time_t)seconds, (long)((seconds - (int)seconds) * 1e9)};
    nanosleep(&pause, NULL);
    __atomic_store_n(&w.stop, 1, __ATOMIC_RELEASE);
    while (__atomic_load_n(&w.outstanding, __ATOMIC_ACQUIRE) > 0) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    last_done = __atomic_load_n(&w.done, __ATOMIC_ACQUIRE);
    return last_done / (now_s() - start);
}

static double run_blocking(int threads)
{
    pthread_t t[64];
    worker w[64];
    long total = 0;
    double start = now_s();
    for (int i = 0; i < threads; i++) {
        w[i] = (worker){i, 0};
        pthread_create(&t[i], NULL, blocking, &w[i]);
    }
    for (int i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        total += w[i].ops;
    }
    last_done = total;
    return total / (now_s() - start);
}

static void row(const char *name, double (*fn)(int), int arg, double base)
{
    double cpu = redis_cpu();
    double rate = fn(arg);
    double used = redis_cpu() - cpu;
    double per = used / (rate * seconds) * 1e6;
    printf("%-34s %10.0f decisions/s  %5.2fx  Redis CPU %5.2f us/decision\n", name, rate, base > 0 ? rate / base : 1.0,
           per);
}

/* this process's CPU seconds (user + sys, every thread) so far */
static double process_cpu(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + (double)u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, by_value);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Metrics on against off (rl_options.metrics_off): two clients on one Redis,
 * each row run with both in every round, which goes first alternating; the
 * medians over the rounds of decisions/s, of on/off within a round, and of
 * this process's CPU per decision. */
static int metrics_cost(int rounds)
{
    enum { ROWS = 3, MAX_ROUNDS = 64 };
    static const struct {
        const char *name;
        double (*fn)(int);
        int arg;
    } rows[ROWS] = {{"blocking rl_acquire, 1 thread", run_blocking, 1},
                    {"blocking rl_acquire, 4 threads", run_blocking, 4},
                    {"rl_submit, 64 in flight", run_async, 64}};
    static double rate[ROWS][2][MAX_ROUNDS], cpu[ROWS][2][MAX_ROUNDS];
    rl_client *clients[2];
    if (rounds < 1 || rounds > MAX_ROUNDS) rounds = 5;
    for (int m = 0; m < 2; m++) {
        rl_options o = RL_OPTIONS_INIT;
        o.pool_size = 64;
        o.metrics_off = m; /* 0: on (the default), 1: off */
        if (getenv("RL_BENCH_CONTROL")) o.metrics_off = 1; /* off against off: the noise floor */
        if (rl_client_open(&clients[m], url, &o)) {
            fprintf(stderr, "%s\n", rl_errmsg());
            return 1;
        }
    }
    printf("metrics on / off, gcra, %.1f s per cell, %d rounds (medians), against %s\n", seconds, rounds, url);
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < ROWS; i++) {
            for (int k = 0; k < 2; k++) {
                int m = (r + k) % 2;
                client = clients[m];
                double c0 = process_cpu(), t0 = now_s();
                rate[i][m][r] = rows[i].fn(rows[i].arg);
                cpu[i][m][r] = (process_cpu() - c0) / (rate[i][m][r] * (now_s() - t0)) * 1e6;
            }
        }
        fprintf(stderr, "round %d done\n", r + 1);
    }
    /* on / off of each round (neighbours in time: the machine's drift cancels), then the median */
    printf("%-32s %12s %12s %7s %16s %16s\n", "row", "on /s", "off /s", "on/off", "CPU on us/dec", "CPU off us/dec");
    for (int i = 0; i < ROWS; i++) {
        double ratio[MAX_ROUNDS];
        for (int r = 0; r < rounds; r++) ratio[r] = rate[i][0][r] / rate[i][1][r];
        double on = median(rate[i][0], rounds), off = median(rate[i][1], rounds);
        printf("%-32s %12.0f %12.0f %7.3f %16.2f %16.2f\n", rows[i].name, on, off, median(ratio, rounds),
               median(cpu[i][0], rounds), median(cpu[i][1], rounds));
    }
    client = NULL;
    for (int m = 0; m < 2; m++) rl_client_close(clients[m]);
    return 0;
}

/* n decisions on a client with metrics on or off, blocking or 64 in flight */
static int count_calls(long n, int off, int async)
{
    rl_options o = RL_OPTIONS_INIT;
    o.metrics_off = off;
    if (rl_client_open(&client, url, &o)) return 1;
    rl_request req = {.name = "bench-count", .id = "u", .spec = spec, .permits = 1, .op = RL_OP_ACQUIRE};
    rl_result res;
    rl_completions *q = NULL;
    rl_completion got[64];
    long sent = 0, done = 0;
    if (async && rl_completions_open(&q)) return 1;
    rl_target target = {NULL, NULL, q};
    while (done < n) {
        if (!async) {
            if (rl_acquire(client, req.name, req.id, &spec, 1, &res)) return 1;
            done++;
            continue;
        }
        for (; sent < n && sent - done < 64; sent++)
            if (rl_submit(client, &req, 0, &target)) return 1;
        struct pollfd pfd = {rl_completions_fd(q), POLLIN, 0};
        poll(&pfd, 1, 100);
        done += (long)rl_completions_take(q, got, 64);
    }
    rl_client_close(client);
    rl_completions_close(q);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 4 && !strcmp(argv[1], "count")) {
        if (getenv("REDIS_URL")) url = getenv("REDIS_URL");
        return count_calls(atol(argv[2]), atoi(argv[3]), atoi(argv[4]));
    }
    int blocking_only = argc > 2 && !strcmp(argv[1], "blocking");
    if (argc > 2 && (!strcmp(argv[1], "submit") || blocking_only)) {
        if (getenv("REDIS_URL")) url = getenv("REDIS_URL");
        if (argc > 3) seconds = atof(argv[3]);
        rl_options o = RL_OPTIONS_INIT;
        if (argc > 4) o.max_batch = atoi(argv[4]);
        if (getenv("RL_BENCH_POOL")) o.pool_size = atoi(getenv("RL_BENCH_POOL"));
        if (rl_client_open(&client, url, &o) || sscanf(url, "redis://%63[^:]:%d", host, &port) < 2) {
            fprintf(stderr, "%s\n", rl_errmsg());
            return 1;
        }
        double timed = seconds;
        seconds = 0.2;
        (blocking_only ? run_blocking : run_async)(1); /* connected, script loaded: not timed */
        seconds = timed;
        double server = redis_cpu(), script_us = redis_script_us();
        double cpu = process_cpu(), rate = (blocking_only ? run_blocking : run_async)(atoi(argv[2]));
        cpu = process_cpu() - cpu;
        /* decisions/s, then per decision (us): this process's CPU, Redis's
         * CPU (INFO cpu) and its time in scripts (INFO commandstats) */
        printf("%.0f %.2f %.2f %.2f\n", rate, cpu / last_done * 1e6, (redis_cpu() - server) / last_done * 1e6,
               (redis_script_us() - script_us) / last_done);
        rl_client_close(client);
        return 0;
    }
    int metrics = argc > 1 && !strcmp(argv[1], "metrics");
    if (metrics) {
        argv++;
        argc--;
    }
    if (argc > 1) seconds = atof(argv[1]);
    if (getenv("REDIS_URL")) url = getenv("REDIS_URL");
    if (sscanf(url, "redis://%63[^:]:%d", host, &port) < 1) {
        fprintf(stderr, "bench_async needs a redis://host:port URL\n");
        return 1;
    }
    if (metrics) return metrics_cost(argc > 2 ? atoi(argv[2]) : 5);
    rl_options o = RL_OPTIONS_INIT;
    o.pool_size = 64;
    if (rl_client_open(&client, url, &o)) {
        fprintf(stderr, "%s\n", rl_errmsg());
        return 1;
    }
    double base = run_blocking(1);
    printf("gcra, %.1f s per row, against %s\n", seconds, url);
    printf("%-34s %10.0f decisions/s  1.00x\n", "blocking rl_acquire, 1 thread", base);
    row("blocking rl_acquire, 4 threads", run_blocking, 4, base);
    row("blocking rl_acquire, 64 threads", run_blocking, 64, base);
    row("rl_submit, 1 in flight", run_async, 1, base);
    row("rl_submit, 64 in flight", run_async, 64, base);
    row("rl_submit, 1024 in flight", run_async, 1024, base);
    rl_client_close(client);
    return 0;
}
