/* Injected faults (docs/reliability.md, "Faults"): a real proxy (Toxiproxy)
 * between the clients and Redis, and Redis itself made slow, stopped, full,
 * busy, flushed or read-only. For each fault, five clients run at once
 * (blocking raise / allow / deny, rl_submit raise / deny) and every call
 * must:
 *   - return a status the matrix allows, or the policy's decision, within
 *     command_timeout_ms + MARGIN_MS (never a hang, never a crash);
 *   - never consume twice: the count Redis holds afterwards for the key is
 *     between the admissions the clients saw and those plus the calls whose
 *     outcome was unknown (timed out or cut off after sending), and exactly
 *     one of the two ends where the fault decides which, give or take the
 *     failed calls the machine itself stalled (those may have run or not);
 *   - come back by itself: decisions from Redis again within
 *     command_timeout_ms + reconnect_max_ms + MARGIN_MS of the fault ending.
 * Usage: test_faults ROOT (toxiproxy-server from $RL_TOXIPROXY_SERVER, else
 * ROOT/build/deps/toxiproxy/, else PATH; scripts/deps.sh builds it). Without
 * one it exits SKIPPED (77, ctest's SKIP_RETURN_CODE), or fails when
 * RL_REQUIRE_TOXIPROXY=1 (scripts/test.sh); RL_FAULTS_VERBOSE=1 prints every
 * call. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "toxiproxy.h"

#define CMD_MS 250
#define CONNECT_MS 300
#define RECONNECT_MS 100
/* scheduling, and ASan / a loaded 2-core machine */
#define MARGIN_MS 250
/* how long each fault lasts while the clients run */
#define WINDOW_MS 700

static test_redis master, replica;
static int proxy_port;

/* ---- Redis as the test sees it (direct, never through the proxy) ------------- */

static void raw_cmd(const test_redis *r, const char *cmd)
{
    redisContext *c = redis_raw(r);
    redisReply *reply = redisCommand(c, cmd);
    if (!reply || reply->type == REDIS_REPLY_ERROR) {
        fprintf(stderr, "%s: %s\n", cmd, reply ? reply->str : c->errstr);
        exit(2);
    }
    freeReplyObject(reply);
    redisFree(c);
}

static const rl_spec counted = {.algorithm = RL_FIXED_WINDOW, .limit = 1000000000, .period_ms = 3600000, .burst = 0};

/* permits taken from the fixed window of (faults, id) */
static long long count_in(const test_redis *r, rl_client *c, const char *id)
{
    char key[256];
    rl_key(c, "faults", id, RL_FIXED_WINDOW, key, sizeof key);
    redisContext *raw = redis_raw(r);
    redisReply *reply = redisCommand(raw, "HGET %s count", key);
    long long n = reply && reply->type == REDIS_REPLY_STRING ? atoll(reply->str) : 0;
    if (reply) freeReplyObject(reply);
    redisFree(raw);
    return n;
}

/* ---- the clients ----------------------------------------------------------------- */

typedef struct {
    const char *label;
    rl_on_error policy;
    int async;
    rl_client *client;
    rl_completions *queue;
    /* one fault at a time */
    const char *id;
    const char *redis_error; /* the RL_ERR_REDIS the fault may cause ("OOM"...), else NULL */
    volatile int cleared;
    int64_t cleared_at;
    pthread_t thread;
    long calls, allowed, uncertain, timeouts, connection, redis_errors, fallbacks, wrong, hangs;
    long stalled; /* of the uncertain: the machine stalled during the call (STALLED_MS) */
    int64_t worst_ms, least_ms, recovered_ms;
    int64_t slowest_failure_ms; /* of the fault's failed calls, less the machine's stalls meanwhile */
    char wrong_what[240];
} worker;

enum { WORKERS = 5 };
typedef struct {
    worker w[WORKERS];
} rig;

