/* rl_client_close and rl_client_shutdown while other threads call
 * (closing.c): no call touches freed memory (run under ASan and TSan), each
 * returns or fails with RL_ERR_CLOSED, waits stop, the close is prompt. */
#include <dirent.h>
#include <pthread.h>
#include <string.h>

#include "harness.h"

static test_redis redis;
static const rl_spec one_an_hour = {.algorithm = RL_GCRA, .limit = 1, .period_ms = 3600000};
/* the next pass within a 30 s wait: rl_acquire_wait sleeps for it */
static const rl_spec one_per_20s = {.algorithm = RL_GCRA, .limit = 1, .period_ms = 20000};

enum { DECIDE_WAIT, SEMAPHORE, LOCK, POP, KINDS };

typedef struct {
    rl_client *client;
    int kind;
    int64_t timeout_ms;
    int status;
    int acquired; /* what the call got (a permit, a message, a pass) */
} caller;

static void *call_once(void *arg)
{
    caller *c = arg;
    rl_wait wait = {.timeout_ms = c->timeout_ms};
    if (c->kind == DECIDE_WAIT) {
        rl_request req = {.name = "close-wait", .id = "w", .spec = one_per_20s, .permits = 1};
        rl_result r;
        c->status = rl_acquire_wait(c->client, &req, &wait, &r);
        c->acquired = !c->status && r.allowed;
    } else if (c->kind == SEMAPHORE || c->kind == LOCK) {
        rl_permit p;
        c->status = c->kind == SEMAPHORE ? rl_semaphore_acquire(c->client, "close-sem", 1, 60000, &wait, &p)
                                         : rl_lock_acquire(c->client, "close-lock", 60000, &wait, &p);
        c->acquired = !c->status && p.acquired;
    } else {
        rl_messages m;
        c->status = rl_queue_pop_wait(c->client, "close-queue", 1, &wait, &m);
        c->acquired = !c->status && m.count > 0;
        if (!c->status) rl_messages_free(&m);
    }
    return NULL;
}

/* What every kind waits for, taken first by another client. */
static rl_client *hold_everything(void)
{
    rl_client *holder = open_client(&redis, NULL);
    rl_result r;
    rl_permit p;
    CHECK_OK(rl_acquire(holder, "close-wait", "w", &one_per_20s, 1, &r));
    rl_wait none = {0};
    CHECK_OK(rl_semaphore_acquire(holder, "close-sem", 1, 60000, &none, &p));
    CHECK_OK(rl_lock_acquire(holder, "close-lock", 60000, &none, &p));
    return holder;
}

/* Threads in each kind of wait (30 s) when another thread closes. */
static void close_stops_waits(void)
{
    enum { PER_KIND = 2 };
    rl_options o = RL_OPTIONS_INIT;
    o.command_timeout_ms = 2000;
    rl_client *holder = hold_everything(), *client = open_client(&redis, &o);
    caller callers[KINDS * PER_KIND];
    pthread_t threads[KINDS * PER_KIND];
    for (int i = 0; i < KINDS * PER_KIND; i++) {
        callers[i] = (caller){.client = client, .kind = i % KINDS, .timeout_ms = 30000, .status = 99};
        pthread_create(&threads[i], NULL, call_once, &callers[i]);
    }
    sleep_ms(300);
    int64_t start = now_ms();
    rl_client_close(client);
    int64_t took = now_ms() - start;
    for (int i = 0; i < KINDS * PER_KIND; i++) {
        pthread_join(threads[i], NULL);
        CHECK_EQ(callers[i].status, RL_ERR_CLOSED);
        CHECK(!callers[i].acquired);
    }
    CHECK(took < o.command_timeout_ms);
    rl_client_close(holder);
}

/* Decisions in flight (Redis paused: each waits for its reply) when the
 * client closes: they end by the command timeout, then the close does. */
static void close_waits_for_decisions(void)
{
    enum { THREADS = 6 };
    rl_options o = RL_OPTIONS_INIT;
    o.command_timeout_ms = 1000;
    o.on_error = RL_ON_ERROR_ALLOW;
    rl_client *client = open_client(&redis, &o);
    caller callers[THREADS];
    pthread_t threads[THREADS];
    redis_pause(&redis);
    for (int i = 0; i < THREADS; i++) {
        /* timeout 0: one decision, no wait */
        callers[i] = (caller){.client = client, .kind = DECIDE_WAIT, .timeout_ms = 0, .status = 99};
        pthread_create(&threads[i], NULL, call_once, &callers[i]);
    }
    sleep_ms(200);
    int64_t start = now_ms();
    rl_client_close(client);
    int64_t took = now_ms() - start;
    redis_resume(&redis);
    for (int i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
        CHECK_EQ(callers[i].status, RL_OK); /* the policy's answer: Redis did not reply in time */
        CHECK(callers[i].acquired);
    }
    CHECK(took <= 2 * o.command_timeout_ms);
}

static void count_completion(void *ctx, const rl_completion *completion)
{
    int *statuses = ctx;
    __atomic_store_n(statuses, completion->status, __ATOMIC_SEQ_CST);
}

/* After a shutdown every call fails at once with RL_ERR_CLOSED and writes
 * nothing to Redis; the accessors still answer until the close. */
