/* A server alive but slower than its callers (docs/reliability.md, "A slow
 * server"): the backlog of commands sent to it stays bounded, and what was
 * not sent fails fast with RL_ERR_BACKLOG (or the on_error fallback).
 *
 * The asynchronous core: through Toxiproxy with 8 KB/s upstream (about 50
 * scripts/s reach Redis) two clients (raise, allow; max_in_flight 40) are
 * offered ~3,000 decisions/s. The blocking pool: a latency longer than the
 * timeout, four threads per client. What Redis counted (each decision
 * takes one permit of a fixed window: batches or not, read directly) tells
 * what was sent.
 * Usage: test_backlog ROOT (toxiproxy-server as test_faults finds it). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "toxiproxy.h"

#define CMD_MS 200
#define CAP 40
#define THREADS 4

static test_redis server;

static const rl_spec counted = {.algorithm = RL_FIXED_WINDOW, .limit = 1000000000, .period_ms = 3600000, .burst = 0};

/* decisions Redis has run on id, read directly (never through the proxy) */
static long long decisions_run(const char *id)
{
    redisContext *c = redis_raw(&server);
    long long n = redis_int(c, "HINCRBY rl:{backlog:%s}:fixed_window count 0", id);
    redisFree(c);
    return n;
}

/* waits until Redis has run everything it was sent (the count stands still) */
static long long decisions_run_settled(const char *id)
{
    long long n = decisions_run(id), last = -1;
    while (n != last) {
        sleep_ms(300);
        last = n;
        n = decisions_run(id);
    }
    return n;
}

static rl_client *client(const char *url, rl_on_error policy, int pool_size)
{
    rl_options o = RL_OPTIONS_INIT;
    o.command_timeout_ms = CMD_MS;
    o.on_error = policy;
    o.max_in_flight = CAP;
    o.pool_size = pool_size;
    rl_client *c = NULL;
    if (rl_client_open(&c, url, &o) != RL_OK) {
        fprintf(stderr, "open %s: %s\n", url, rl_errmsg());
        exit(2);
    }
    rl_result r; /* the script loaded: its first call takes three round trips */
    CHECK_OK(rl_acquire(c, "warm-up", "x", &counted, 1, &r));
    return c;
}

/* What one client's calls came to. */
typedef struct {
    long sent_ok;   /* decided by Redis */
    long timeouts;  /* sent (or maybe), no reply in time: may have run */
    long backlog;   /* never sent: RL_ERR_BACKLOG, or the fallback saying so */
    long fast;      /* of those, how many failed within CMD_MS / 2 */
    long other;
    char other_what[256];
} outcome;

static void count(outcome *o, int status, const rl_result *r, const char *error, int64_t took)
{
    int fell_back = status == RL_OK && r->fallback;
    /* "no connection within": a connection silent for two timeouts (a
     * stalled machine) was recycled and the next took long; counted as sent */
    int timed_out = status == RL_ERR_TIMEOUT || (fell_back && (strstr(error, "no reply") || strstr(error, "timed out") ||
                                                               strstr(error, "no connection")));
    if (status == RL_ERR_BACKLOG || (fell_back && strstr(error, "not sent"))) {
        o->backlog++;
        o->fast += took < CMD_MS / 2;
    } else if (timed_out) {
        o->timeouts++;
    } else if (status == RL_OK && !r->fallback && r->allowed) {
        o->sent_ok++;
    } else {
        o->other++;
        snprintf(o->other_what, sizeof o->other_what, "status %d fallback %d: %s", status, r->fallback, error);
    }
}

static void report(const char *label, const outcome *o)
{
    printf("  %-16s %ld decided by Redis, %ld timed out, %ld not sent (%ld within %d ms)\n", label, o->sent_ok,
           o->timeouts, o->backlog, o->fast, CMD_MS / 2);
    if (o->other) fprintf(stderr, "  %s: %ld unexpected, last: %s\n", label, o->other, o->other_what);
    CHECK_EQ(o->other, 0);
    CHECK(o->backlog > 0);
    CHECK(o->fast * 2 > o->backlog); /* most fail at once: they do not wait out the timeout */
}

/* ---- the asynchronous core -------------------------------------------------- */

enum { ASYNC_CALLS = 4500 };

typedef struct {
    rl_client *client;
    rl_completions *queue;
    int64_t submitted_at[ASYNC_CALLS];
    long submitted, completed;
    outcome o;
} async_client;

static void take(async_client *a)
{
    rl_completion done[256];
    size_t n = rl_completions_take(a->queue, done, 256);
    for (size_t i = 0; i < n; i++) {
        count(&a->o, done[i].status, &done[i].result, done[i].error, now_ms() - a->submitted_at[done[i].tag]);
        a->completed++;
    }
}