static void rig_open(rig *g, const char *url)
{
    static const struct {
        const char *label;
        rl_on_error policy;
        int async;
    } kinds[WORKERS] = {{"blocking raise", RL_ON_ERROR_RAISE, 0},
                        {"blocking allow", RL_ON_ERROR_ALLOW, 0},
                        {"blocking deny", RL_ON_ERROR_DENY, 0},
                        {"rl_submit raise", RL_ON_ERROR_RAISE, 1},
                        {"rl_submit deny", RL_ON_ERROR_DENY, 1}};
    memset(g, 0, sizeof *g);
    for (int i = 0; i < WORKERS; i++) {
        worker *w = &g->w[i];
        rl_options o = RL_OPTIONS_INIT;
        o.connect_timeout_ms = CONNECT_MS;
        o.command_timeout_ms = CMD_MS;
        o.reconnect_max_ms = RECONNECT_MS;
        o.pool_size = 2;
        o.on_error = kinds[i].policy;
        w->label = kinds[i].label;
        w->policy = kinds[i].policy;
        w->async = kinds[i].async;
        if (rl_client_open(&w->client, url, &o) != RL_OK) {
            fprintf(stderr, "open %s: %s\n", url, rl_errmsg());
            exit(2);
        }
        if (w->async && rl_completions_open(&w->queue) != RL_OK) exit(2);
    }
}

static void rig_close(rig *g)
{
    for (int i = 0; i < WORKERS; i++) {
        rl_client_close(g->w[i].client);
        rl_completions_close(g->w[i].queue);
    }
}

/* One decision on w's path: status, result, and the error text. */
static int decide(worker *w, rl_result *r, char *error, size_t error_size)
{
    if (!w->async) {
        int rc = rl_acquire(w->client, "faults", w->id, &counted, 1, r);
        snprintf(error, error_size, "%s", rl_errmsg());
        return rc;
    }
    rl_request req = {.name = "faults", .id = w->id, .spec = counted, .permits = 1, .op = RL_OP_ACQUIRE};
    rl_target target = {NULL, NULL, w->queue};
    int rc = rl_submit(w->client, &req, 7, &target);
    if (rc) {
        snprintf(error, error_size, "rl_submit: %s", rl_errmsg());
        return rc;
    }
    rl_completion done;
    int64_t end = now_ms() + 5000;
    while (now_ms() < end) {
        struct pollfd pfd = {rl_completions_fd(w->queue), POLLIN, 0};
        poll(&pfd, 1, 50);
        if (rl_completions_take(w->queue, &done, 1) == 1) {
            *r = done.result;
            snprintf(error, error_size, "%s", done.error);
            return done.status;
        }
    }
    w->hangs++;
    snprintf(error, error_size, "no completion within 5 s");
    return -100;
}

static void wrong(worker *w, const char *fmt, int a, const char *detail)
{
    w->wrong++;
    if (!w->wrong_what[0]) {
        char what[120];
        snprintf(what, sizeof what, fmt, a);
        snprintf(w->wrong_what, sizeof w->wrong_what, "%s (%.100s)", what, detail);
    }
}

/* RL_FAULTS_VERBOSE=1: every call, its status, time and message */
static int verbose;
/* The machine's own stalls (a loaded 2-core box, sanitizers): a thread that
 * sleeps 5 ms at a time records how late it wakes up; a call may take that
 * much longer than its bound, no more. Reset for each fault. */
static int64_t stall_ms;
/* all the lateness so far, and when the monitor last woke: what a call lost */
static int64_t stalled_total_ms, monitor_woke_ms;
static int monitoring = 1;
static void *monitor(void *arg)
{
    (void)arg;
    __atomic_store_n(&monitor_woke_ms, now_ms(), __ATOMIC_RELEASE);
    while (__atomic_load_n(&monitoring, __ATOMIC_ACQUIRE)) {
        int64_t t = now_ms();
        sleep_ms(5);
        int64_t woke = now_ms(), late = woke - t - 5;
        if (late > __atomic_load_n(&stall_ms, __ATOMIC_RELAXED)) __atomic_store_n(&stall_ms, late, __ATOMIC_RELAXED);
        if (late > 0) __atomic_add_fetch(&stalled_total_ms, late, __ATOMIC_RELEASE);
        __atomic_store_n(&monitor_woke_ms, woke, __ATOMIC_RELEASE);
    }
    return NULL;
}

/* The lateness recorded so far, counting a stall the monitor is still in. */
static int64_t stalled_so_far(void)
{
    int64_t pending = now_ms() - __atomic_load_n(&monitor_woke_ms, __ATOMIC_ACQUIRE) - 5;
    return __atomic_load_n(&stalled_total_ms, __ATOMIC_ACQUIRE) + (pending > 0 ? pending : 0);
}

