/* Redis dies, hangs, restarts: calls fail fast with the right status, never
 * crash, and work again once Redis is back. */
#include <pthread.h>
#include <string.h>

#include "harness.h"

static test_redis redis;

static const rl_spec spec = {.algorithm = RL_TOKEN_BUCKET, .limit = 1000000, .period_ms = 1000, .burst = 0};

typedef struct {
    rl_client *client;
    volatile int stop;
    long ok, failed, wrong_status;
    int64_t slowest_failure_ms;
} hammer;

static void *hammer_run(void *arg)
{
    hammer *h = arg;
    rl_result r;
    while (!h->stop) {
        int64_t t = now_ms();
        int rc = rl_acquire(h->client, "fail", "x", &spec, 1, &r);
        t = now_ms() - t;
        if (rc == RL_OK) {
            __atomic_add_fetch(&h->ok, 1, __ATOMIC_RELAXED);
        } else {
            __atomic_add_fetch(&h->failed, 1, __ATOMIC_RELAXED);
            if (rc != RL_ERR_CONNECTION && rc != RL_ERR_TIMEOUT) __atomic_add_fetch(&h->wrong_status, 1, __ATOMIC_RELAXED);
            if (t > h->slowest_failure_ms) h->slowest_failure_ms = t;
            sleep_ms(5);
        }
    }
    return NULL;
}

static void test_killed_mid_run(void)
{
    rl_options o = RL_OPTIONS_INIT;
    o.connect_timeout_ms = 300;
    o.command_timeout_ms = 300;
    o.pool_size = 4;
    o.reconnect_max_ms = 100; /* back within 100 ms of Redis */
    hammer h;
    memset(&h, 0, sizeof h);
    h.client = open_client(&redis, &o);
    pthread_t threads[8];
    for (int i = 0; i < 8; i++) pthread_create(&threads[i], NULL, hammer_run, &h);
    sleep_ms(300);
    long ok_before = h.ok;
    redis_kill(&redis);
    sleep_ms(500);
    long failed_while_down = h.failed;
    redis_restart(&redis); /* empty: scripts must be loaded again, invisibly */
    sleep_ms(500);
    long ok_after_restart = h.ok;
    h.stop = 1;
    for (int i = 0; i < 8; i++) pthread_join(threads[i], NULL);
    CHECK(ok_before > 0);
    CHECK(failed_while_down > 0);
    CHECK_EQ(h.wrong_status, 0);
    CHECK(h.slowest_failure_ms <= 300 + 300 + 200);
    CHECK(h.ok > ok_after_restart - 1 && ok_after_restart > ok_before);
    rl_result r;
    CHECK_OK(rl_acquire(h.client, "fail", "x", &spec, 1, &r));
    printf("  killed mid-run: %ld ok, %ld failed, slowest failure %lld ms\n", h.ok, h.failed,
           (long long)h.slowest_failure_ms);
    rl_client_close(h.client);
}

static void test_hung_redis_times_out(void)
{
    rl_options o = RL_OPTIONS_INIT;
    o.command_timeout_ms = 400;
    rl_client *c = open_client(&redis, &o);
    rl_result r;
    CHECK_OK(rl_acquire(c, "hang", "x", &spec, 1, &r));
    redis_pause(&redis);
    int64_t t = now_ms();
    CHECK_EQ(rl_acquire(c, "hang", "x", &spec, 1, &r), RL_ERR_TIMEOUT);
    t = now_ms() - t;
    CHECK(t >= 350 && t < 1000);
    redis_resume(&redis);
    /* the timed-out connection is dropped, not reused with a stale reply */
    for (int i = 0; i < 3; i++) {
        CHECK_OK(rl_acquire(c, "hang", "x", &spec, 1, &r));
        CHECK_EQ(r.allowed, 1);
    }
    rl_client_close(c);
}

