/* Semaphore, lock and delay queue against a real redis-server. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static test_redis redis;
static rl_client *client;

/* ---- semaphore --------------------------------------------------------------- */

static int held_now, held_max, served;
static pthread_mutex_t stats = PTHREAD_MUTEX_INITIALIZER;

static void *contender(void *arg)
{
    (void)arg;
    rl_wait w = {20000, NULL, NULL};
    for (int round = 0; round < 8; round++) {
        rl_permit p;
        int rc = rl_semaphore_acquire(client, "sem-contend", 4, 5000, &w, &p);
        if (rc || !p.acquired) {
            fprintf(stderr, "contender not served: %s %s\n", rl_strerror(rc), rl_errmsg());
            __atomic_add_fetch(&test_failures, 1, __ATOMIC_RELAXED);
            return NULL;
        }
        pthread_mutex_lock(&stats);
        held_now++;
        if (held_now > held_max) held_max = held_now;
        pthread_mutex_unlock(&stats);
        sleep_ms(40);
        pthread_mutex_lock(&stats);
        held_now--;
        served++;
        pthread_mutex_unlock(&stats);
        int released = 0;
        rl_semaphore_release(client, "sem-contend", p.id, &released);
        if (!released) __atomic_add_fetch(&test_failures, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

static void test_semaphore_contention(void)
{
    pthread_t t[32];
    int64_t start = now_ms();
    for (int i = 0; i < 32; i++) pthread_create(&t[i], NULL, contender, NULL);
    for (int i = 0; i < 32; i++) pthread_join(t[i], NULL);
    CHECK(held_max <= 4);
    CHECK_EQ(held_max, 4);
    CHECK_EQ(served, 256);
    /* 256 holds of 40 ms, 4 at a time: ~2.6 s if wake-ups are prompt */
    printf("  32 threads x 8 rounds on 4 permits: %lld ms, at most %d held\n", (long long)(now_ms() - start),
           held_max);
    int64_t holders = -1;
    CHECK_OK(rl_semaphore_holders(client, "sem-contend", &holders));
    CHECK_EQ(holders, 0);
}

typedef struct {
    int index;
    int *order;
    int *next;
    rl_permit permit;
} fifo_waiter;

static pthread_mutex_t order_mutex = PTHREAD_MUTEX_INITIALIZER;

static void *fifo_wait(void *arg)
{
    fifo_waiter *fw = arg;
    rl_wait w = {5000, NULL, NULL};
    if (rl_semaphore_acquire(client, "sem-fifo", 2, 5000, &w, &fw->permit) == RL_OK && fw->permit.acquired) {
        pthread_mutex_lock(&order_mutex);
        fw->order[(*fw->next)++] = fw->index;
        pthread_mutex_unlock(&order_mutex);
    }
    return NULL;
}

/* how many waiters were served so far (read under their mutex) */
static int served_so_far(const int *next)
{
    pthread_mutex_lock(&order_mutex);
    int n = *next;
    pthread_mutex_unlock(&order_mutex);
    return n;
}

static void test_semaphore_fifo(void)
{
    rl_permit a, b;
    rl_wait none = {0, NULL, NULL};
    int order[4] = {-1, -1, -1, -1}, next = 0, released;
    CHECK_OK(rl_semaphore_acquire(client, "sem-fifo", 2, 5000, &none, &a));
    CHECK_OK(rl_semaphore_acquire(client, "sem-fifo", 2, 5000, &none, &b));
    CHECK(a.acquired && b.acquired && strcmp(a.id, b.id) != 0);
    CHECK(b.fencing_token > a.fencing_token);
    fifo_waiter waiters[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        waiters[i] = (fifo_waiter){i, order, &next, {0}};
        pthread_create(&t[i], NULL, fifo_wait, &waiters[i]);
        sleep_ms(100); /* arrival order is 0, 1, 2, 3 */
    }
    /* a non-blocking caller does not jump the queue */
    rl_permit c;
    CHECK_OK(rl_semaphore_acquire(client, "sem-fifo", 2, 5000, &none, &c));
    CHECK_EQ(c.acquired, 0);
    int64_t t0 = now_ms();
    CHECK_OK(rl_semaphore_release(client, "sem-fifo", a.id, &released));
    CHECK_EQ(released, 1);
    while (served_so_far(&next) < 1 && now_ms() - t0 < 2000) sleep_ms(1);
    printf("  wake-up after release: %lld ms\n", (long long)(now_ms() - t0));
    CHECK_OK(rl_semaphore_release(client, "sem-fifo", b.id, &released));
    while (served_so_far(&next) < 2 && now_ms() - t0 < 2000) sleep_ms(1);
    /* one permit at a time, so each release has exactly one waiter to serve */
    CHECK_OK(rl_semaphore_release(client, "sem-fifo", waiters[order[0] < 0 ? 0 : order[0]].permit.id, &released));
    while (served_so_far(&next) < 3 && now_ms() - t0 < 3000) sleep_ms(1);
    CHECK_OK(rl_semaphore_release(client, "sem-fifo", waiters[order[1] < 0 ? 1 : order[1]].permit.id, &released));
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 4; i++) CHECK_EQ(order[i], i);
    for (int i = 2; i < 4; i++) rl_semaphore_release(client, "sem-fifo", waiters[i].permit.id, &released);
    /* releasing twice, or a made-up permit, reports it and frees nothing */
    CHECK_OK(rl_semaphore_release(client, "sem-fifo", a.id, &released));
    CHECK_EQ(released, 0);
    CHECK_OK(rl_semaphore_release(client, "sem-fifo", "not-a-permit", &released));
    CHECK_EQ(released, 0);
}

static void test_semaphore_lease(void)
{
    rl_permit crashed, next;
    rl_wait none = {0, NULL, NULL}, wait = {3000, NULL, NULL};
    int ok;
    int64_t avail;
    CHECK_OK(rl_semaphore_acquire(client, "sem-lease", 1, 300, &none, &crashed));
    CHECK(crashed.acquired);
    CHECK_OK(rl_semaphore_available(client, "sem-lease", 1, &avail));
    CHECK_EQ(avail, 0);
    /* the holder "crashes": its permit comes back when the lease runs out */
    int64_t t = now_ms();
    CHECK_OK(rl_semaphore_acquire(client, "sem-lease", 1, 300, &wait, &next));
    t = now_ms() - t;
    CHECK(next.acquired);
    CHECK(t >= 200 && t < 1500);
    CHECK_OK(rl_semaphore_refresh(client, "sem-lease", crashed.id, 1000, &ok));
    CHECK_EQ(ok, 0);
    CHECK_OK(rl_semaphore_refresh(client, "sem-lease", next.id, 1000, &ok));
    CHECK_EQ(ok, 1);
    sleep_ms(400); /* beyond the first lease, within the refreshed one */
    CHECK_OK(rl_semaphore_acquire(client, "sem-lease", 1, 300, &none, &crashed));
    CHECK_EQ(crashed.acquired, 0);
    /* raising permits_max takes effect at once */
    CHECK_OK(rl_semaphore_acquire(client, "sem-lease", 2, 300, &none, &crashed));
    CHECK_EQ(crashed.acquired, 1);
    CHECK_OK(rl_semaphore_available(client, "sem-lease", 3, &avail));
    CHECK_EQ(avail, 1);
    CHECK_OK(rl_semaphore_release(client, "sem-lease", next.id, &ok));
    CHECK_EQ(ok, 1);
    /* a waiter that times out gives up within its timeout */
    rl_permit hold, late;
    rl_wait shortw = {300, NULL, NULL};
    CHECK_OK(rl_semaphore_acquire(client, "sem-busy", 1, 5000, &none, &hold));
    t = now_ms();
    CHECK_OK(rl_semaphore_acquire(client, "sem-busy", 1, 5000, &shortw, &late));
    CHECK_EQ(late.acquired, 0);
    CHECK(now_ms() - t < 700);
    CHECK_OK(rl_semaphore_release(client, "sem-busy", hold.id, &ok));
    sleep_ms(1200);
    CHECK_EQ(redis_live_keys(&redis), 0);
}

static int cancel_after(void *ctx)
{
    return now_ms() >= *(int64_t *)ctx;
}

static void test_cancel(void)
{
    rl_permit hold, p;
    rl_wait none = {0, NULL, NULL};
    int64_t at = now_ms() + 200;
    rl_wait w = {5000, cancel_after, &at};
    int ok;
    CHECK_OK(rl_lock_acquire(client, "cancel", 5000, &none, &hold));
    int64_t t = now_ms();
    CHECK_EQ(rl_lock_acquire(client, "cancel", 5000, &w, &p), RL_ERR_CANCELLED);
    CHECK(now_ms() - t < 600);
    CHECK_OK(rl_lock_release(client, "cancel", hold.id, &ok));
    CHECK_EQ(ok, 1);
}

/* ---- lock -------------------------------------------------------------------- */

static int in_critical, overlaps;
static int64_t last_fence;
static int fence_regressions, lock_count;

static void *locker(void *arg)
{
    (void)arg;
    rl_wait w = {20000, NULL, NULL};
    for (int i = 0; i < 5; i++) {
        rl_permit p;
        int ok = 0;
        if (rl_lock_acquire(client, "mutex", 5000, &w, &p) || !p.acquired) {
            __atomic_add_fetch(&test_failures, 1, __ATOMIC_RELAXED);
            continue;
        }
        if (__atomic_add_fetch(&in_critical, 1, __ATOMIC_SEQ_CST) > 1) __atomic_add_fetch(&overlaps, 1, __ATOMIC_SEQ_CST);
        if (p.fencing_token <= last_fence) fence_regressions++;
        last_fence = p.fencing_token;
        lock_count++;
        sleep_ms(2);
        __atomic_sub_fetch(&in_critical, 1, __ATOMIC_SEQ_CST);
        rl_lock_release(client, "mutex", p.id, &ok);
        if (!ok) __atomic_add_fetch(&test_failures, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

static void test_lock(void)
{
    pthread_t t[16];
    for (int i = 0; i < 16; i++) pthread_create(&t[i], NULL, locker, NULL);
    for (int i = 0; i < 16; i++) pthread_join(t[i], NULL);
    CHECK_EQ(overlaps, 0);
    CHECK_EQ(fence_regressions, 0);
    CHECK_EQ(lock_count, 80);

    rl_permit owner, other;
    rl_wait none = {0, NULL, NULL}, wait = {2000, NULL, NULL};
    int ok;
    CHECK_OK(rl_lock_acquire(client, "owned", 300, &none, &owner));
    CHECK(owner.acquired);
    CHECK_OK(rl_lock_acquire(client, "owned", 300, &none, &other));
    CHECK_EQ(other.acquired, 0);
    /* only the owner may release or extend */
    CHECK_OK(rl_lock_release(client, "owned", "someone-else", &ok));
    CHECK_EQ(ok, 0);
    CHECK_OK(rl_lock_extend(client, "owned", "someone-else", 5000, &ok));
    CHECK_EQ(ok, 0);
    CHECK_OK(rl_lock_extend(client, "owned", owner.id, 600, &ok));
    CHECK_EQ(ok, 1);
    /* the lease runs out: the lock frees itself, with a larger fencing token */
    int64_t t0 = now_ms();
    CHECK_OK(rl_lock_acquire(client, "owned", 300, &wait, &other));
    CHECK(other.acquired);
    CHECK(now_ms() - t0 >= 450);
    CHECK(other.fencing_token > owner.fencing_token);
    CHECK_OK(rl_lock_release(client, "owned", owner.id, &ok));
    CHECK_EQ(ok, 0);
    CHECK_OK(rl_lock_release(client, "owned", other.id, &ok));
    CHECK_EQ(ok, 1);
}

/* ---- delay queue ------------------------------------------------------------- */

#define MESSAGES 200
static int64_t due_at[MESSAGES];
static int delivered[MESSAGES];
static int early;
static int producers_done;

static void *consumer(void *arg)
{
    (void)arg;
    for (;;) {
        rl_messages m;
        rl_wait w = {300, NULL, NULL};
        if (rl_queue_pop_wait(client, "jobs", 5, &w, &m)) {
            __atomic_add_fetch(&test_failures, 1, __ATOMIC_RELAXED);
            return NULL;
        }
        int64_t t = now_ms();
        for (size_t i = 0; i < m.count; i++) {
            int idx = atoi(m.items[i] + 4);
            __atomic_add_fetch(&delivered[idx], 1, __ATOMIC_SEQ_CST);
            if (t + 2 < __atomic_load_n(&due_at[idx], __ATOMIC_ACQUIRE)) __atomic_add_fetch(&early, 1, __ATOMIC_SEQ_CST);
        }
        if (m.count == 0 && __atomic_load_n(&producers_done, __ATOMIC_ACQUIRE)) {
            int64_t size = -1;
            rl_queue_size(client, "jobs", &size);
            if (size == 0) {
                rl_messages_free(&m);
                return NULL;
            }
        }
        rl_messages_free(&m);
    }
}

static void test_delay_queue(void)
{
    pthread_t t[8];
    int added;
    for (int i = 0; i < 8; i++) pthread_create(&t[i], NULL, consumer, NULL);
    for (int i = 0; i < MESSAGES; i++) {
        char msg[32];
        int64_t delay = (i * 37) % 600;
        snprintf(msg, sizeof msg, "job-%d", i);
        __atomic_store_n(&due_at[i], now_ms() + delay, __ATOMIC_RELEASE); /* Redis orders it before the pop; TSan cannot see that */
        CHECK_OK(rl_queue_push(client, "jobs", msg, strlen(msg), delay, &added));
        CHECK_EQ(added, 1);
    }
    /* pushing an id already queued changes nothing */
    int64_t size;
    CHECK_OK(rl_queue_push(client, "jobs", "job-199", 7, 0, &added));
    __atomic_store_n(&producers_done, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < 8; i++) pthread_join(t[i], NULL);
    int once = 0;
    for (int i = 0; i < MESSAGES; i++) once += delivered[i] == 1;
    CHECK_EQ(once, MESSAGES);
    CHECK_EQ(early, 0);

    /* pop_ready takes only what is due; remove and size */
    CHECK_OK(rl_queue_push(client, "q2", "later", 5, 60000, &added));
    CHECK_OK(rl_queue_push(client, "q2", "now", 3, 0, &added));
    CHECK_OK(rl_queue_push(client, "q2", "gone", 4, 0, &added));
    CHECK_OK(rl_queue_remove(client, "q2", "gone", 4, &added));
    CHECK_EQ(added, 1);
    rl_messages m;
    CHECK_OK(rl_queue_pop_ready(client, "q2", 10, &m));
    CHECK(m.count == 1 && !strcmp(m.items[0], "now"));
    rl_messages_free(&m);
    CHECK_OK(rl_queue_size(client, "q2", &size));
    CHECK_EQ(size, 1);
    /* a blocking pop wakes when a message due now is pushed */
    int64_t t0 = now_ms();
    CHECK_OK(rl_queue_push(client, "q3", "soon", 4, 250, &added));
    rl_wait w = {3000, NULL, NULL};
    CHECK_OK(rl_queue_pop_wait(client, "q3", 10, &w, &m));
    CHECK_EQ(m.count, 1);
    CHECK(now_ms() - t0 >= 240 && now_ms() - t0 < 1000);
    rl_messages_free(&m);
    /* binary-safe messages */
    CHECK_OK(rl_queue_push(client, "q4", "a\0b", 3, 0, &added));
    CHECK_OK(rl_queue_pop_ready(client, "q4", 1, &m));
    CHECK(m.count == 1 && m.lens[0] == 3 && m.items[0][2] == 'b');
    rl_messages_free(&m);
}

static void test_bad_input(void)
{
    rl_permit p;
    rl_wait none = {0, NULL, NULL}, negative = {-1, NULL, NULL};
    int ok;
    rl_messages m;
    int64_t v;
    redis_flush(&redis);
    CHECK_EQ(rl_semaphore_acquire(client, "s", 0, 1000, &none, &p), RL_ERR_INVALID);
    CHECK_EQ(rl_semaphore_acquire(client, "s", -3, 1000, &none, &p), RL_ERR_INVALID);
    CHECK_EQ(rl_semaphore_acquire(client, "s", 2, -1, &none, &p), RL_ERR_INVALID);
    CHECK_EQ(rl_semaphore_acquire(client, "s", 2, 0, &none, &p), RL_ERR_INVALID);
    CHECK_EQ(rl_semaphore_acquire(client, "", 2, 1000, &none, &p), RL_ERR_INVALID);
    CHECK_EQ(rl_semaphore_acquire(client, "s", 2, 1000, &negative, &p), RL_ERR_INVALID);
    CHECK_EQ(rl_semaphore_release(client, "s", "", &ok), RL_ERR_INVALID);
    CHECK_EQ(rl_semaphore_refresh(client, "s", "id", -5, &ok), RL_ERR_INVALID);
    CHECK_EQ(rl_semaphore_available(client, "s", 0, &v), RL_ERR_INVALID);
    CHECK_EQ(rl_lock_acquire(client, "", 1000, &none, &p), RL_ERR_INVALID);
    CHECK_EQ(rl_lock_acquire(client, "l", -1000, &none, &p), RL_ERR_INVALID);
    CHECK_EQ(rl_lock_extend(client, "l", "tok", 0, &ok), RL_ERR_INVALID);
    CHECK_EQ(rl_queue_push(client, "", "m", 1, 0, &ok), RL_ERR_INVALID);
    CHECK_EQ(rl_queue_push(client, "q", "", 0, 0, &ok), RL_ERR_INVALID);
    CHECK_EQ(rl_queue_push(client, "q", "m", 1, -1, &ok), RL_ERR_INVALID);
    CHECK_EQ(rl_queue_pop_ready(client, "q", 0, &m), RL_ERR_INVALID);
    CHECK_EQ(rl_queue_pop_wait(client, "q", 1, &negative, &m), RL_ERR_INVALID);
    CHECK_EQ(redis_dbsize(&redis), 0);
}

int main(void)
{
    rl_options o = RL_OPTIONS_INIT;
    o.pool_size = 16;
    o.command_timeout_ms = 5000;
    redis_start(&redis);
    client = open_client(&redis, &o);
    test_bad_input();
    test_semaphore_fifo();
    test_semaphore_lease();
    test_semaphore_contention();
    test_cancel();
    test_lock();
    test_delay_queue();
    rl_client_close(client);
    redis_stop(&redis);
    return test_summary("sync");
}