/* A call that lost this much to the machine's own stalls may have failed
 * (timed out) because of them, whatever the fault: its outcome is unknown
 * either way. A fifth of the timeout: the monitor, asleep most of the time,
 * is held up less than a busy worker. */
#define STALLED_MS (CMD_MS / 5)

/* set just before a fault is cleared */
static int clearing;

/* Calls until the fault is cleared and one decision came from Redis again
 * (or 3 s after the clear: not recovered). */
static void *work(void *arg)
{
    worker *w = arg;
    for (;;) {
        rl_result r;
        char error[200];
        memset(&r, 0, sizeof r);
        int cleared = __atomic_load_n(&w->cleared, __ATOMIC_ACQUIRE);
        int64_t t = now_ms(), stalled_before = stalled_so_far();
        int rc = decide(w, &r, error, sizeof error);
        int64_t took = now_ms() - t, stalled = stalled_so_far() - stalled_before;
        w->calls++;
        if (verbose) fprintf(stderr, "  %s, %s: status %d, fallback %d, %lld ms: %s\n", w->id, w->label, rc, r.fallback,
                             (long long)took, rc || r.fallback ? error : "");
        if (took > w->worst_ms) w->worst_ms = took;
        /* a call the clear overtook is not the fault's */
        int overtaken = __atomic_load_n(&clearing, __ATOMIC_ACQUIRE);
        if (!cleared && !overtaken && (took < w->least_ms || w->least_ms < 0)) w->least_ms = took;
        if (!cleared && !overtaken && (rc || r.fallback) && took - stalled > w->slowest_failure_ms)
            w->slowest_failure_ms = took - stalled;
        if (rc == RL_OK && !r.fallback) {
            if (!r.allowed) wrong(w, "denied by Redis (remaining %d)", (int)r.remaining, error);
            w->allowed += r.allowed;
            if (cleared) {
                w->recovered_ms = now_ms() - w->cleared_at;
                return NULL;
            }
        } else if (rc == RL_OK) { /* the policy decided: Redis could not be reached in time */
            w->fallbacks++;
            w->uncertain++;
            w->stalled += stalled >= STALLED_MS;
            if (w->policy == RL_ON_ERROR_RAISE) wrong(w, "fallback under raise", 0, error);
            if (r.allowed != (w->policy == RL_ON_ERROR_ALLOW)) wrong(w, "fallback allowed=%d", r.allowed, error);
            if (!strstr(error, "timed out") && !strstr(error, "no reply") && !strstr(error, "connect") &&
                !strstr(error, "unreachable") && !strstr(error, "lost") && !strstr(error, "reset") &&
                !strstr(error, "no connection"))
                wrong(w, "fallback with an unexpected message", 0, error);
        } else if (rc == RL_ERR_TIMEOUT || rc == RL_ERR_CONNECTION) {
            w->uncertain++;
            w->stalled += stalled >= STALLED_MS;
            if (rc == RL_ERR_TIMEOUT) w->timeouts++;
            else w->connection++;
            if (w->policy != RL_ON_ERROR_RAISE) wrong(w, "status %d under a fallback policy", rc, error);
        } else if (rc == RL_ERR_REDIS) {
            w->redis_errors++;
            /* an error reply proves the script did not run (or wrote nothing) */
            if (!w->redis_error || strncmp(error, w->redis_error, strlen(w->redis_error)) != 0)
                wrong(w, "RL_ERR_REDIS", 0, error);
        } else {
            wrong(w, "status %d", rc, error);
            if (rc == -100) return NULL; /* hung: a later completion would confuse the count */
        }
        if (cleared && now_ms() - w->cleared_at > 3000) return NULL;
        sleep_ms(10);
    }
}

/* ---- the matrix ------------------------------------------------------------------ */

/* "unknown" is every call that timed out or was cut off after sending;
 * "stalled" those of them the machine itself may have failed (STALLED_MS):
 * they may have run or not, whatever the fault does */
typedef enum {
    COUNT_EXACT,   /* nothing the fault failed reached Redis: admissions <= Redis <= admissions + stalled */
    COUNT_ALL_RAN, /* everything the fault failed had run: Redis <= admissions + unknown, >= that - stalled */
    COUNT_RANGE,   /* admissions <= Redis <= admissions + unknown */
    COUNT_AT_MOST  /* state was wiped meanwhile: Redis <= admissions */
} count_rule;

