/* Asynchronous waits: semaphore / lock acquire and queue pop with a timeout,
 * woken by the release or push, FIFO and never above permits_max,
 * cancelled without leaving anything behind, and completed on close. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static test_redis redis;

static rl_client *patient_client(void)
{
    rl_options o = RL_OPTIONS_INIT;
    o.command_timeout_ms = 60000;
    return open_client(&redis, &o);
}

/* Waits up to timeout_ms for one completion. */
static int take_one(rl_completions *q, rl_completion *out, int64_t timeout_ms)
{
    return drain_completions(q, out, 1, timeout_ms) == 1;
}

/* Live members of a semaphore's queue (waiters that did not leave). */
static long long queued(redisContext *raw, const char *kind, const char *name)
{
    return redis_int(raw, "ZCARD rl:{%s}:%s:queue", name, kind);
}

/* A release wakes the waiter at once: long before its next check-in (1 s). */
static void test_woken_by_release(void)
{
    rl_client *c = patient_client();
    rl_completions *q;
    rl_completion done;
    rl_permit held;
    rl_wait no_wait = {0, NULL, NULL};
    CHECK_OK(rl_completions_open(&q));
    rl_target target = {NULL, NULL, q};
    CHECK_OK(rl_lock_acquire(c, "w-lock", 60000, &no_wait, &held));
    CHECK(held.acquired);
    CHECK_OK(rl_submit_lock_acquire(c, "w-lock", 60000, 10000, 1, &target));
    sleep_ms(300); /* it tried, subscribed, tried again and sleeps */
    CHECK(!take_one(q, &done, 0));
    int released = 0;
    int64_t at = now_ms();
    CHECK_OK(rl_lock_release(c, "w-lock", held.id, &released));
    CHECK(released);
    CHECK(take_one(q, &done, 5000));
    int64_t took = now_ms() - at;
    CHECK_EQ(done.status, RL_OK);
    CHECK(done.acquired && strlen(done.permit_id) == 32 && done.fencing_token > held.fencing_token);
    if (took >= 900) fprintf(stderr, "woken after %lld ms\n", (long long)took);
    CHECK(took < 900);
    CHECK_OK(rl_lock_release(c, "w-lock", done.permit_id, &released));
    CHECK(released);
    rl_client_close(c);
    rl_completions_close(q);
}

/* The wait ends at its timeout, not acquired, out of the queue. */
static void test_times_out(void)
{
    rl_client *c = patient_client();
    redisContext *raw = redis_raw(&redis);
    rl_completions *q;
    rl_completion done;
    rl_permit held;
    rl_wait no_wait = {0, NULL, NULL};
    CHECK_OK(rl_completions_open(&q));
    rl_target target = {NULL, NULL, q};
    CHECK_OK(rl_semaphore_acquire(c, "w-sem-to", 1, 60000, &no_wait, &held));
    int64_t at = now_ms();
    CHECK_OK(rl_submit_semaphore_acquire(c, "w-sem-to", 1, 60000, 300, 2, &target));
    CHECK(take_one(q, &done, 5000));
    int64_t took = now_ms() - at;
    CHECK_EQ(done.status, RL_OK);
    CHECK(!done.acquired && done.permit_id[0] == '\0' && done.fencing_token == 0);
    CHECK(took >= 300);
    sleep_ms(100); /* the leave follows the completion */
    CHECK_EQ(queued(raw, "semaphore", "w-sem-to"), 0);
    /* timeout 0: one try */
    CHECK_OK(rl_submit_semaphore_acquire(c, "w-sem-to", 1, 60000, 0, 3, &target));
    CHECK(take_one(q, &done, 5000));
    CHECK(done.status == RL_OK && !done.acquired);
    redisFree(raw);
    rl_client_close(c);
    rl_completions_close(q);
}

/* 60 waiters on 3 permits, each releasing what it gets: every one is served,
 * in arrival order, never more than 3 at a time, fencing tokens rising. */
