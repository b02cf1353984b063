#include "harness.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _WIN32
#include <winsock2.h>
#include <ws2tcpip.h>
#else
#include <poll.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

int test_failures;
int test_checks;

int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

#ifdef _WIN32
/* Under Wine a test can neither start nor signal a Linux redis-server
 * itself: core/tests/redis_ctl.py does it on request, one line each way, at
 * 127.0.0.1:$RL_TEST_REDIS_CTL (scripts/windows-test.sh starts it). Its
 * answer "ok N" gives N. */
static long long ctl(const char *fmt, ...)
{
    WSADATA wsa;
    char line[1000], answer[200];
    const char *port = getenv("RL_TEST_REDIS_CTL");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (!port || WSAStartup(MAKEWORD(2, 2), &wsa)) {
        fprintf(stderr, "no RL_TEST_REDIS_CTL (core/tests/redis_ctl.py) to start redis-server\n");
        exit(2);
    }
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((u_short)atoi(port))};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    SOCKET s = socket(AF_INET, SOCK_STREAM, 0);
    int got = 0, n;
    if (s == INVALID_SOCKET || connect(s, (struct sockaddr *)&addr, sizeof addr) ||
        send(s, line, (int)strlen(line), 0) != (int)strlen(line)) {
        fprintf(stderr, "redis_ctl at port %s: error %d\n", port, WSAGetLastError());
        exit(2);
    }
    while (got < (int)sizeof answer - 1 && (n = recv(s, answer + got, (int)sizeof answer - 1 - got, 0)) > 0) got += n;
    closesocket(s);
    answer[got] = 0;
    if (strncmp(answer, "ok ", 3) != 0) {
        fprintf(stderr, "redis_ctl: %s -> %s\n", line, answer);
        exit(2);
    }
    return atoll(answer + 3);
}

int free_port(void)
{
    WSADATA wsa;
    struct sockaddr_in addr;
    int len = sizeof addr;
    WSAStartup(MAKEWORD(2, 2), &wsa);
    SOCKET fd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd == INVALID_SOCKET || bind(fd, (struct sockaddr *)&addr, sizeof addr) ||
        getsockname(fd, (struct sockaddr *)&addr, &len)) {
        fprintf(stderr, "free_port: error %d\n", WSAGetLastError());
        exit(2);
    }
    closesocket(fd);
    return ntohs(addr.sin_port);
}

static void launch(test_redis *r)
{
    r->pid = (pid_t)ctl("start %d %s\n", r->port, r->tls_dir[0] ? r->tls_dir : "-");
}

static void signal_server(test_redis *r, const char *what)
{
    ctl("%s %lld\n", what, (long long)r->pid);
}

int wait_readable(int fd, int timeout_ms)
{
    WSAPOLLFD p = {.fd = (SOCKET)fd, .events = POLLIN};
    return WSAPoll(&p, 1, timeout_ms);
}
#else
int free_port(void)
{
    struct sockaddr_in addr;
    socklen_t len = sizeof addr;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) || getsockname(fd, (struct sockaddr *)&addr, &len)) {
        perror("free_port");
        exit(2);
    }
    close(fd);
    return ntohs(addr.sin_port);
}

static void launch(test_redis *r)
{
    char port[16];
    snprintf(port, sizeof port, "%d", r->port);
    r->pid = fork();
    if (r->pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) dup2(devnull, 1);
        if (r->tls_dir[0]) {
            char cert[600], key[600], ca[600];
            snprintf(cert, sizeof cert, "%s/server.crt", r->tls_dir);
            snprintf(key, sizeof key, "%s/server.key", r->tls_dir);
            snprintf(ca, sizeof ca, "%s/ca.crt", r->tls_dir);
            execlp("redis-server", "redis-server", "--port", "0", "--tls-port", port, "--tls-cert-file", cert,
                   "--tls-key-file", key, "--tls-ca-cert-file", ca, "--tls-auth-clients", "no", "--bind",
                   "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning",
                   (char *)NULL);
        }
        execlp("redis-server", "redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning", (char *)NULL);
        perror("exec redis-server");
        _exit(127);
    }
}

static void signal_server(test_redis *r, const char *what)
{
    if (!strcmp(what, "pause")) {
        kill(r->pid, SIGSTOP);
    } else if (!strcmp(what, "resume")) {
        kill(r->pid, SIGCONT);
    } else {
        if (!strcmp(what, "stop")) {
            kill(r->pid, SIGCONT);
            kill(r->pid, SIGTERM);
        } else {
            kill(r->pid, SIGKILL);
        }
        waitpid(r->pid, NULL, 0);
    }
}

int wait_readable(int fd, int timeout_ms)
{
    struct pollfd p = {fd, POLLIN, 0};
    return poll(&p, 1, timeout_ms);
}
#endif