typedef struct {
    const char *name;
    void (*inject)(void);
    void (*clear)(void);
    int must_fail;           /* the fault shows: some call fails or falls back */
    int may_time_out;        /* timeouts / connection errors (or the policy) are right */
    const char *redis_error; /* RL_ERR_REDIS with this prefix is right */
    count_rule count;
    int64_t least_ms; /* a call takes at least this (latency shows), 0: no bound */
    int64_t fails_within_ms; /* fails fast: each failed call returns within this (plus the machine's stalls), 0: no bound */
} fault;

static const test_redis *counted_on = &master;

static void run_fault(rig *g, const fault *f)
{
    rl_client *any = g->w[0].client;
    long long before = count_in(counted_on, any, f->name);
    for (int i = 0; i < WORKERS; i++) {
        worker *w = &g->w[i];
        memset((char *)w + offsetof(worker, cleared), 0, sizeof *w - offsetof(worker, cleared));
        w->id = f->name;
        w->redis_error = f->redis_error;
        w->least_ms = -1;
        w->recovered_ms = -1;
    }
    __atomic_store_n(&clearing, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&stall_ms, 0, __ATOMIC_RELAXED);
    f->inject();
    for (int i = 0; i < WORKERS; i++) pthread_create(&g->w[i].thread, NULL, work, &g->w[i]);
    sleep_ms(WINDOW_MS);
    __atomic_store_n(&clearing, 1, __ATOMIC_RELEASE);
    f->clear();
    int64_t cleared_at = now_ms();
    for (int i = 0; i < WORKERS; i++) {
        g->w[i].cleared_at = cleared_at;
        __atomic_store_n(&g->w[i].cleared, 1, __ATOMIC_RELEASE);
    }
    long allowed = 0, uncertain = 0, stalled = 0, failed = 0;
    printf("  %-26s", f->name);
    for (int i = 0; i < WORKERS; i++) {
        worker *w = &g->w[i];
        pthread_join(w->thread, NULL);
        int64_t stall = __atomic_load_n(&stall_ms, __ATOMIC_RELAXED), max_ms = CMD_MS + MARGIN_MS + stall;
        allowed += w->allowed;
        uncertain += w->uncertain;
        stalled += w->stalled;
        failed += w->uncertain + w->redis_errors;
        if (w->wrong) fprintf(stderr, "%s, %s: %ld wrong outcomes, first: %s\n", f->name, w->label, w->wrong, w->wrong_what);
        CHECK_EQ(w->wrong, 0);
        CHECK_EQ(w->hangs, 0);
        /* only the machine's stalls may fail a call the fault does not */
        if (!f->may_time_out && w->uncertain > w->stalled)
            fprintf(stderr, "%s, %s: %ld timeouts / connection errors / fallbacks, %ld of them stalled\n", f->name,
                    w->label, w->uncertain, w->stalled);
        if (!f->may_time_out) CHECK_EQ(w->uncertain - w->stalled, 0);
        if (w->worst_ms > max_ms)
            fprintf(stderr, "%s, %s: a call took %lld ms (the machine stalled up to %lld ms)\n", f->name, w->label,
                    (long long)w->worst_ms, (long long)stall);
        CHECK(w->worst_ms <= max_ms);
        if (f->least_ms && w->least_ms < f->least_ms) fprintf(stderr, "%s, %s: a call took %lld ms\n", f->name, w->label, (long long)w->least_ms);
        if (f->least_ms) CHECK(w->least_ms >= f->least_ms);
        if (f->fails_within_ms && w->slowest_failure_ms > f->fails_within_ms)
            fprintf(stderr, "%s, %s: a failed call took %lld ms besides the machine's stalls\n", f->name, w->label,
                    (long long)w->slowest_failure_ms);
        if (f->fails_within_ms) CHECK(w->slowest_failure_ms <= f->fails_within_ms);
        /* back by itself: the first call after the fault may still be in it */
        if (w->recovered_ms < 0 || w->recovered_ms > CMD_MS + RECONNECT_MS + MARGIN_MS + stall)
            fprintf(stderr, "%s, %s: recovered after %lld ms (the machine stalled up to %lld ms)\n", f->name, w->label,
                    (long long)w->recovered_ms, (long long)stall);
        CHECK(w->recovered_ms >= 0 && w->recovered_ms <= CMD_MS + RECONNECT_MS + MARGIN_MS + stall);
        printf(" %s:%ld/%ld", w->label + (w->async ? 10 : 9), w->calls - w->allowed, w->calls);
    }
    if (f->must_fail) CHECK(failed > 0);
    long long in_redis = count_in(counted_on, any, f->name) - before;
    int ok = 0;
    switch (f->count) {
    case COUNT_EXACT: ok = in_redis >= allowed && in_redis <= allowed + stalled; break;
    case COUNT_ALL_RAN: ok = in_redis >= allowed + uncertain - stalled && in_redis <= allowed + uncertain; break;
    case COUNT_RANGE: ok = in_redis >= allowed && in_redis <= allowed + uncertain; break;
    case COUNT_AT_MOST: ok = in_redis <= allowed; break;
    }
    int64_t worst = 0, slowest_back = 0;
    for (int i = 0; i < WORKERS; i++) {
        if (g->w[i].worst_ms > worst) worst = g->w[i].worst_ms;
        if (g->w[i].recovered_ms > slowest_back) slowest_back = g->w[i].recovered_ms;
    }
    printf("  (failed/calls) | Redis %lld, admitted %ld, unknown %ld (%ld stalled) | slowest call %lld ms, back in %lld ms"
           " (stalls %lld ms)\n",
           in_redis, allowed, uncertain, stalled, (long long)worst, (long long)slowest_back,
           (long long)__atomic_load_n(&stall_ms, __ATOMIC_RELAXED));
    if (!ok)
        fprintf(stderr, "%s: Redis counted %lld, the clients were admitted %ld with %ld unknown, %ld stalled (rule %d)\n",
                f->name, in_redis, allowed, uncertain, stalled, (int)f->count);
    CHECK(ok);
}

