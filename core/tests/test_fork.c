/* fork() while every path of one client is busy: three threads calling
 * rl_execute (one of them through a stored spec), one calling rl_submit;
 * each child then uses that client (and a queue the parent opened) and must
 * get its answers, neither hanging nor crashing. */
#define _GNU_SOURCE /* a writer-preferring rwlock */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"


/* ASan's allocator before LLVM 18 is not fork-safe (llvm/llvm-project
 * #75290): a child deadlocks in malloc when a parent's thread was in its slow
 * path. Under ASan the forks wait until no thread is in a call and nothing is
 * in flight (the child's fresh start is still checked); without it they
 * happen at any point. */
#if defined(__SANITIZE_ADDRESS__)
#define FORK_BETWEEN_CALLS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FORK_BETWEEN_CALLS 1
#endif
#endif
#ifndef FORK_BETWEEN_CALLS
#define FORK_BETWEEN_CALLS 0
#endif

/* a fork costs ~2 ms (~40 under ASan): a few seconds either way */
enum { FORKS = FORK_BETWEEN_CALLS ? 300 : 1000, AT_ONCE = 10, CHILD_WAIT_MS = 5000 };

static test_redis redis;
static volatile int stopping;
static pthread_rwlock_t calls; /* FORK_BETWEEN_CALLS: held for reading by a call, for writing by fork */

static void call_begins(void)
{
    if (FORK_BETWEEN_CALLS) pthread_rwlock_rdlock(&calls);
}

static void call_ends(void)
{
    if (FORK_BETWEEN_CALLS) pthread_rwlock_unlock(&calls);
}
static const rl_spec spec = {.algorithm = RL_FIXED_WINDOW, .limit = 1000000000, .period_ms = 3600000, .burst = 0};

static rl_request decision(const char *name, int stored)
{
    rl_request req = {.name = name, .id = "x", .spec = spec, .permits = 1, .op = RL_OP_ACQUIRE};
    req.stored_spec = stored;
    return req;
}

static void *blocking_caller(void *arg)
{
    rl_client *c = arg;
    static int next;
    int stored = __atomic_fetch_add(&next, 1, __ATOMIC_RELAXED) == 0;
    rl_request req = decision(stored ? "fork-stored" : "fork-blocking", stored);
    rl_result r;
    while (!stopping) {
        call_begins();
        rl_execute(c, &req, 1, &r);
        call_ends();
    }
    return NULL;
}

static void count_done(void *ctx, const rl_completion *done)
{
    (void)done;
    __atomic_fetch_add((int *)ctx, 1, __ATOMIC_RELEASE);
}

static void *submitter(void *arg)
{
    rl_client *c = arg;
    rl_request req = decision("fork-async", 0);
    int done = 0, sent = 0;
    rl_target target = {count_done, &done, NULL};
    while (!stopping) {
        call_begins();
        if (rl_submit(c, &req, 0, &target) == RL_OK) sent++;
        int most = FORK_BETWEEN_CALLS ? 0 : 64;
        while (sent - __atomic_load_n(&done, __ATOMIC_ACQUIRE) > most) usleep(100);
        call_ends();
    }
    while (__atomic_load_n(&done, __ATOMIC_ACQUIRE) < sent) usleep(1000);
    return NULL;
}

/* The child: one submit to a callback, one to the parent's queue, one
 * blocking call through the stored spec; exit 0 when all three answered. */
static int child(rl_client *c, rl_completions *q)
{
    rl_request req = decision("fork-child", 0);
    int done = 0;
    rl_target callback = {count_done, &done, NULL}, queued = {NULL, NULL, q};
    rl_completion got[4];
    if (rl_submit(c, &req, 1, &callback) != RL_OK || rl_submit(c, &req, 2, &queued) != RL_OK) return 2;
    int64_t until = now_ms() + CHILD_WAIT_MS;
    while (!__atomic_load_n(&done, __ATOMIC_ACQUIRE) && now_ms() < until) usleep(200);
    if (!done) return 3;
    size_t n = 0;
    while (n == 0 && now_ms() < until) n = drain_completions(q, got, 1, 50);
    if (n != 1 || got[0].tag != 2 || got[0].status != RL_OK || !got[0].result.allowed) return 4;
    rl_request stored = decision("fork-stored", 1);
    rl_result r;
    if (rl_execute(c, &stored, 1, &r) != RL_OK || !r.allowed) return 5;
    rl_client_close(c);
    return 0;
}

/* Waits for pid up to CHILD_WAIT_MS + 2 s; kills it when it hangs. */
static int reap(pid_t pid, int *hung)
{
    int status = 0;
    int64_t until = now_ms() + CHILD_WAIT_MS + 2000;
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (now_ms() > until) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            (*hung)++;
            return -1;
        }
        usleep(500);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void test_forks_while_busy(void)
{
    rl_options o = RL_OPTIONS_INIT;
    o.command_timeout_ms = 4000;
    rl_client *c = open_client(&redis, &o);
    rl_completions *q;
    CHECK_OK(rl_completions_open(&q));
    CHECK_OK(rl_config_set(c, "fork-stored", &spec));
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
#ifdef __GLIBC__ /* glibc's readers starve a writer unless told; musl has no kinds */
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
#endif
    pthread_rwlock_init(&calls, &attr);
    pthread_t threads[4];
    for (int i = 0; i < 3; i++) pthread_create(&threads[i], NULL, blocking_caller, c);
    pthread_create(&threads[3], NULL, submitter, c);

    int failed = 0, hung = 0, crashed = 0;
    for (int started = 0; started < FORKS; started += AT_ONCE) {
        pid_t pids[AT_ONCE];
        for (int i = 0; i < AT_ONCE; i++) {
            usleep((useconds_t)(rand() % 500)); /* fork at varied points of the others' work */
            if (FORK_BETWEEN_CALLS) pthread_rwlock_wrlock(&calls);
            if ((pids[i] = fork()) == 0) _exit(child(c, q));
            if (FORK_BETWEEN_CALLS) pthread_rwlock_unlock(&calls);
        }
        for (int i = 0; i < AT_ONCE; i++) {
            int code = reap(pids[i], &hung);
            if (code > 128) crashed++;
            if (code) {
                failed++;
                if (failed <= 20) fprintf(stderr, "child %d: %s %d\n", started + i, code < 0 ? "hung" : "exit", code);
            }
        }
    }
    stopping = 1;
    for (int i = 0; i < 4; i++) pthread_join(threads[i], NULL);
    printf("%d forks: %d failed (%d hung, %d crashed)\n", FORKS, failed, hung, crashed);
    CHECK_EQ(failed, 0);
    /* the parent's paths still work, queue included */
    rl_request req = decision("fork-after", 0);
    rl_result r;
    CHECK_OK(rl_execute(c, &req, 1, &r));
    rl_target queued = {NULL, NULL, q};
    rl_completion got;
    CHECK_OK(rl_submit(c, &req, 7, &queued));
    CHECK_EQ(drain_completions(q, &got, 1, 5000), 1);
    CHECK_EQ(got.tag, 7);
    rl_client_close(c);
    rl_completions_close(q);
}

int main(void)
{
    redis_start(&redis);
    test_forks_while_busy();
    redis_stop(&redis);
    return test_summary("fork");
}
