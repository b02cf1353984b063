/* Test harness: throwaway redis-server processes and tiny assertions. */
#ifndef RL_HARNESS_H
#define RL_HARNESS_H

#include <stdio.h>
#include <sys/types.h>
#include <hiredis/hiredis.h>

#include "ratelimit.h"

typedef struct {
    int port;
    pid_t pid;
    char url[600];
    char tls_dir[400]; /* non-empty: TLS only, with DIR/server.crt, server.key, ca.crt */
} test_redis;

/* A loopback TCP port nobody listens on (now). */
int free_port(void);
/* Starts redis-server on a free loopback port; exits the test on failure. */
void redis_start(test_redis *r);
/* The same, speaking only TLS (rediss://...?ssl_ca_certs=DIR/ca.crt). */
void redis_start_tls(test_redis *r, const char *tls_dir);
/* Starts it again on the same port (after redis_kill). */
void redis_restart(test_redis *r);
void redis_kill(test_redis *r);
void redis_pause(test_redis *r);
void redis_resume(test_redis *r);
void redis_stop(test_redis *r);

/* A plain hiredis connection for inspecting state. */
redisContext *redis_raw(const test_redis *r);
long long redis_int(redisContext *c, const char *fmt, ...);
long long redis_dbsize(const test_redis *r);
/* Keys not yet expired (DBSIZE also counts expired keys Redis has not reclaimed). */
long long redis_live_keys(const test_redis *r);
void redis_flush(const test_redis *r);
/* Scripts Redis has run (INFO commandstats: EVALSHA calls). */
long long redis_scripts_run(const test_redis *r);

rl_client *open_client(const test_redis *r, const rl_options *options);

extern int test_failures;
extern int test_checks;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        test_checks++;                                                               \
        if (!(cond)) {                                                               \
            test_failures++;                                                         \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                            \
    } while (0)

#define CHECK_EQ(a, b)                                                                                \
    do {                                                                                              \
        long long check_a_ = (long long)(a), check_b_ = (long long)(b);                               \
        test_checks++;                                                                                \
        if (check_a_ != check_b_) {                                                                   \
            test_failures++;                                                                          \
            fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %lld, expected %s == %lld\n", __FILE__,     \
                    __LINE__, #a, check_a_, #b, check_b_);                                            \
        }                                                                                             \
    } while (0)

#define CHECK_OK(expr)                                                                                  \
    do {                                                                                                \
        int check_rc_ = (expr);                                                                         \
        test_checks++;                                                                                  \
        if (check_rc_ != RL_OK) {                                                                       \
            test_failures++;                                                                            \
            fprintf(stderr, "%s:%d: %s returned %d (%s): %s\n", __FILE__, __LINE__, #expr, check_rc_,   \
                    rl_strerror(check_rc_), rl_errmsg());                                              \
        }                                                                                               \
    } while (0)

/* A decision's allowed, remaining, retry_after_ms and reset_after_ms. */
#define EXPECT(res, a, rem, retry, reset)           \
    do {                                            \
        rl_result r_ = (res);                       \
        CHECK_EQ(r_.allowed, a);                    \
        CHECK_EQ(r_.remaining, rem);                \
        CHECK_EQ(r_.retry_after_ms, retry);         \
        CHECK_EQ(r_.reset_after_ms, reset);         \
    } while (0)

/* Prints "N passed, N failed" and returns the exit code. */
int test_summary(const char *name);

/* Takes completions from q into out until want arrived or timeout_ms
 * passed; returns how many. */
size_t drain_completions(rl_completions *q, rl_completion *out, size_t want, int64_t timeout_ms);

/* poll(2) for POLLIN on fd (rl_completions_fd's), as poll returns. */
int wait_readable(int fd, int timeout_ms);

int64_t now_ms(void);
void sleep_ms(int64_t ms);
/* an acquire of 1 on name/id with a lease of lease_ms (limit per period) */
rl_request leased(const char *name, const char *id, rl_algorithm a, int64_t limit, int64_t period, int64_t lease_ms);

#endif