/* -- proxy faults -- */
static void latency_low(void) { toxic("latency", "downstream", "{\"latency\":60}"); }
static void latency_high(void) { toxic("latency", "downstream", "{\"latency\":800}"); }
static void thin_pipe(void)
{
    /* each call must load the 24 KB script through 2 KB/s */
    raw_cmd(&master, "SCRIPT FLUSH");
    toxic("bandwidth", "upstream", "{\"rate\":2}");
    toxic("bandwidth", "downstream", "{\"rate\":2}");
}
static void slow_drip(void)
{
    /* every reply, a byte each 30 ms: each read returns something, the whole never comes in time */
    toxic("slicer", "downstream", "{\"average_size\":1,\"size_variation\":0,\"delay\":30000}");
}
static void cut_mid_reply(void) { toxic("limit_data", "downstream", "{\"bytes\":12}"); }
static void reset_peer(void) { toxic("reset_peer", "upstream", "{\"timeout\":0}"); }
static void kill_connections(void) { raw_cmd(&master, "CLIENT KILL TYPE normal SKIPME yes"); }
static void never_answers(void)
{
    /* fresh connections that the proxy accepts and nothing ever answers */
    kill_connections();
    toxic("timeout", "upstream", "{\"timeout\":0}");
}
static void half_open(void)
{
    /* the pooled connections stay open, and everything sent on them vanishes */
    toxic("timeout", "upstream", "{\"timeout\":0}");
    toxic("timeout", "downstream", "{\"timeout\":0}");
}
static void proxy_down(void) { tox("POST", "/proxies/redis", "{\"enabled\":false}"); }

/* -- Redis faults -- */
/* WRITE, as a failover pauses: EVALSHA may write, so it waits */
static void client_pause(void) { raw_cmd(&master, "CLIENT PAUSE 100000 WRITE"); }
static void client_unpause(void) { raw_cmd(&master, "CLIENT UNPAUSE"); }
static void sigstop(void) { kill(master.pid, SIGSTOP); }
static void sigcont(void) { kill(master.pid, SIGCONT); }

static pthread_t blocker;
static void *debug_sleep_run(void *arg)
{
    (void)arg;
    redisContext *c = redis_raw(&master);
    redisReply *reply = redisCommand(c, "DEBUG SLEEP 0.9");
    if (reply) freeReplyObject(reply);
    redisFree(c);
    return NULL;
}
static void debug_sleep(void)
{
    pthread_create(&blocker, NULL, debug_sleep_run, NULL);
    sleep_ms(20);
}
static void join_blocker(void) { pthread_join(blocker, NULL); }

