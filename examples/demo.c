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

static void show(rl_client *client, rl_algorithm algorithm, const char *rate, int64_t burst, int calls)
{
    rl_spec spec = {.algorithm = algorithm, .limit = 0, .period_ms = 0, .burst = burst};
    rl_result r;
    if (rl_parse_rate(rate, &spec.limit, &spec.period_ms)) {
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

    show(client, RL_FIXED_WINDOW, "3/second", 0, 5);
    show(client, RL_SLIDING_LOG, "3/second", 0, 5);
    show(client, RL_SLIDING_WINDOW, "3/second", 0, 5);
    show(client, RL_TOKEN_BUCKET, "10/second", 5, 7);
    show(client, RL_LEAKY_BUCKET, "3 per 3 seconds", 0, 5);
    show(client, RL_GCRA, "10/second", 5, 7);

    printf("\nleaky_bucket reserve (a queue: each caller is told when to go):\n");
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

    printf("\nlock with fencing tokens:\n");
    for (int i = 0; i < 2; i++) {
        rl_permit lock;
        rl_lock_acquire(client, "demo-job", 10000, &none, &lock);
        printf("  acquired: %s, fencing token %lld\n", lock.acquired ? "yes" : "no", (long long)lock.fencing_token);
        rl_lock_release(client, "demo-job", lock.id, NULL);
    }
    rl_client_close(client);
    return 0;
}