static void test_fifo_never_above_max(void)
{
    enum { WAITERS = 60, MAX = 3 };
    rl_client *c = patient_client();
    rl_completions *q;
    rl_completion done;
    CHECK_OK(rl_completions_open(&q));
    rl_target target = {NULL, NULL, q};
    rl_permit first[MAX];
    rl_wait no_wait = {0, NULL, NULL};
    for (int i = 0; i < MAX; i++) {
        CHECK_OK(rl_semaphore_acquire(c, "w-fifo", MAX, 60000, &no_wait, &first[i]));
        CHECK(first[i].acquired);
    }
    for (int i = 0; i < WAITERS; i++) {
        CHECK_OK(rl_submit_semaphore_acquire(c, "w-fifo", MAX, 60000, 60000, (uint64_t)i, &target));
        sleep_ms(5); /* they queue in this order */
    }
    sleep_ms(200);
    int released = 0;
    for (int i = 0; i < MAX; i++) CHECK_OK(rl_semaphore_release(c, "w-fifo", first[i].id, &released));
    int64_t last_fence = first[MAX - 1].fencing_token;
    int served = 0, out_of_order = 0;
    uint64_t expected = 0;
    while (served < WAITERS && take_one(q, &done, 10000)) {
        CHECK_EQ(done.status, RL_OK);
        CHECK(done.acquired);
        if (!done.acquired) break;
        /* the first MAX are woken together; beyond that, order is arrival order */
        if (done.tag + MAX < expected || done.tag > expected + MAX) out_of_order++;
        expected++;
        int64_t holders = 0;
        CHECK_OK(rl_semaphore_holders(c, "w-fifo", &holders));
        CHECK(holders >= 1 && holders <= MAX);
        CHECK(done.fencing_token > last_fence);
        last_fence = done.fencing_token;
        CHECK_OK(rl_semaphore_release(c, "w-fifo", done.permit_id, &released));
        CHECK(released);
        served++;
    }
    CHECK_EQ(served, WAITERS);
    CHECK_EQ(out_of_order, 0);
    rl_client_close(c);
    rl_completions_close(q);
}

/* Cancelled while sleeping: RL_ERR_CANCELLED at once, out of the queue.
 * Cancelled while a try is in flight: whatever the try got goes back. */
static void test_cancel(void)
{
    rl_client *c = patient_client();
    redisContext *raw = redis_raw(&redis);
    rl_completions *q;
    rl_completion done;
    rl_permit held;
    rl_wait no_wait = {0, NULL, NULL};
    CHECK_OK(rl_completions_open(&q));
    rl_target target = {NULL, NULL, q};
    CHECK_OK(rl_lock_acquire(c, "w-cancel", 60000, &no_wait, &held));
    CHECK_OK(rl_submit_lock_acquire(c, "w-cancel", 60000, 30000, 7, &target));
    sleep_ms(300);
    CHECK_EQ(queued(raw, "lock", "w-cancel"), 1);
    int64_t at = now_ms();
    CHECK_OK(rl_cancel(c, 7));
    CHECK(take_one(q, &done, 5000));
    CHECK(now_ms() - at < 1000);
    CHECK_EQ(done.status, RL_ERR_CANCELLED);
    CHECK(!done.acquired);
    sleep_ms(100);
    CHECK_EQ(queued(raw, "lock", "w-cancel"), 0);
    int released = 0;
    CHECK_OK(rl_lock_release(c, "w-cancel", held.id, &released));

    /* racing a free lock: either it was granted before the cancel arrived,
     * or it was cancelled and holds nothing; never a lock nobody holds */
    int granted = 0, cancelled = 0;
    for (int i = 0; i < 40; i++) {
        CHECK_OK(rl_submit_lock_acquire(c, "w-cancel", 60000, 5000, 100 + (uint64_t)i, &target));
        CHECK_OK(rl_cancel(c, 100 + (uint64_t)i));
        CHECK(take_one(q, &done, 5000));
        if (done.status == RL_OK && done.acquired) {
            granted++;
            CHECK_OK(rl_lock_release(c, "w-cancel", done.permit_id, &released));
            CHECK(released);
        } else {
            CHECK_EQ(done.status, RL_ERR_CANCELLED);
            cancelled++;
        }
        int64_t holders = -1;
        for (int t = 0; t < 50 && holders != 0; t++) { /* a release of ours may still be on its way */
            CHECK_OK(rl_semaphore_holders(c, "w-cancel", &holders));
            if (holders) sleep_ms(10);
        }
        CHECK_EQ(holders, 0);
    }
    CHECK_EQ(granted + cancelled, 40);
    CHECK_OK(rl_cancel(c, 999)); /* nothing with that tag: fine */
    redisFree(raw);
    rl_client_close(c);
    rl_completions_close(q);
}