static void oom(void)
{
    raw_cmd(&master, "CONFIG SET maxmemory-policy noeviction");
    raw_cmd(&master, "CONFIG SET maxmemory 1");
}
static void oom_end(void) { raw_cmd(&master, "CONFIG SET maxmemory 0"); }

static void *busy_script_run(void *arg)
{
    (void)arg;
    redisContext *c = redis_raw(&master);
    redisReply *reply = redisCommand(c, "EVAL %s 0", "while true do end");
    if (reply) freeReplyObject(reply); /* "ERR ... Script killed by user" */
    redisFree(c);
    return NULL;
}
static void busy_script(void)
{
    /* others hear BUSY 100 ms into the script, not 5 s */
    raw_cmd(&master, "CONFIG SET busy-reply-threshold 100");
    pthread_create(&blocker, NULL, busy_script_run, NULL);
    sleep_ms(20);
}
static void script_kill(void)
{
    raw_cmd(&master, "SCRIPT KILL");
    join_blocker();
}

static volatile int churning;
static const char *churn_command;
static void *churn_run(void *arg)
{
    (void)arg;
    redisContext *c = redis_raw(&master);
    while (__atomic_load_n(&churning, __ATOMIC_ACQUIRE)) {
        redisReply *reply = redisCommand(c, churn_command);
        if (reply) freeReplyObject(reply);
        sleep_ms(25);
    }
    redisFree(c);
    return NULL;
}
static void churn(const char *command)
{
    churn_command = command;
    __atomic_store_n(&churning, 1, __ATOMIC_RELEASE);
    pthread_create(&blocker, NULL, churn_run, NULL);
}
static void flushall_churn(void) { churn("FLUSHALL"); }
static void script_flush_churn(void) { churn("SCRIPT FLUSH"); }
static void churn_end(void)
{
    __atomic_store_n(&churning, 0, __ATOMIC_RELEASE);
    join_blocker();
}

static void nothing(void) {}
static void promote_replica(void) { raw_cmd(&replica, "REPLICAOF NO ONE"); }

static const fault proxy_faults[] = {
    /* below the timeout: nothing fails (1 ms of rounding) */
    {"latency 60 ms", latency_low, proxy_reset, 0, 0, NULL, COUNT_EXACT, 59, 0},
    /* each call was sent whole and ran once: no reply is not a reason to send again */
    {"latency 800 ms", latency_high, proxy_reset, 1, 1, NULL, COUNT_ALL_RAN, 0, 0},
    {"bandwidth 2 KB/s", thin_pipe, proxy_reset, 1, 1, NULL, COUNT_RANGE, 0, 0},
    {"slow drip (1 B / 30 ms)", slow_drip, proxy_reset, 1, 1, NULL, COUNT_ALL_RAN, 0, 0},
    /* the proxy may cut a connection before or after passing the call on */
    {"cut mid-reply", cut_mid_reply, proxy_reset, 1, 1, NULL, COUNT_RANGE, 0, 0},
    {"reset (RST) on send", reset_peer, proxy_reset, 1, 1, NULL, COUNT_RANGE, 0, 0},
    {"accepts, never answers", never_answers, proxy_heal, 1, 1, NULL, COUNT_EXACT, 0, 0},
    {"half-open connections", half_open, proxy_heal, 1, 1, NULL, COUNT_EXACT, 0, 0},
    /* refused: fails at once, and between reconnect attempts without trying
     * (not a connect timeout per call: that long at least, stalls aside) */
    {"proxy down (refused)", proxy_down, proxy_reset, 1, 1, NULL, COUNT_EXACT, 0, CONNECT_MS - 1},
    {"CLIENT PAUSE WRITE", client_pause, client_unpause, 1, 1, NULL, COUNT_RANGE, 0, 0},
    {"SIGSTOP / SIGCONT", sigstop, sigcont, 1, 1, NULL, COUNT_RANGE, 0, 0},
    {"DEBUG SLEEP 0.9", debug_sleep, join_blocker, 1, 1, NULL, COUNT_RANGE, 0, 0},
    /* error replies: the script wrote nothing, the policy does not apply */
    {"maxmemory reached (OOM)", oom, oom_end, 1, 0, "OOM", COUNT_EXACT, 0, 0},
    {"busy script, SCRIPT KILL", busy_script, script_kill, 1, 1, "BUSY", COUNT_EXACT, 0, 0},
    {"FLUSHALL under load", flushall_churn, churn_end, 0, 0, NULL, COUNT_AT_MOST, 0, 0},
    {"SCRIPT FLUSH under load", script_flush_churn, churn_end, 0, 0, NULL, COUNT_EXACT, 0, 0},
};

