/* ratelimit demo: each algorithm admitting, then denying with retry-after.
 * Uses $REDIS_URL, or starts a throwaway redis-server on a free port. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ratelimit.h"

static pid_t server;

static int free_port(void)
{
    struct sockaddr_in addr = {0};
    socklen_t len = sizeof addr;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) || getsockname(fd, (struct sockaddr *)&addr, &len))
        return -1;
    close(fd);
    return ntohs(addr.sin_port);
}

static void stop_server(void)
{
    if (server > 0) {
        kill(server, SIGTERM);
        waitpid(server, NULL, 0);
    }
}

static int start_server(char *url, size_t size)
{
    int port = free_port();
    char port_text[16];
    if (port < 0) return -1;
    snprintf(port_text, sizeof port_text, "%d", port);
    server = fork();
    if (server == 0) {
        freopen("/dev/null", "w", stdout);
        freopen("/dev/null", "w", stderr);
        execlp("redis-server", "redis-server", "--port", port_text, "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "no", "--loglevel", "warning", (char *)NULL);
        _exit(127);
    }
    atexit(stop_server);
    snprintf(url, size, "redis://127.0.0.1:%d", port);
    return 0;
}

static rl_client *connect_with_retry(const char *url)
{
    rl_client *client = NULL;
    for (int i = 0; i < 100; i++) {
        if (rl_client_open(&client, url, NULL) == RL_OK) return client;
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "cannot connect to %s: %s\n", url, rl_errmsg());
    exit(1);
}

/* why: how this algorithm arrives at its retry time, printed under its calls */
static void show(rl_client *client, rl_algorithm algorithm, const char *rate, int64_t burst, int calls,
                 const char *why)
{
    rl_spec spec = {.algorithm = algorithm, .limit = 0, .period_ms = 0, .burst = burst};
    rl_result r;
    if (rl_rate_parse(rate, &spec.limit, &spec.period_ms)) {
        fprintf(stderr, "%s\n", rl_errmsg());
        exit(1);
    }
    printf("\n%s, %s%s:\n", rl_algorithm_name(algorithm), rate, burst ? " (burst 5)" : "");
    rl_reset(client, "demo", "user-42", &spec);
    for (int i = 1; i <= calls; i++) {
        if (rl_acquire(client, "demo", "user-42", &spec, 1, &r)) {
            fprintf(stderr, "acquire failed: %s\n", rl_errmsg());
            exit(1);
        }
        if (r.allowed)
            printf("  call %d: allowed   remaining %lld\n", i, (long long)r.remaining);
        else
            printf("  call %d: DENIED    retry after %lld ms\n", i, (long long)r.retry_after_ms);
    }
    printf("  why: %s\n", why);
}

int main(void)
{
    char url[256];
    const char *env = getenv("REDIS_URL");
    if (env && *env) {
        snprintf(url, sizeof url, "%s", env);
    } else if (start_server(url, sizeof url)) {
        perror("start redis-server");
        return 1;
    }
    rl_client *client = connect_with_retry(url);
    printf("ratelimit %d.%d.%d demo against %s\n", RL_VERSION_MAJOR, RL_VERSION_MINOR, RL_VERSION_PATCH, url);

    show(client, RL_FIXED_WINDOW, "3/second", 0, 5,
         "the window opened at the first call and lasts 1 s: a denied call waits for it to end (about 1000 ms)");
    show(client, RL_SLIDING_LOG, "3/second", 0, 5,
         "the log holds each admitted call for 1 s: room comes back when the oldest of them leaves (about 1000 ms)");
    show(client, RL_SLIDING_WINDOW, "3/second", 0, 5,
         "the estimate (previous window x its overlap + this one) must fall below 3: these 3 calls must become the "
         "previous window and start sliding out, a little after this window ends");
    show(client, RL_TOKEN_BUCKET, "10/second", 5, 7,
         "5 tokens to start, refilled at 10 per second: one token is 100 ms away");
    show(client, RL_LEAKY_BUCKET, "3 per 3 seconds", 0, 5,
         "a funnel of 3 that drains 1 per second: there is room again once one has leaked (about 1000 ms)");
    show(client, RL_GCRA, "10/second", 5, 7,
         "one cell every 100 ms with a tolerance of 5: the next cell conforms 100 ms after the last admitted one");

    printf("\nleaky_bucket reserve, rate 4 per 2 seconds (one slot every 500 ms), capacity 4, max wait 5 s\n"
           "(a queue: each caller is booked a slot and told how long to wait for it; a full queue refuses):\n");
    rl_request req = {.name = "demo", .id = "queue", .spec = {.algorithm = RL_LEAKY_BUCKET, .limit = 4, .period_ms = 2000, .burst = 0}, .permits = 1, .op = RL_OP_RESERVE, .max_wait_ms = 5000, .now_ms = 0};
    rl_result r;
    rl_reset(client, "demo", "queue", &req.spec);
    for (int i = 1; i <= 5; i++) {
        rl_execute(client, &req, 1, &r);
        if (r.allowed) printf("  caller %d: booked, wait %lld ms\n", i, (long long)r.wait_ms);
        else printf("  caller %d: queue full, retry after %lld ms\n", i, (long long)r.retry_after_ms);
    }

    printf("\nsemaphore of 2 permits:\n");
    rl_wait none = {0, NULL, NULL};
    rl_permit p[3];
    for (int i = 0; i < 3; i++) {
        rl_semaphore_acquire(client, "demo-db", 2, 10000, &none, &p[i]);
        printf("  acquire %d: %s\n", i + 1, p[i].acquired ? "granted" : "no permit free");
    }
    for (int i = 0; i < 3; i++)
        if (p[i].acquired) rl_semaphore_release(client, "demo-db", p[i].id, NULL);

    printf("\nlock with fencing tokens (a fencing token grows with every grant of the lock; pass it to the\n"
           "resource you guard so it can refuse a holder whose lease already expired):\n");
    for (int i = 0; i < 2; i++) {
        rl_permit lock;
        rl_lock_acquire(client, "demo-job", 10000, &none, &lock);
        printf("  acquired: %s, fencing token %lld\n", lock.acquired ? "yes" : "no", (long long)lock.fencing_token);
        int released = 0;
        rl_lock_release(client, "demo-job", lock.id, &released);
        printf("  released: %s%s\n", released ? "yes" : "no", i == 0 ? " (so it can be acquired again)" : "");
    }
    rl_client_close(client);
    return 0;
}