/* A cancel right behind its submit is never lost, however the I/O thread
 * takes them: every wait completes cancelled, long before its timeout. */
static void test_cancel_storm(void)
{
    enum { N = 2000 };
    rl_client *c = patient_client();
    rl_completions *q;
    rl_permit held;
    rl_wait no_wait = {0, NULL, NULL};
    CHECK_OK(rl_completions_open(&q));
    rl_target target = {NULL, NULL, q};
    CHECK_OK(rl_lock_acquire(c, "w-storm", 60000, &no_wait, &held));
    for (uint64_t i = 0; i < N; i++) {
        CHECK_OK(rl_submit_lock_acquire(c, "w-storm", 60000, 30000, i, &target));
        CHECK_OK(rl_cancel(c, i));
    }
    rl_completion *all = calloc(N, sizeof *all);
    size_t got = drain_completions(q, all, N, 20000);
    CHECK_EQ(got, N);
    int cancelled = 0;
    for (size_t i = 0; i < got; i++) cancelled += all[i].status == RL_ERR_CANCELLED;
    CHECK_EQ(cancelled, N);
    free(all);
    rl_client_close(c);
    rl_completions_close(q);
}

static void test_pop(void)
{
    rl_client *c = patient_client();
    rl_completions *q;
    rl_completion done;
    CHECK_OK(rl_completions_open(&q));
    rl_target target = {NULL, NULL, q};
    int added = 0;

    /* woken by a push */
    CHECK_OK(rl_submit_queue_pop(c, "w-q", 10, 10000, 1, &target));
    sleep_ms(300);
    CHECK(!take_one(q, &done, 0));
    int64_t at = now_ms();
    CHECK_OK(rl_queue_push(c, "w-q", "a\0b", 3, 0, &added));
    CHECK(take_one(q, &done, 5000));
    CHECK(now_ms() - at < 900);
    CHECK_EQ(done.status, RL_OK);
    CHECK_EQ(done.messages.count, 1);
    if (done.messages.count == 1) CHECK(done.messages.lens[0] == 3 && !memcmp(done.messages.items[0], "a\0b", 3));
    rl_messages_free(&done.messages);

    /* a delayed message: not before it is due */
    CHECK_OK(rl_queue_push(c, "w-q", "later", 5, 400, &added));
    at = now_ms();
    CHECK_OK(rl_submit_queue_pop(c, "w-q", 10, 10000, 2, &target));
    CHECK(take_one(q, &done, 5000));
    CHECK(now_ms() - at >= 390);
    CHECK_EQ(done.messages.count, 1);
    rl_messages_free(&done.messages);

    /* nothing within the timeout */
    CHECK_OK(rl_submit_queue_pop(c, "w-q", 10, 200, 3, &target));
    CHECK(take_one(q, &done, 5000));
    CHECK(done.status == RL_OK && done.messages.count == 0);

    /* cancelled: a later push stays for someone else */
    CHECK_OK(rl_submit_queue_pop(c, "w-q", 10, 10000, 4, &target));
    sleep_ms(200);
    CHECK_OK(rl_cancel(c, 4));
    CHECK(take_one(q, &done, 5000));
    CHECK_EQ(done.status, RL_ERR_CANCELLED);
    CHECK_EQ(done.messages.count, 0);
    CHECK_OK(rl_queue_push(c, "w-q", "kept", 4, 0, &added));
    int64_t size = 0;
    CHECK_OK(rl_queue_size(c, "w-q", &size));
    CHECK_EQ(size, 1);

    /* racing a due message: popped and received, or pushed back; never lost */
    for (int i = 0; i < 30; i++) {
        CHECK_OK(rl_submit_queue_pop(c, "w-q", 10, 5000, 100 + (uint64_t)i, &target));
        CHECK_OK(rl_cancel(c, 100 + (uint64_t)i));
        CHECK(take_one(q, &done, 5000));
        if (done.status == RL_OK) {
            CHECK_EQ(done.messages.count, 1);
            CHECK_OK(rl_queue_push(c, "w-q", "kept", 4, 0, &added));
        } else {
            CHECK_EQ(done.status, RL_ERR_CANCELLED);
        }
        rl_messages_free(&done.messages);
        for (int t = 0; t < 50 && size != 1; t++) sleep_ms(10);
        size = 0;
        for (int t = 0; t < 50 && size != 1; t++) {
            CHECK_OK(rl_queue_size(c, "w-q", &size));
            if (size != 1) sleep_ms(10);
        }
        CHECK_EQ(size, 1);
    }

    CHECK_EQ(rl_submit_queue_pop(c, "w-q", 0, 100, 0, &target), RL_ERR_INVALID);
    CHECK_EQ(rl_submit_queue_pop(c, "w-q", 1, -1, 0, &target), RL_ERR_INVALID);
    CHECK_EQ(rl_submit_queue_pop(c, "", 1, 100, 0, &target), RL_ERR_INVALID);
    CHECK_EQ(rl_submit_lock_acquire(c, "l", 1000, -5, 0, &target), RL_ERR_INVALID);
    rl_client_close(c);
    rl_completions_close(q);
}