static const fault readonly_fault = {"READONLY (a replica)", nothing, promote_replica, 1, 0, "READONLY", COUNT_EXACT,
                                     0, 0};

/* ---- a batch cut part-way: what Redis decided is still reported ------------------ */

/* The bytes of a decision's reply: a RESP2 array of 8 integers. */
static int reply_bytes(const rl_result *r)
{
    long long v[8] = {r->allowed, r->limit, r->remaining, r->retry_after_ms, r->reset_after_ms, r->wait_ms,
                      r->granted, r->rate_index};
    int len = 4; /* "*8\r\n" */
    for (int i = 0; i < 8; i++) len += snprintf(NULL, 0, ":%lld\r\n", v[i]);
    return len;
}

/* [first, second] of two fresh ids: both reach Redis, the proxy passes the
 * first reply, then stalls (slicer: one reply per chunk, a pause after each)
 * or cuts (limit_data) the rest. Sent as two calls (max_batch 1), the first
 * request's decision is reported; the second is the fault's error, or the
 * policy's fallback. Sent as one batch call (max_batch 2), its one reply
 * is cut: both get the fault's error or the fallback. Both are counted in
 * Redis either way (a request cut short may have consumed, and is never
 * sent again: docs/semantics.md). */
static void batch_part_way(const char *url, rl_on_error policy, int stall, int max_batch)
{
    static int run;
    char first[32], second[32], warm[32], attributes[128];
    rl_options o = RL_OPTIONS_INIT;
    o.command_timeout_ms = CMD_MS;
    o.connect_timeout_ms = CONNECT_MS;
    o.reconnect_max_ms = RECONNECT_MS;
    o.on_error = policy;
    o.max_batch = max_batch;
    rl_client *c = NULL;
    CHECK_OK(rl_client_open(&c, url, &o));
    if (!c) return;
    run++;
    snprintf(first, sizeof first, "batch-%d-first", run);
    snprintf(second, sizeof second, "batch-%d-second", run);
    snprintf(warm, sizeof warm, "batch-%d-warm", run);
    rl_result w, rs[2];
    rl_outcome os[2];
    /* a fresh id's reply: the same bytes for the two to come */
    CHECK_OK(rl_acquire(c, "faults", warm, &counted, 1, &w));
    int bytes = reply_bytes(&w);
    if (stall) {
        snprintf(attributes, sizeof attributes, "{\"average_size\":%d,\"size_variation\":0,\"delay\":%d}", bytes,
                 3 * CMD_MS * 1000);
        toxic("slicer", "downstream", attributes);
    } else {
        snprintf(attributes, sizeof attributes, "{\"bytes\":%d}", bytes + 3);
        toxic("limit_data", "downstream", attributes);
    }
    rl_request reqs[2] = {{.name = "faults", .id = first, .spec = counted, .permits = 1, .op = RL_OP_ACQUIRE},
                          {.name = "faults", .id = second, .spec = counted, .permits = 1, .op = RL_OP_ACQUIRE}};
    int64_t t = now_ms();
    int rc = rl_execute_each(c, reqs, 2, rs, os);
    int64_t took = now_ms() - t;
    int fault = stall ? RL_ERR_TIMEOUT : RL_ERR_CONNECTION, batched = max_batch > 1;
    if (!batched) {
        CHECK_EQ(os[0].status, RL_OK);
        CHECK_EQ(rs[0].allowed, 1);
        CHECK_EQ(rs[0].fallback, 0);
        CHECK_EQ(rs[0].remaining, counted.limit - 1);
    }
    for (int i = batched ? 0 : 1; i < 2; i++) {
        if (policy == RL_ON_ERROR_RAISE) {
            CHECK_EQ(rc, fault);
            CHECK_EQ(os[i].status, fault);
            CHECK(strstr(rl_errmsg(), batched ? "request 0: " : "request 1: ") == rl_errmsg());
        } else {
            CHECK_OK(rc);
            CHECK_EQ(os[i].status, RL_OK);
            CHECK_EQ(rs[i].fallback, 1);
            CHECK_EQ(rs[i].allowed, policy == RL_ON_ERROR_ALLOW);
            CHECK(os[i].error[0] != '\0'); /* why the policy decided */
        }
    }
    CHECK(took <= CMD_MS + MARGIN_MS); /* no hang */
    proxy_heal();
    CHECK_EQ(count_in(&master, c, first), 1);
    CHECK_EQ(count_in(&master, c, second), 1);
    printf("  batch of 2%s, %s after the first reply, %s: first %s, second %s (%lld ms)\n",
           batched ? " in one call" : "", stall ? "stalled" : "cut",
           policy == RL_ON_ERROR_RAISE ? "raise" : policy == RL_ON_ERROR_ALLOW ? "allow" : "deny",
           batched ? (os[0].status ? rl_strerror(os[0].status) : "by policy") : "decided by Redis",
           os[1].status ? rl_strerror(os[1].status) : "by policy", (long long)took);
    /* and the next batch is decided whole */
    reqs[0].id = warm;
    CHECK_OK(rl_execute_each(c, reqs, 2, rs, os));
    CHECK_EQ(rs[0].fallback + rs[1].fallback, 0);
    rl_client_close(c);
}