static void test_fail_open_and_closed(void)
{
    rl_options o = RL_OPTIONS_INIT;
    o.connect_timeout_ms = 200;
    o.command_timeout_ms = 200;
    o.on_error = RL_ON_ERROR_ALLOW;
    rl_client *open_c = open_client(&redis, &o);
    o.on_error = RL_ON_ERROR_DENY;
    rl_client *closed_c = open_client(&redis, &o);
    rl_result r;
    CHECK_OK(rl_acquire(open_c, "fo", "x", &spec, 1, &r));
    CHECK_EQ(r.fallback, 0);
    redis_kill(&redis);
    CHECK_OK(rl_acquire(open_c, "fo", "x", &spec, 1, &r));
    CHECK_EQ(r.allowed, 1);
    CHECK_EQ(r.fallback, 1);
    CHECK(strlen(rl_errmsg()) > 0);
    CHECK_OK(rl_acquire(closed_c, "fo", "x", &spec, 1, &r));
    CHECK_EQ(r.allowed, 0);
    CHECK_EQ(r.fallback, 1);
    /* invalid input is still an error: the policy covers Redis only */
    CHECK_EQ(rl_acquire(open_c, "fo", "", &spec, 1, &r), RL_ERR_INVALID);
    redis_restart(&redis);
    /* decisions resume within one reconnect pause (reconnect_max_ms) */
    int64_t back = now_ms();
    do {
        CHECK_OK(rl_acquire(closed_c, "fo", "x", &spec, 1, &r));
    } while (r.fallback && now_ms() - back < 1200 && (sleep_ms(1), 1));
    CHECK_EQ(r.allowed, 1);
    CHECK_EQ(r.fallback, 0);
    rl_client_close(open_c);
    rl_client_close(closed_c);
}

static void test_dead_at_open(void)
{
    rl_client *c = NULL;
    rl_options o = RL_OPTIONS_INIT;
    o.connect_timeout_ms = 200;
    redis_kill(&redis);
    int64_t t = now_ms();
    CHECK_EQ(rl_client_open(&c, redis.url, &o), RL_ERR_CONNECTION);
    CHECK(now_ms() - t < 500);
    CHECK(c == NULL);
    redis_restart(&redis);
}

/* An application boots while Redis is down, stays fast, and picks Redis up
 * within one reconnect pause once it is back. */
static void test_boot_during_outage(void)
{
    rl_client *c = NULL;
    rl_options o = RL_OPTIONS_INIT;
    rl_result r;
    o.on_error = RL_ON_ERROR_ALLOW;
    o.reconnect_max_ms = 500;
    redis_kill(&redis);
    CHECK_OK(rl_client_open(&c, redis.url, &o));
    CHECK(c != NULL);
    int64_t t = now_ms();
    long fallbacks = 0;
    for (int i = 0; i < 10000; i++) {
        CHECK_OK(rl_acquire(c, "boot", "x", &spec, 1, &r));
        fallbacks += r.fallback && r.allowed;
    }
    int64_t took = now_ms() - t;
    CHECK_EQ(fallbacks, 10000);
    /* a stored spec that cannot be read: the policy decides per request, but
     * never for bad input (an empty id refuses the batch) */
    rl_request stored[2] = {{.name = "boot", .id = "x", .permits = 1, .stored_spec = 1},
                            {.name = "boot", .id = "", .permits = 1, .stored_spec = 1}};
    rl_result rs[2];
    rl_outcome os[2];
    CHECK_EQ(rl_execute_each(c, stored, 2, rs, os), RL_ERR_INVALID);
    CHECK(strstr(os[1].error, "id") != NULL);
    stored[1].id = "y";
    CHECK_OK(rl_execute_each(c, stored, 2, rs, os));
    CHECK(rs[0].fallback && rs[0].allowed && rs[1].fallback && os[1].status == RL_OK && os[1].error[0]);
    CHECK(took < 1000);
    printf("  Redis down: 10000 decisions by policy in %lld ms\n", (long long)took);
    CHECK(strstr(rl_errmsg(), "unreachable") != NULL || strstr(rl_errmsg(), "connect") != NULL);

    /* raise: still told at once, and each call fails fast, not after a connect timeout */
    rl_client *strict = NULL;
    o.on_error = RL_ON_ERROR_RAISE;
    CHECK_EQ(rl_client_open(&strict, redis.url, &o), RL_ERR_CONNECTION);
    CHECK(strict == NULL);

    redis_restart(&redis);
    t = now_ms();
    do {
        CHECK_OK(rl_acquire(c, "boot", "x", &spec, 1, &r));
    } while (r.fallback && now_ms() - t < 2000 && (sleep_ms(1), 1));
    CHECK_EQ(r.fallback, 0);
    CHECK(now_ms() - t <= 500 + 100);
    printf("  Redis back: decisions from Redis again after %lld ms (reconnect_max_ms 500)\n", (long long)(now_ms() - t));
    rl_client_close(c);
}

int main(void)
{
    redis_start(&redis);
    test_hung_redis_times_out();
    test_fail_open_and_closed();
    test_dead_at_open();
    test_boot_during_outage();
    test_killed_mid_run();
    redis_stop(&redis);
    return test_summary("failure");
}