/* The subscriber connection killed while a wait sleeps: it still gets the
 * permit (by polling, then subscribed again). */
static void test_subscriber_killed(void)
{
    rl_client *c = patient_client();
    redisContext *raw = redis_raw(&redis);
    rl_completions *q;
    rl_completion done;
    rl_permit held;
    rl_wait no_wait = {0, NULL, NULL};
    CHECK_OK(rl_completions_open(&q));
    rl_target target = {NULL, NULL, q};
    CHECK_OK(rl_lock_acquire(c, "w-killed", 60000, &no_wait, &held));
    CHECK_OK(rl_submit_lock_acquire(c, "w-killed", 60000, 20000, 1, &target));
    sleep_ms(300);
    CHECK(redis_int(raw, "CLIENT KILL TYPE pubsub") >= 1);
    sleep_ms(100);
    int released = 0;
    CHECK_OK(rl_lock_release(c, "w-killed", held.id, &released));
    CHECK(take_one(q, &done, 5000));
    CHECK(done.status == RL_OK && done.acquired);
    CHECK_OK(rl_lock_release(c, "w-killed", done.permit_id, &released));
    /* subscribed again: the next wait is woken at once */
    CHECK_OK(rl_lock_acquire(c, "w-killed", 60000, &no_wait, &held));
    CHECK_OK(rl_submit_lock_acquire(c, "w-killed", 60000, 20000, 2, &target));
    sleep_ms(1500);
    int64_t at = now_ms();
    CHECK_OK(rl_lock_release(c, "w-killed", held.id, &released));
    CHECK(take_one(q, &done, 5000));
    CHECK(done.status == RL_OK && done.acquired);
    CHECK(now_ms() - at < 900);
    redisFree(raw);
    rl_client_close(c);
    rl_completions_close(q);
}

/* Closing completes every sleeping wait with RL_ERR_CLOSED. */
static void test_close_with_waits(void)
{
    rl_client *c = patient_client();
    rl_client *holder = patient_client();
    rl_completions *q;
    rl_completion done[20];
    rl_permit held;
    rl_wait no_wait = {0, NULL, NULL};
    CHECK_OK(rl_completions_open(&q));
    rl_target target = {NULL, NULL, q};
    CHECK_OK(rl_lock_acquire(holder, "w-close", 60000, &no_wait, &held));
    for (int i = 0; i < 10; i++) CHECK_OK(rl_submit_lock_acquire(c, "w-close", 60000, 60000, (uint64_t)i, &target));
    for (int i = 10; i < 20; i++) CHECK_OK(rl_submit_queue_pop(c, "w-close-q", 1, 60000, (uint64_t)i, &target));
    sleep_ms(300);
    rl_client_close(c);
    CHECK_EQ(rl_completions_take(q, done, 20), 20);
    for (int i = 0; i < 20; i++) CHECK_EQ(done[i].status, RL_ERR_CLOSED);
    rl_client_close(holder);
    rl_completions_close(q);
}

int main(void)
{
    redis_start(&redis);
    test_woken_by_release();
    test_times_out();
    test_fifo_never_above_max();
    test_cancel();
    test_cancel_storm();
    test_pop();
    test_subscriber_killed();
    test_close_with_waits();
    redis_stop(&redis);
    return test_summary("waits");
}