static void spawn(test_redis *r)
{
    launch(r);
    for (int i = 0; i < 500 && r->tls_dir[0]; i++) {
        rl_client *client = NULL;
        if (rl_client_open(&client, r->url, NULL) == RL_OK) {
            rl_client_close(client);
            return;
        }
        sleep_ms(10);
    }
    for (int i = 0; i < 500 && !r->tls_dir[0]; i++) {
        redisContext *c = redisConnect("127.0.0.1", r->port);
        if (c && !c->err) {
            redisReply *reply = redisCommand(c, "PING");
            int ok = reply && reply->type == REDIS_REPLY_STATUS;
            if (reply) freeReplyObject(reply);
            redisFree(c);
            if (ok) return;
        } else if (c) {
            redisFree(c);
        }
        sleep_ms(10);
    }
    fprintf(stderr, "redis-server did not start on port %d\n", r->port);
    exit(2);
}

void redis_start(test_redis *r)
{
    r->port = free_port();
    snprintf(r->url, sizeof r->url, "redis://127.0.0.1:%d", r->port);
    spawn(r);
}

void redis_start_tls(test_redis *r, const char *tls_dir)
{
    r->port = free_port();
    snprintf(r->tls_dir, sizeof r->tls_dir, "%s", tls_dir);
    snprintf(r->url, sizeof r->url, "rediss://127.0.0.1:%d?ssl_ca_certs=%s/ca.crt", r->port, tls_dir);
    spawn(r);
}

void redis_restart(test_redis *r)
{
    spawn(r);
}

void redis_kill(test_redis *r)
{
    if (r->pid > 0) {
        signal_server(r, "kill");
        r->pid = 0;
    }
}

void redis_pause(test_redis *r)
{
    signal_server(r, "pause");
}

void redis_resume(test_redis *r)
{
    signal_server(r, "resume");
}

void redis_stop(test_redis *r)
{
    if (r->pid > 0) {
        signal_server(r, "stop");
        r->pid = 0;
    }
}

redisContext *redis_raw(const test_redis *r)
{
    redisContext *c = redisConnect("127.0.0.1", r->port);
    if (!c || c->err) {
        fprintf(stderr, "cannot connect to test redis\n");
        exit(2);
    }
    return c;
}

long long redis_int(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *reply = redisvCommand(c, fmt, ap);
    va_end(ap);
    long long v = -999999;
    if (reply && reply->type == REDIS_REPLY_INTEGER) v = reply->integer;
    if (reply) freeReplyObject(reply);
    return v;
}

long long redis_dbsize(const test_redis *r)
{
    redisContext *c = redis_raw(r);
    long long n = redis_int(c, "DBSIZE");
    redisFree(c);
    return n;
}

long long redis_live_keys(const test_redis *r)
{
    redisContext *c = redis_raw(r);
    redisReply *reply = redisCommand(c, "KEYS *");
    long long n = reply && reply->type == REDIS_REPLY_ARRAY ? (long long)reply->elements : -1;
    if (reply) freeReplyObject(reply);
    redisFree(c);
    return n;
}

void redis_flush(const test_redis *r)
{
    redisContext *c = redis_raw(r);
    redisReply *reply = redisCommand(c, "FLUSHALL");
    if (reply) freeReplyObject(reply);
    redisFree(c);
}

long long redis_scripts_run(const test_redis *r)
{
    redisContext *c = redis_raw(r);
    redisReply *info = redisCommand(c, "INFO commandstats");
    const char *at = info && info->type == REDIS_REPLY_STRING ? strstr(info->str, "cmdstat_evalsha:calls=") : NULL;
    long long n = at ? atoll(at + strlen("cmdstat_evalsha:calls=")) : 0;
    if (info) freeReplyObject(info);
    redisFree(c);
    return n;
}

rl_client *open_client(const test_redis *r, const rl_options *options)
{
    rl_client *client = NULL;
    int rc = rl_client_open(&client, r->url, options);
    if (rc) {
        fprintf(stderr, "rl_client_open(%s): %s: %s\n", r->url, rl_strerror(rc), rl_errmsg());
        exit(2);
    }
    return client;
}

int test_summary(const char *name)
{
    printf("%s: %d passed, %d failed\n", name, test_checks - test_failures, test_failures);
    return test_failures ? 1 : 0;
}

size_t drain_completions(rl_completions *q, rl_completion *out, size_t want, int64_t timeout_ms)
{
    size_t got = rl_completions_take(q, out, want);
    int64_t end = now_ms() + timeout_ms;
    while (got < want && now_ms() < end) {
        wait_readable(rl_completions_fd(q), 20);
        got += rl_completions_take(q, out + got, want - got);
    }
    return got;
}

/* An acquire of 1 with a lease (limit per period). */
rl_request leased(const char *name, const char *id, rl_algorithm a, int64_t limit, int64_t period,
                 int64_t lease_ms)
{
    rl_request req;
    memset(&req, 0, sizeof req);
    req.name = name;
    req.id = id;
    req.spec.algorithm = a;
    req.spec.limit = limit;
    req.spec.period_ms = period;
    req.permits = 1;
    req.op = RL_OP_ACQUIRE;
    req.lease_ms = lease_ms;
    return req;
}