static void calls_after_shutdown(void)
{
    rl_client *client = open_client(&redis, NULL);
    redis_flush(&redis);
    CHECK_EQ(rl_client_shutdown(client, 0), 1); /* none in flight: done now */
    CHECK_EQ(rl_client_shutdown(client, 1), 1); /* again: a no-op but for the waits */
    rl_result r;
    rl_permit p;
    rl_wait none = {0};
    int64_t start = now_ms(), value;
    int status = 99, set;
    rl_target target = {.fn = count_completion, .ctx = &status};
    rl_request req = {.name = "after", .id = "a", .spec = one_an_hour, .permits = 1};
    CHECK_EQ(rl_acquire(client, "after", "a", &one_an_hour, 1, &r), RL_ERR_CLOSED);
    CHECK(strcmp(rl_errmsg(), "client is closed") == 0);
    CHECK_EQ(rl_submit(client, &req, 1, &target), RL_ERR_CLOSED);
    CHECK_EQ(rl_semaphore_acquire(client, "after", 1, 1000, &none, &p), RL_ERR_CLOSED);
    CHECK_EQ(rl_queue_push(client, "after", "m", 1, 0, &set), RL_ERR_CLOSED);
    CHECK_EQ(rl_queue_size(client, "after", &value), RL_ERR_CLOSED);
    CHECK_EQ(rl_config_set_if_absent(client, "after", &one_an_hour, &set), RL_ERR_CLOSED);
    CHECK_EQ(rl_leases_give_back(client, NULL), RL_ERR_CLOSED);
    rl_messages m = {.count = 7};
    CHECK_EQ(rl_queue_pop_ready(client, "after", 1, &m), RL_ERR_CLOSED);
    CHECK_EQ(m.count, 0); /* what a caller frees is empty */
    rl_messages_free(&m);
    CHECK(now_ms() - start < 100);
    CHECK_EQ(status, 99); /* refused: no completion */
    CHECK(strlen(rl_client_prefix(client)) > 0);
    CHECK_EQ(redis_dbsize(&redis), 0);
    rl_client_close(client);
}

/* rl_client_shutdown without stop_waits: a wait in flight runs to its end,
 * then the client shuts down behind it. */
static void shutdown_lets_calls_finish(void)
{
    rl_client *client = open_client(&redis, NULL);
    caller pop = {.client = client, .kind = POP, .timeout_ms = 500, .status = 99};
    pthread_t thread;
    pthread_create(&thread, NULL, call_once, &pop);
    sleep_ms(100);
    int64_t start = now_ms();
    CHECK_EQ(rl_client_shutdown(client, 0), 0); /* deferred, not waited for */
    CHECK(now_ms() - start < 100);
    pthread_join(thread, NULL);
    CHECK_EQ(rl_client_shutdown(client, 0), 1); /* the pop, returning, shut it down */
    CHECK_EQ(pop.status, RL_OK);
    CHECK(!pop.acquired);
    rl_client_close(client);
}

static rl_client *shut_in_callback;
static int shut_in_callback_done;

static void shut_down_here(void *ctx, const rl_completion *completion)
{
    int *status = ctx;
    /* on the I/O thread: it stops after this returns */
    __atomic_store_n(&shut_in_callback_done, rl_client_shutdown(shut_in_callback, 0), __ATOMIC_SEQ_CST);
    __atomic_store_n(status, completion->status + 1000, __ATOMIC_SEQ_CST);
}

/* A completion callback shuts its client down: no deadlock, the rest
 * completes with RL_ERR_CLOSED, the close joins the I/O thread. */
static void shutdown_in_a_callback(void)
{
    shut_in_callback = open_client(&redis, NULL);
    rl_spec many = {.algorithm = RL_GCRA, .limit = 1000, .period_ms = 1000};
    rl_request req = {.name = "callback", .id = "c", .spec = many, .permits = 1};
    int first = 0, later = 99;
    rl_target shut = {.fn = shut_down_here, .ctx = &first}, count = {.fn = count_completion, .ctx = &later};
    CHECK_OK(rl_submit(shut_in_callback, &req, 1, &shut));
    for (int64_t end = now_ms() + 2000; !__atomic_load_n(&first, __ATOMIC_SEQ_CST) && now_ms() < end;) sleep_ms(5);
    CHECK_EQ(first, 1000 + RL_OK);
    CHECK_EQ(__atomic_load_n(&shut_in_callback_done, __ATOMIC_SEQ_CST), 1);
    CHECK_EQ(rl_submit(shut_in_callback, &req, 2, &count), RL_ERR_CLOSED);
    rl_client_close(shut_in_callback);
}

static int open_fds(void)
{
    int n = 0;
    DIR *dir = opendir("/dev/fd");
    if (!dir) return -1;
    for (struct dirent *e; (e = readdir(dir));) n += e->d_name[0] != '.';
    closedir(dir);
    return n;
}

/* A shutdown releases the client's descriptors (sockets, the I/O thread's
 * pipe) at once; its memory waits for rl_client_close (in Java, the
 * Cleaner after a garbage collection). */
static void shutdown_closes_descriptors(void)
{
    int before = open_fds();
    rl_client *client = open_client(&redis, NULL);
    rl_request req = {.name = "fds", .id = "f", .spec = one_an_hour, .permits = 1};
    int status = 99;
    rl_target target = {.fn = count_completion, .ctx = &status};
    rl_result r;
    CHECK_OK(rl_submit(client, &req, 1, &target)); /* the I/O thread, its pipe and connection */
    CHECK_OK(rl_acquire(client, "fds", "g", &one_an_hour, 1, &r)); /* a pooled connection */
    for (int64_t end = now_ms() + 2000; __atomic_load_n(&status, __ATOMIC_SEQ_CST) == 99 && now_ms() < end;)
        sleep_ms(5);
    CHECK(open_fds() > before);
    CHECK_EQ(rl_client_shutdown(client, 0), 1);
    CHECK_EQ(open_fds(), before);
    rl_client_close(client);
}

int main(void)
{
    redis_start(&redis);
    close_stops_waits();
    close_waits_for_decisions();
    calls_after_shutdown();
    shutdown_lets_calls_finish();
    shutdown_in_a_callback();
    shutdown_closes_descriptors();
    redis_stop(&redis);
    return test_summary("close");
}
