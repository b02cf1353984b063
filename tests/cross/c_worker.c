/* The C side of the cross-language tests. Same command line as worker.py and
 * Worker.java:
 *   c_worker URL burst ALGORITHM LIMIT PERIOD_MS NAME ID THREADS CALLS
 *       -> prints the number of admitted calls (1 permit each, Redis time)
 *   c_worker URL step ALGORITHM LIMIT PERIOD_MS NAME ID OP PERMITS
 *       -> prints allowed remaining retry_after_ms reset_after_ms
 *   c_worker URL scripts
 *       -> prints "name sha1" per embedded script */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ratelimit.h"

static rl_client *client;
static rl_request request;
static int calls;
static long admitted;

static void die(const char *what)
{
    fprintf(stderr, "%s: %s\n", what, rl_errmsg());
    exit(1);
}

static void *burst(void *arg)
{
    rl_result r;
    (void)arg;
    for (int i = 0; i < calls; i++) {
        if (rl_execute(client, &request, 1, &r)) die("acquire");
        if (r.allowed) __atomic_add_fetch(&admitted, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

static void parse_request(char **argv)
{
    memset(&request, 0, sizeof request);
    if (rl_algorithm_parse(argv[0], &request.spec.algorithm)) die("algorithm");
    request.spec.limit = atoll(argv[1]);
    request.spec.period_ms = atoll(argv[2]);
    request.name = argv[3];
    request.id = argv[4];
    request.permits = 1;
}

int main(int argc, char **argv)
{
    rl_options o = RL_OPTIONS_INIT;
    o.command_timeout_ms = 5000;
    if (argc < 3) {
        fprintf(stderr, "usage: see the comment at the top of c_worker.c\n");
        return 2;
    }
    if (rl_client_open(&client, argv[1], &o)) die("open");
    if (!strcmp(argv[2], "scripts")) {
        for (size_t i = 0; i < rl_script_count(); i++) {
            const char *name, *sha;
            rl_script_info(i, &name, &sha);
            printf("%s %s\n", name, sha);
        }
    } else if (!strcmp(argv[2], "burst") && argc == 10) {
        int threads = atoi(argv[8]);
        pthread_t t[64];
        parse_request(argv + 3);
        calls = atoi(argv[9]);
        for (int i = 0; i < threads && i < 64; i++) pthread_create(&t[i], NULL, burst, NULL);
        for (int i = 0; i < threads && i < 64; i++) pthread_join(t[i], NULL);
        printf("%ld\n", admitted);
    } else if (!strcmp(argv[2], "step") && argc == 10) {
        rl_result r;
        parse_request(argv + 3);
        request.op = !strcmp(argv[8], "peek") ? RL_OP_PEEK : RL_OP_ACQUIRE;
        request.permits = atoll(argv[9]);
        if (rl_execute(client, &request, 1, &r)) die("step");
        printf("%d %lld %lld %lld\n", r.allowed, (long long)r.remaining, (long long)r.retry_after_ms,
               (long long)r.reset_after_ms);
    } else {
        fprintf(stderr, "unknown command\n");
        return 2;
    }
    rl_client_close(client);
    return 0;
}
