/* Leases against clocks that jump (issue 32), in all six algorithms, 100
 * per 2 s, leases of 1 s: a client holding a block (15 permits left) must
 * not admit from it once Redis may have handed the full limit out again.
 *
 * Suspend: this binary's own clock_gettime stands CLOCK_MONOTONIC still
 * for 3 s while every other clock (and Redis) goes on, as a laptop lid or a
 * paused VM does. The block's validity must count that time.
 *
 * Server clock step: a redis-server with server_clock_shift.so preloaded,
 * whose clock steps 3 s forward; the leasing client reads a grant for
 * another key of that server and must end the block in hand.
 *
 * In both, another client then takes what Redis admits, and the leasing
 * client's next calls may admit only what the time since can have freed
 * (a permit in 20 ms): with the block, 15. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define LIMIT 100
#define PERIOD_MS 2000
#define LEASE_MS 1000
#define JUMP_MS 3000

/* ---- a monotonic clock that stops ------------------------------------------------ */

static int64_t frozen_for_ns; /* CLOCK_MONOTONIC lags the real one by this */
static int64_t frozen_at_ns;  /* nonzero: it reads this, still */

static int64_t ns_of(const struct timespec *ts)
{
    return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

int clock_gettime(clockid_t id, struct timespec *ts)
{
    if (syscall(SYS_clock_gettime, id, ts)) return -1;
    if (id == CLOCK_MONOTONIC || id == CLOCK_MONOTONIC_RAW || id == CLOCK_MONOTONIC_COARSE) {
        int64_t frozen = __atomic_load_n(&frozen_at_ns, __ATOMIC_ACQUIRE);
        int64_t ns = frozen ? frozen : ns_of(ts) - __atomic_load_n(&frozen_for_ns, __ATOMIC_ACQUIRE);
        ts->tv_sec = (time_t)(ns / 1000000000);
        ts->tv_nsec = (long)(ns % 1000000000);
    }
    return 0;
}

static void suspend(int64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    __atomic_store_n(&frozen_at_ns, ns_of(&ts), __ATOMIC_RELEASE);
    sleep_ms(ms);
    __atomic_add_fetch(&frozen_for_ns, ms * 1000000, __ATOMIC_RELEASE);
    __atomic_store_n(&frozen_at_ns, 0, __ATOMIC_RELEASE);
}

/* ---- the scenario ------------------------------------------------------------------ */

static rl_request request(rl_algorithm a, const char *id, int64_t lease_ms)
{
    return leased("clock", id, a, LIMIT, PERIOD_MS, lease_ms);
}

static int admitted(rl_client *c, const rl_request *req, int tries)
{
    int n = 0;
    rl_result r;
    for (int i = 0; i < tries; i++) n += rl_execute(c, req, 1, &r) == RL_OK && r.allowed;
    return n;
}

/* 1 + 2 + 4 + 8 permits from four blocks, then a block of 16 taking 1:
 * 15 left in hand. */
static void hold_block(rl_client *leasing, const rl_request *req)
{
    CHECK_EQ(admitted(leasing, req, 16), 16);
}

static void after_jump(rl_client *leasing, rl_client *other, const rl_request *leased, const char *what)
{
    rl_request plain = *leased;
    plain.lease_ms = 0;
    int64_t start = now_ms();
    int others = 0;
    rl_result r;
    while (rl_execute(other, &plain, 1, &r) == RL_OK && r.allowed && others <= LIMIT) others++;
    int ours = admitted(leasing, leased, 20);
    int64_t elapsed = now_ms() - start;
    int refilled = (int)(elapsed * LIMIT / PERIOD_MS) + 1; /* at most, meanwhile */
    printf("  %s %s: the other client %d, the leasing one %d within %lld ms (limit %d)\n", what,
           rl_algorithm_name(leased->spec.algorithm), others, ours, (long long)elapsed, LIMIT);
    CHECK(ours <= refilled);
    CHECK(others + ours <= LIMIT + refilled);
}

static void suspended(const test_redis *redis)
{
    rl_client *leasing = open_client(redis, NULL), *other = open_client(redis, NULL);
    rl_request reqs[RL_ALGORITHM_COUNT];
    for (int a = 0; a < RL_ALGORITHM_COUNT; a++) {
        reqs[a] = request((rl_algorithm)a, "suspend", LEASE_MS);
        hold_block(leasing, &reqs[a]);
    }
    suspend(JUMP_MS);
    for (int a = 0; a < RL_ALGORITHM_COUNT; a++) after_jump(leasing, other, &reqs[a], "suspended");
    rl_client_close(leasing);
    rl_client_close(other);
}

static volatile int64_t *shift_ms; /* the stepped server's clock, ahead by */

static void stepped(const test_redis *redis)
{
    rl_client *leasing = open_client(redis, NULL), *other = open_client(redis, NULL);
    for (int a = 0; a < RL_ALGORITHM_COUNT; a++) {
        rl_request req = request((rl_algorithm)a, "step", LEASE_MS);
        rl_request probe = request((rl_algorithm)a, "probe", LEASE_MS);
        CHECK_EQ(admitted(leasing, &probe, 1), 1); /* the server's clock as it was */
        hold_block(leasing, &req);
        *shift_ms += JUMP_MS;
        /* a grant for another key on the server shows the step */
        probe.id = "probe-after";
        CHECK_EQ(admitted(leasing, &probe, 1), 1);
        after_jump(leasing, other, &req, "stepped");
    }
    rl_client_close(leasing);
    rl_client_close(other);
}

int main(int argc, char **argv)
{
    test_redis redis;
    memset(&redis, 0, sizeof redis);
    redis_start(&redis);
    suspended(&redis);
    redis_stop(&redis);

    /* argv[1]: server_clock_shift.so */
    char path[] = "/tmp/rl-clock-shift-XXXXXX";
    int fd = mkstemp(path);
    if (argc < 2 || fd < 0 || ftruncate(fd, sizeof(int64_t)) ||
        (shift_ms = mmap(NULL, sizeof(int64_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
        fprintf(stderr, "no shifted clock for redis-server\n");
        return 2;
    }
    close(fd);
    setenv("RL_TEST_CLOCK_SHIFT_FILE", path, 1);
    setenv("LD_PRELOAD", argv[1], 1);
    redis_start(&redis);
    unsetenv("LD_PRELOAD");
    redisContext *raw = redis_raw(&redis);
    redisReply *before = redisCommand(raw, "TIME");
    *shift_ms = 60000;
    redisReply *after = redisCommand(raw, "TIME");
    CHECK(atoll(after->element[0]->str) - atoll(before->element[0]->str) >= 59); /* the shift works */
    freeReplyObject(before);
    freeReplyObject(after);
    redisFree(raw);
    stepped(&redis);
    redis_stop(&redis);
    unlink(path);
    return test_summary("lease_clock");
}