static void test_async(const char *url)
{
    async_client clients[2];
    rl_on_error policies[2] = {RL_ON_ERROR_RAISE, RL_ON_ERROR_ALLOW};
    for (int k = 0; k < 2; k++) {
        memset(&clients[k], 0, sizeof clients[k]);
        clients[k].client = client(url, policies[k], 1);
        CHECK_OK(rl_completions_open(&clients[k].queue));
    }
    rl_request req = {.name = "backlog", .id = "async", .spec = counted, .permits = 1, .op = RL_OP_ACQUIRE};
    toxic("bandwidth", "upstream", "{\"rate\":8}");
    long long before = decisions_run("async");
    /* 3 calls per client per ms for 1.5 s */
    for (long i = 0; i < ASYNC_CALLS; i++) {
        for (int k = 0; k < 2; k++) {
            async_client *a = &clients[k];
            rl_target target = {NULL, NULL, a->queue};
            a->submitted_at[i] = now_ms();
            if (rl_submit(a->client, &req, (uint64_t)i, &target) == RL_OK) a->submitted++;
            take(a);
        }
        if (i % 3 == 2) sleep_ms(1);
    }
    long long at_stop = decisions_run("async");
    for (int k = 0; k < 2; k++) {
        int64_t end = now_ms() + 5000;
        while (clients[k].completed < clients[k].submitted && now_ms() < end) {
            take(&clients[k]);
            sleep_ms(5);
        }
        CHECK_EQ(clients[k].completed, clients[k].submitted);
    }
    proxy_reset();
    long long after = decisions_run_settled("async");
    printf("rl_submit, %d calls per client in %d ms through 8 KB/s (max_in_flight %d):\n", ASYNC_CALLS,
           ASYNC_CALLS / 3, CAP);
    report("raise", &clients[0].o);
    report("allow", &clients[1].o);
    long sent = 0, decided = 0;
    for (int k = 0; k < 2; k++) {
        sent += clients[k].o.sent_ok + clients[k].o.timeouts;
        decided += clients[k].o.sent_ok;
    }
    printf("  Redis ran %lld decisions (%lld after the calls stopped); %ld calls sent\n", after - before, after - at_stop,
           sent);
    /* what is queued for Redis never exceeds the cap per connection */
    CHECK(after - at_stop <= 2 * CAP);
    /* what was not sent never ran: only calls that were sent are counted */
    CHECK(after - before >= decided);
    CHECK(after - before <= sent);
    for (int k = 0; k < 2; k++) {
        rl_client_close(clients[k].client);
        rl_completions_close(clients[k].queue);
    }
}

/* ---- the blocking pool -------------------------------------------------------- */

typedef struct {
    rl_client *client;
    int *stop;
    pthread_mutex_t lock;
    outcome o;
} blocking_client;

static void *blocking_run(void *arg)
{
    blocking_client *b = arg;
    while (!__atomic_load_n(b->stop, __ATOMIC_ACQUIRE)) {
        rl_result r;
        memset(&r, 0, sizeof r);
        int64_t t = now_ms();
        int rc = rl_acquire(b->client, "backlog", "blocking", &counted, 1, &r);
        char error[256];
        snprintf(error, sizeof error, "%s", rl_errmsg());
        pthread_mutex_lock(&b->lock);
        count(&b->o, rc, &r, error, now_ms() - t);
        pthread_mutex_unlock(&b->lock);
        sleep_ms(2);
    }
    return NULL;
}

static void test_blocking(const char *url)
{
    int stop = 0;
    blocking_client clients[2];
    rl_on_error policies[2] = {RL_ON_ERROR_RAISE, RL_ON_ERROR_ALLOW};
    pthread_t threads[2][THREADS];
    for (int k = 0; k < 2; k++) {
        memset(&clients[k], 0, sizeof clients[k]);
        clients[k].client = client(url, policies[k], THREADS);
        clients[k].stop = &stop;
        pthread_mutex_init(&clients[k].lock, NULL);
    }
    toxic("latency", "upstream", "{\"latency\":500}");
    long long before = decisions_run("blocking");
    int64_t started = now_ms();
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < THREADS; i++) pthread_create(&threads[k][i], NULL, blocking_run, &clients[k]);
    sleep_ms(1000);
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < THREADS; i++) pthread_join(threads[k][i], NULL);
    int64_t window = now_ms() - started;
    long long after = decisions_run_settled("blocking");
    proxy_reset();
    printf("blocking, %d threads per client for %lld ms, every reply 500 ms late (pool_size %d):\n", THREADS,
           (long long)window, THREADS);
    report("raise", &clients[0].o);
    report("allow", &clients[1].o);
    long sent = 0;
    for (int k = 0; k < 2; k++) {
        sent += clients[k].o.sent_ok + clients[k].o.timeouts;
        /* behind, a server gets one call at a time: after the first round,
         * one per timeout (without it, every thread sends one per timeout) */
        CHECK(clients[k].o.timeouts <= THREADS + 2 * window / CMD_MS);
    }
    printf("  Redis ran %lld decisions; %ld calls sent\n", after - before, sent);
    CHECK(after - before <= sent);
    for (int k = 0; k < 2; k++) {
        rl_client_close(clients[k].client);
        pthread_mutex_destroy(&clients[k].lock);
    }
}

static void stop_all(void)
{
    stop_toxiproxy();
    redis_stop(&server);
}

int main(int argc, char **argv)
{
    atexit(stop_all);
    setvbuf(stdout, NULL, _IOLBF, 0);
    start_redis(&server);
    start_toxiproxy(argc > 1 ? argv[1] : NULL);
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", create_proxy(server.port));
    test_async(url);
    test_blocking(url);
    stop_all();
    return test_summary("backlog");
}
