/* Test helpers shared by the fault suites: a redis-server that takes DEBUG,
 * and Toxiproxy (one proxy named "redis") driven over its HTTP API. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "toxiproxy.h"

#define SKIPPED 77

static pid_t tox_pid;
static int tox_port;

/* ---- processes ------------------------------------------------------------- */

/* The harness's server cannot take DEBUG (enable-debug-command is fixed at
 * start): this one can. */
void start_redis(test_redis *r)
{
    char port[16];
    memset(r, 0, sizeof *r);
    r->port = free_port();
    snprintf(port, sizeof port, "%d", r->port);
    snprintf(r->url, sizeof r->url, "redis://127.0.0.1:%d", r->port);
    if ((r->pid = fork()) == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) dup2(devnull, 1);
        /* a replica loads its sync from the socket: no dump.rdb in the working directory */
        execlp("redis-server", "redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly",
               "no", "--repl-diskless-load", "swapdb", "--enable-debug-command", "local", "--loglevel", "warning",
               (char *)NULL);
        perror("exec redis-server");
        _exit(127);
    }
    for (int i = 0; i < 500; i++) {
        redisContext *c = redisConnect("127.0.0.1", r->port);
        int up = c && !c->err;
        if (c) redisFree(c);
        if (up) return;
        sleep_ms(10);
    }
    fprintf(stderr, "redis-server did not start\n");
    exit(2);
}

void start_toxiproxy(const char *root)
{
    char path[1024];
    const char *env = getenv("RL_TOXIPROXY_SERVER");
    struct stat st;
    if (env && *env) snprintf(path, sizeof path, "%s", env);
    else snprintf(path, sizeof path, "%s/build/deps/toxiproxy/toxiproxy-server", root ? root : ".");
    if (stat(path, &st) != 0) snprintf(path, sizeof path, "toxiproxy-server");
    tox_port = free_port();
    char port[16];
    snprintf(port, sizeof port, "%d", tox_port);
    if ((tox_pid = fork()) == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) {
            dup2(devnull, 1);
            dup2(devnull, 2);
        }
        execlp(path, path, "-host", "127.0.0.1", "-port", port, (char *)NULL);
        _exit(127);
    }
    char reply[256];
    for (int i = 0; i < 500; i++) {
        int status;
        if (waitpid(tox_pid, &status, WNOHANG) == tox_pid) {
            tox_pid = 0;
            const char *required = getenv("RL_REQUIRE_TOXIPROXY");
            if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && !(required && !strcmp(required, "1"))) {
                printf("SKIPPED: no toxiproxy-server (%s): run scripts/deps.sh, or set RL_TOXIPROXY_SERVER\n", path);
                exit(SKIPPED);
            }
            break;
        }
        if (http("GET", "/version", NULL, reply, sizeof reply) == 200) return;
        sleep_ms(10);
    }
    fprintf(stderr, "toxiproxy-server (%s) did not start: run scripts/deps.sh, or set RL_TOXIPROXY_SERVER\n", path);
    exit(2);
}

/* ---- Toxiproxy's HTTP API ---------------------------------------------------- */

/* One request (Connection: close); returns the HTTP status, -1 if none. */
int http(const char *method, const char *path, const char *body, char *out, size_t out_size)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)tox_port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    char req[2048];
    int n = snprintf(req, sizeof req,
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                     method, path, body ? strlen(body) : 0, body ? body : "");
    if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
        close(fd);
        return -1;
    }
    size_t got = 0;
    ssize_t k;
    while (got + 1 < out_size && (k = recv(fd, out + got, out_size - 1 - got, 0)) > 0) got += (size_t)k;
    out[got] = '\0';
    close(fd);
    int status = -1;
    if (sscanf(out, "HTTP/1.%*d %d", &status) != 1) return -1;
    return status;
}

void tox(const char *method, const char *path, const char *body)
{
    char reply[4096];
    int status = http(method, path, body, reply, sizeof reply);
    if (status < 200 || status > 299) {
        fprintf(stderr, "toxiproxy %s %s %s: %d\n%s\n", method, path, body ? body : "", status, reply);
        exit(2);
    }
}

void toxic(const char *type, const char *stream, const char *attributes)
{
    char body[512];
    snprintf(body, sizeof body, "{\"name\":\"%s_%s\",\"type\":\"%s\",\"stream\":\"%s\",\"attributes\":%s}", type, stream,
             type, stream, attributes);
    tox("POST", "/proxies/redis/toxics", body);
}

/* Removes every toxic (and enables the proxy again). */
void proxy_reset(void)
{
    tox("POST", "/reset", NULL);
}

/* The same, and cuts every connection through the proxy: a TCP connection
 * that lost bytes (a blackhole toxic drops them) never comes back in
 * reality either. Cut first: a call sent between removing the toxics and
 * the cut would reach Redis and lose its reply. */
void proxy_heal(void)
{
    tox("POST", "/proxies/redis", "{\"enabled\":false}");
    proxy_reset(); /* enables it again */
}

int create_proxy(int upstream_port)
{
    char body[256], reply[1024];
    int port = 0;
    snprintf(body, sizeof body, "{\"name\":\"redis\",\"listen\":\"127.0.0.1:0\",\"upstream\":\"127.0.0.1:%d\"}", upstream_port);
    const char *listen = "\"listen\":\"127.0.0.1:";
    if (http("POST", "/proxies", body, reply, sizeof reply) != 201 || !strstr(reply, listen) ||
        sscanf(strstr(reply, listen) + strlen(listen), "%d", &port) != 1) {
        fprintf(stderr, "toxiproxy: cannot create the proxy: %s\n", reply);
        exit(2);
    }
    return port;
}

void stop_toxiproxy(void)
{
    if (tox_pid > 0) {
        kill(tox_pid, SIGTERM);
        waitpid(tox_pid, NULL, 0);
        tox_pid = 0;
    }
}
