/* What the C benches share: the Redis they run against (REDIS_URL, a
 * redis://host:port; host and port for their raw hiredis connections) and
 * a monotonic clock in seconds. */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static const char *url = "redis://127.0.0.1:6379";
static char host[64] = "127.0.0.1";
static int port = 6379;

static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* url, host and port from REDIS_URL (else the default); 1, having said
 * why, when it is not a redis://host:port URL */
static inline int bench_redis_from_env(const char *program)
{
    if (getenv("REDIS_URL")) url = getenv("REDIS_URL");
    if (sscanf(url, "redis://%63[^:]:%d", host, &port) < 1) {
        fprintf(stderr, "%s needs a redis://host:port URL\n", program);
        return 1;
    }
    return 0;
}

#endif