/* an exit on a setup failure leaves no server behind */
static void stop_all(void)
{
    stop_toxiproxy();
    redis_stop(&replica);
    redis_stop(&master);
}

int main(int argc, char **argv)
{
    int64_t started = now_ms();
    atexit(stop_all);
    verbose = getenv("RL_FAULTS_VERBOSE") != NULL;
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN); /* the harness's raw connections; the core needs no such help */
    start_redis(&master);
    start_toxiproxy(argc > 1 ? argv[1] : NULL);
    proxy_port = create_proxy(master.port);
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", proxy_port);

    printf("through Toxiproxy (command timeout %d ms, reconnect_max %d ms; per client: failed/calls):\n", CMD_MS,
           RECONNECT_MS);
    pthread_t monitor_thread;
    pthread_create(&monitor_thread, NULL, monitor, NULL);
    rig g;
    rig_open(&g, url);
    /* the scripts loaded first: a first call takes three round trips (NOSCRIPT, load, again) */
    for (int i = 0; i < WORKERS; i++) {
        rl_result r;
        char error[200];
        g.w[i].id = "warm-up";
        CHECK_OK(decide(&g.w[i], &r, error, sizeof error));
    }
    for (size_t i = 0; i < sizeof proxy_faults / sizeof *proxy_faults; i++) run_fault(&g, &proxy_faults[i]);
    rig_close(&g);
    for (int stall = 0; stall < 2; stall++) {
        for (int max_batch = 1; max_batch <= 2; max_batch++) {
            batch_part_way(url, RL_ON_ERROR_RAISE, stall, max_batch);
            batch_part_way(url, RL_ON_ERROR_ALLOW, stall, max_batch);
            batch_part_way(url, RL_ON_ERROR_DENY, stall, max_batch);
        }
    }

    /* a client pointed at a replica: every write is refused (READONLY), at
     * once and under every policy, until it is promoted */
    start_redis(&replica);
    raw_cmd(&master, "CONFIG SET repl-diskless-sync-delay 0"); /* else the first sync waits 5 s */
    char replicaof[64];
    snprintf(replicaof, sizeof replicaof, "REPLICAOF 127.0.0.1 %d", master.port);
    raw_cmd(&replica, replicaof);
    for (int i = 0;; i++) {
        redisContext *c = redis_raw(&replica);
        redisReply *r = redisCommand(c, "ROLE");
        int synced = r && r->type == REDIS_REPLY_ARRAY && r->elements >= 4 && r->element[3]->type == REDIS_REPLY_STRING &&
                     !strcmp(r->element[3]->str, "connected");
        if (r) freeReplyObject(r);
        redisFree(c);
        if (synced) break;
        if (i == 500) {
            fprintf(stderr, "the replica did not sync\n");
            exit(2);
        }
        sleep_ms(10);
    }
    rig_open(&g, replica.url);
    counted_on = &replica;
    run_fault(&g, &readonly_fault);
    rig_close(&g);

    __atomic_store_n(&monitoring, 0, __ATOMIC_RELEASE);
    pthread_join(monitor_thread, NULL);
    stop_all();
    printf("  (%lld ms in all)\n", (long long)(now_ms() - started));
    return test_summary("faults");
}
