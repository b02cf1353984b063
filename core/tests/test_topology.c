/* The algorithms and primitives over TLS, Sentinel and Cluster, and what
 * happens under failover and slot migration. Servers come from
 * tests/topology/topology.py (RL_TEST_* variables, or DIR/env). */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#define RL_HIREDIS_REPLIES /* it reads INFO and CLUSTER SLOTS on a hiredis context of its own */
#include "internal.h"

static char topo_dir[512];
static const char *repo_root;

/* RL_TEST_* from the environment, else from DIR/env ("export NAME=value") */
static void load_env(const char *dir)
{
    char path[600], line[2048];
    if (getenv("RL_TEST_CLUSTER_URL")) return;
    snprintf(path, sizeof path, "%s/env", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "no RL_TEST_* variables and no %s: start tests/topology/topology.py first\n", path);
        exit(2);
    }
    while (fgets(line, sizeof line, f)) {
        char *p = line, *eq;
        line[strcspn(line, "\n")] = '\0';
        if (!strncmp(p, "export ", 7)) p += 7;
        if (!(eq = strchr(p, '='))) continue;
        *eq = '\0';
        char *v = eq + 1;
        size_t len = strlen(v);
        if (len >= 2 && (v[0] == '\'' || v[0] == '"') && v[len - 1] == v[0]) {
            v[len - 1] = '\0';
            v++;
        }
        setenv(p, v, 1);
    }
    fclose(f);
}

static const char *env(const char *name)
{
    const char *v = getenv(name);
    if (!v || !*v) {
        fprintf(stderr, "%s is not set\n", name);
        exit(2);
    }
    return v;
}

/* Runs a topology.py helper; its last output line goes to out. */
static int topology_call(const char *call, char *out, size_t size)
{
    char cmd[4096], line[512] = "";
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import sys; sys.path.insert(0, \"%s/tests/topology\"); import topology as t; "
             "r = t.%s; print(r)' 2>&1",
             repo_root, call);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    while (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = '\0';
        if (out) snprintf(out, size, "%s", line);
    }
    return pclose(p);
}

static rl_client *open_url(const char *url, const rl_options *o)
{
    rl_client *c = NULL;
    int rc = rl_client_open(&c, url, o);
    if (rc) {
        fprintf(stderr, "open %s: %s\n", url, rl_errmsg());
        exit(2);
    }
    return c;
}

/* ---- the suite every deployment runs ------------------------------------ */

typedef struct {
    rl_client *client;
    const char *name;
    rl_spec spec;
    int calls;
    long admitted;
    long errors;
} burst;

static void *burst_run(void *arg)
{
    burst *b = arg;
    for (int i = 0; i < b->calls; i++) {
        rl_result r;
        int rc = rl_acquire(b->client, b->name, "hot", &b->spec, 1, &r);
        if (rc) __atomic_add_fetch(&b->errors, 1, __ATOMIC_RELAXED);
        else if (r.allowed) __atomic_add_fetch(&b->admitted, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

typedef struct {
    rl_client *client;
    const char *name;
    int acquired;
    int64_t waited_ms;
} waiter;

static void *sem_waiter(void *arg)
{
    waiter *w = arg;
    rl_wait wait = {5000, NULL, NULL};
    rl_permit p;
    int64_t t = now_ms();
    if (rl_semaphore_acquire(w->client, w->name, 2, 10000, &wait, &p) == RL_OK && p.acquired) {
        w->acquired = 1;
        int released;
        rl_semaphore_release(w->client, w->name, p.id, &released);
    }
    w->waited_ms = now_ms() - t;
    return NULL;
}

static void *queue_waiter(void *arg)
{
    waiter *w = arg;
    rl_wait wait = {5000, NULL, NULL};
    rl_messages m;
    int64_t t = now_ms();
    if (rl_queue_pop_wait(w->client, w->name, 1, &wait, &m) == RL_OK) {
        w->acquired = (int)m.count;
        rl_messages_free(&m);
    }
    w->waited_ms = now_ms() - t;
    return NULL;
}

static void suite(const char *label, const char *url, const rl_options *o)
{
    int before = test_failures;
    rl_client *c = open_url(url, o);
    char name[64];
    rl_result r;
    static const rl_algorithm all[] = {RL_FIXED_WINDOW, RL_SLIDING_LOG, RL_SLIDING_WINDOW,
                                       RL_TOKEN_BUCKET, RL_LEAKY_BUCKET, RL_GCRA};
    int64_t now = 1700000000000 + (now_ms() % 1000000) * 1000;
    /* fresh state every run: the servers are shared by every build's run, and
     * an explicit clock that wraps would meet the last run's keys */
    long long run = (long long)getpid() * 1000 + now_ms() % 1000;

    /* leases: blocks taken, decided from and given back through this topology (token_bucket: its
     * give-back also returns the validity booked ahead, gcra's only the unused permits) */
    {
        rl_request req = {.name = name, .id = "lease", .spec = {.algorithm = RL_TOKEN_BUCKET, .limit = 1000, .period_ms = 3600000},
                          .permits = 1, .op = RL_OP_ACQUIRE, .lease_ms = 60000};
        int local = 0;
        snprintf(name, sizeof name, "%s-lease-%lld", label, run);
        for (int i = 0; i < 100; i++) {
            CHECK_OK(rl_execute(c, &req, 1, &r));
            CHECK(r.allowed);
            local += r.local;
        }
        CHECK(local >= 80);
        CHECK_OK(rl_leases_give_back(c, name));
        CHECK_OK(rl_peek(c, name, "lease", &req.spec, 1, &r));
        CHECK(r.remaining >= 900);
    }

    /* every algorithm admits exactly its limit, peek and reset included */
    for (size_t a = 0; a < sizeof all / sizeof all[0]; a++) {
        rl_request req = {.name = name, .id = "alice", .spec = {.algorithm = all[a], .limit = 5, .period_ms = 60000, .burst = 0}, .permits = 1, .op = RL_OP_ACQUIRE, .max_wait_ms = 0, .now_ms = now};
        int admitted = 0;
        snprintf(name, sizeof name, "%s-%s-%lld", label, rl_algorithm_name(all[a]), run);
        for (int i = 0; i < 8; i++) {
            CHECK_OK(rl_execute(c, &req, 1, &r));
            admitted += r.allowed;
        }
        CHECK_EQ(admitted, 5);
        req.op = RL_OP_PEEK;
        CHECK_OK(rl_execute(c, &req, 1, &r));
        CHECK_EQ(r.allowed, 0);
        CHECK_OK(rl_reset(c, name, "alice", &req.spec));
        CHECK_OK(rl_execute(c, &req, 1, &r));
        CHECK_EQ(r.allowed, 1);
        CHECK_EQ(r.remaining, 5);
        if (all[a] == RL_TOKEN_BUCKET || all[a] == RL_LEAKY_BUCKET || all[a] == RL_GCRA) {
            req.op = RL_OP_RESERVE;
            req.max_wait_ms = 60000;
            /* a leaky bucket queues at most its capacity; the others book ahead */
            for (int i = 0; i < (all[a] == RL_LEAKY_BUCKET ? 4 : 6); i++) CHECK_OK(rl_execute(c, &req, 1, &r));
            CHECK_EQ(r.allowed, 1);
            CHECK(r.wait_ms > 0);
            if (!r.allowed || r.wait_ms <= 0)
                fprintf(stderr, "  %s reserve: allowed %d wait %lld retry %lld\n", name, r.allowed,
                        (long long)r.wait_ms, (long long)r.retry_after_ms);
        }
    }

    /* one batch, many entities: in a cluster they live on every master */
    rl_request batch[64];
    rl_result results[64];
    char ids[64][16];
    snprintf(name, sizeof name, "%s-batch-%lld", label, run);
    for (int i = 0; i < 64; i++) {
        snprintf(ids[i], sizeof ids[i], "user%d", i);
        rl_request one = {.name = name, .id = ids[i], .spec = {.algorithm = RL_GCRA, .limit = 1, .period_ms = 60000, .burst = 0}, .permits = 1, .op = RL_OP_ACQUIRE, .max_wait_ms = 0, .now_ms = now};
        batch[i] = one;
    }
    CHECK_OK(rl_execute(c, batch, 64, results));
    int first = 0, second = 0;
    for (int i = 0; i < 64; i++) first += results[i].allowed;
    CHECK_OK(rl_execute(c, batch, 64, results));
    for (int i = 0; i < 64; i++) second += results[i].allowed;
    CHECK_EQ(first, 64);
    CHECK_EQ(second, 0);

    /* the same through rl_submit: pipelined per server (TLS: non-blocking) */
    rl_completions *cq;
    rl_completion done[128];
    CHECK_OK(rl_completions_open(&cq));
    rl_target target = {NULL, NULL, cq};
    snprintf(name, sizeof name, "%s-async-%lld", label, run);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 64; i++) {
            batch[i].name = name;
            CHECK_OK(rl_submit(c, &batch[i], (uint64_t)i, &target));
        }
        size_t got = drain_completions(cq, done, 64, 5000);
        CHECK_EQ(got, 64);
        int allowed = 0, errors = 0;
        for (size_t i = 0; i < got; i++) {
            errors += done[i].status != RL_OK;
            allowed += done[i].status == RL_OK && done[i].result.allowed;
        }
        CHECK_EQ(errors, 0);
        CHECK_EQ(allowed, round == 0 ? 64 : 0);
    }
    rl_completions_close(cq); /* every completion taken: nothing posts to it any more */

    /* many threads, one key: exactly the limit */
    burst b = {c, NULL, {.algorithm = RL_FIXED_WINDOW, .limit = 100, .period_ms = 3600000, .burst = 0}, 40, 0, 0};
    snprintf(name, sizeof name, "%s-burst-%lld", label, run);
    b.name = name;
    pthread_t threads[8];
    for (int i = 0; i < 8; i++) pthread_create(&threads[i], NULL, burst_run, &b);
    for (int i = 0; i < 8; i++) pthread_join(threads[i], NULL);
    CHECK_EQ(b.errors, 0);
    CHECK_EQ(b.admitted, 100);

    /* semaphore: a release wakes the waiter (a wake-up on the entity's shard) */
    char sem[64];
    snprintf(sem, sizeof sem, "%s-sem-%lld", label, (long long)now);
    rl_permit p1, p2, p3;
    rl_wait none = {0, NULL, NULL};
    CHECK_OK(rl_semaphore_acquire(c, sem, 2, 10000, &none, &p1));
    CHECK_OK(rl_semaphore_acquire(c, sem, 2, 10000, &none, &p2));
    CHECK_OK(rl_semaphore_acquire(c, sem, 2, 10000, &none, &p3));
    CHECK(p1.acquired && p2.acquired && !p3.acquired);
    waiter w = {c, sem, 0, 0};
    pthread_t wt;
    pthread_create(&wt, NULL, sem_waiter, &w);
    sleep_ms(300);
    int released = 0;
    int64_t t = now_ms();
    CHECK_OK(rl_semaphore_release(c, sem, p1.id, &released));
    pthread_join(wt, NULL);
    CHECK_EQ(released, 1);
    CHECK_EQ(w.acquired, 1);
    CHECK(now_ms() - t < 500); /* woken, not polling (polls are 1 s apart) */
    CHECK_OK(rl_semaphore_release(c, sem, p2.id, &released));

    /* lock: exclusive, fencing tokens increase */
    rl_permit l1, l2, l3;
    CHECK_OK(rl_lock_acquire(c, sem, 10000, &none, &l1));
    CHECK_OK(rl_lock_acquire(c, sem, 10000, &none, &l2));
    CHECK(l1.acquired && !l2.acquired);
    CHECK_OK(rl_lock_release(c, sem, l1.id, &released));
    CHECK_OK(rl_lock_acquire(c, sem, 10000, &none, &l3));
    CHECK(l3.acquired && l3.fencing_token > l1.fencing_token);
    CHECK_OK(rl_lock_release(c, sem, l3.id, &released));

    /* delay queue: a push wakes a blocked pop */
    waiter q = {c, sem, 0, 0};
    pthread_create(&wt, NULL, queue_waiter, &q);
    sleep_ms(300);
    int added;
    t = now_ms();
    CHECK_OK(rl_queue_push(c, sem, "job-1", 5, 0, &added));
    pthread_join(wt, NULL);
    CHECK_EQ(q.acquired, 1);
    CHECK(now_ms() - t < 500);

    /* the same waits asynchronously: one subscriber connection per server
     * (SSUBSCRIBE on the entity's shard in a cluster) wakes them */
    CHECK_OK(rl_completions_open(&cq));
    target.queue = cq;
    CHECK_OK(rl_semaphore_acquire(c, sem, 1, 10000, &none, &p1));
    CHECK(p1.acquired);
    CHECK_OK(rl_submit_semaphore_acquire(c, sem, 1, 10000, 10000, 1, &target));
    CHECK_OK(rl_submit_queue_pop(c, sem, 1, 10000, 2, &target));
    sleep_ms(300);
    CHECK_EQ(rl_completions_take(cq, done, 2), 0);
    t = now_ms();
    CHECK_OK(rl_semaphore_release(c, sem, p1.id, &released));
    CHECK_OK(rl_queue_push(c, sem, "job-2", 5, 0, &added));
    size_t got = drain_completions(cq, done, 2, 5000);
    CHECK_EQ(got, 2);
    CHECK(now_ms() - t < 500);
    for (size_t i = 0; i < got; i++) {
        CHECK_EQ(done[i].status, RL_OK);
        if (done[i].tag == 1) {
            CHECK(done[i].acquired);
            CHECK_OK(rl_semaphore_release(c, sem, done[i].permit_id, &released));
        } else {
            CHECK_EQ(done[i].messages.count, 1);
            rl_messages_free(&done[i].messages);
        }
    }
    rl_client_close(c);
    rl_completions_close(cq);
    c = NULL;

    rl_client_close(c);
    printf("  %s: %s (%s)\n", label, test_failures == before ? "ok" : "FAILED", url);
}

/* ---- TLS certificate checks ---------------------------------------------- */

static int try_open(const char *url, const rl_options *o)
{
    rl_client *c = NULL;
    int rc = rl_client_open(&c, url, o);
    rl_client_close(c);
    return rc;
}

static void test_tls_checks(void)
{
    const char *dir = env("RL_TEST_TLS_DIR");
    char url[4096], ca[600], other[600], cert[600], key[600];
    rl_options o = RL_OPTIONS_INIT;
    snprintf(ca, sizeof ca, "%s/ca.crt", dir);
    snprintf(other, sizeof other, "%s/other-ca.crt", dir);
    snprintf(cert, sizeof cert, "%s/client.crt", dir);
    snprintf(key, sizeof key, "%s/client.key", dir);

    /* the CA from options instead of the URL */
    snprintf(url, sizeof url, "rediss://127.0.0.1:%s", env("RL_TEST_TLS_PORT"));
    o.tls_ca_file = ca;
    CHECK_OK(try_open(url, &o));
    /* without it the system store does not know our CA: the refusal says
     * what it checked against and names the option (the case of a CA only
     * in the macOS keychain, which OpenSSL does not read) */
    CHECK_EQ(try_open(url, NULL), RL_ERR_CONNECTION);
    CHECK(strstr(rl_errmsg(), "certificate verify failed") != NULL);
    CHECK(strstr(rl_errmsg(), "checked against /") != NULL);
    CHECK(strstr(rl_errmsg(), "ssl_ca_certs=") != NULL);
    printf("  no ssl_ca_certs: %s\n", rl_errmsg());
    /* the store is what SSL_CERT_FILE names, as on macOS /etc/ssl/cert.pem */
    setenv("SSL_CERT_FILE", ca, 1);
    CHECK_OK(try_open(url, NULL));
    setenv("SSL_CERT_FILE", other, 1);
    CHECK_EQ(try_open(url, NULL), RL_ERR_CONNECTION);
    CHECK(strstr(rl_errmsg(), other) != NULL);
    /* one that cannot be read is an error before connecting, naming the option */
    setenv("SSL_CERT_FILE", "/nonexistent/ca.pem", 1);
    CHECK_EQ(try_open(url, NULL), RL_ERR_INVALID);
    CHECK(strstr(rl_errmsg(), "SSL_CERT_FILE=/nonexistent/ca.pem") != NULL);
    CHECK(strstr(rl_errmsg(), "ssl_ca_certs") != NULL);
    unsetenv("SSL_CERT_FILE");
    /* a wrong CA: the error names the problem */
    o.tls_ca_file = other;
    CHECK_EQ(try_open(url, &o), RL_ERR_CONNECTION);
    CHECK(strstr(rl_errmsg(), "certificate verify failed") != NULL);
    printf("  wrong CA: %s\n", rl_errmsg());
    /* a refused certificate is a misconfiguration, not an outage: no policy opens it */
    o.on_error = RL_ON_ERROR_ALLOW;
    CHECK_EQ(try_open(url, &o), RL_ERR_CONNECTION);
    o.on_error = RL_ON_ERROR_RAISE;

    /* a certificate for another host name */
    snprintf(url, sizeof url, "rediss://127.0.0.1:%s?ssl_ca_certs=%s", env("RL_TEST_TLS_BADHOST_PORT"), ca);
    CHECK_EQ(try_open(url, NULL), RL_ERR_CONNECTION);
    CHECK(strstr(rl_errmsg(), "mismatch") != NULL);
    printf("  wrong host: %s\n", rl_errmsg());
    snprintf(url, sizeof url, "rediss://127.0.0.1:%s?ssl_cert_reqs=none", env("RL_TEST_TLS_BADHOST_PORT"));
    CHECK_OK(try_open(url, NULL));

    /* tls-auth-clients yes: a client certificate is required */
    snprintf(url, sizeof url, "rediss://127.0.0.1:%s?ssl_ca_certs=%s&ssl_certfile=%s&ssl_keyfile=%s",
             env("RL_TEST_TLS_CLIENTAUTH_PORT"), ca, cert, key);
    rl_client *c = open_url(url, NULL);
    rl_spec spec = {.algorithm = RL_GCRA, .limit = 10, .period_ms = 1000, .burst = 0};
    rl_result r;
    CHECK_OK(rl_acquire(c, "mtls", "x", &spec, 1, &r));
    CHECK_EQ(r.allowed, 1);
    rl_client_close(c);
    snprintf(url, sizeof url, "rediss://127.0.0.1:%s?ssl_ca_certs=%s", env("RL_TEST_TLS_CLIENTAUTH_PORT"), ca);
    CHECK(try_open(url, NULL) != RL_OK);
    /* a key that is not the certificate's */
    o = (rl_options)RL_OPTIONS_INIT;
    o.tls_cert_file = cert;
    o.tls_key_file = ca;
    CHECK_EQ(try_open(url, &o), RL_ERR_INVALID);
}

typedef struct {
    rl_client *client;
    const char *name;
    rl_spec spec;
    volatile int stop;
    long calls, admitted, conn_errors, other_errors, ok_after_mark;
    volatile int mark;
    char other[200];
} load;

static void *load_run(void *arg)
{
    load *l = arg;
    while (!l->stop) {
        rl_result r;
        int rc = rl_acquire(l->client, l->name, "hot", &l->spec, 1, &r);
        __atomic_add_fetch(&l->calls, 1, __ATOMIC_RELAXED);
        if (rc == RL_OK) {
            if (r.allowed) __atomic_add_fetch(&l->admitted, 1, __ATOMIC_RELAXED);
            if (l->mark) __atomic_add_fetch(&l->ok_after_mark, 1, __ATOMIC_RELAXED);
        } else if (rc == RL_ERR_CONNECTION || rc == RL_ERR_TIMEOUT || rc == RL_ERR_BACKLOG) {
            __atomic_add_fetch(&l->conn_errors, 1, __ATOMIC_RELAXED);
            sleep_ms(2);
        } else {
            __atomic_add_fetch(&l->other_errors, 1, __ATOMIC_RELAXED);
            snprintf(l->other, sizeof l->other, "%d %s", rc, rl_errmsg());
        }
    }
    return NULL;
}

static void start_load(load *l, pthread_t *threads, int n)
{
    for (int i = 0; i < n; i++) pthread_create(&threads[i], NULL, load_run, l);
}

static void stop_load(load *l, pthread_t *threads, int n)
{
    l->stop = 1;
    for (int i = 0; i < n; i++) pthread_join(threads[i], NULL);
}

/* A TLS server killed under load: SIGPIPE stays at its default here, so a
 * write into the dead session that raised it would end this process. */
static void test_tls_server_killed(void)
{
    test_redis tls;
    memset(&tls, 0, sizeof tls);
    redis_start_tls(&tls, env("RL_TEST_TLS_DIR"));
    rl_options o = RL_OPTIONS_INIT;
    o.command_timeout_ms = 300;
    o.connect_timeout_ms = 300;
    o.reconnect_max_ms = 100;
    rl_client *c = open_url(tls.url, &o);
    load l;
    memset(&l, 0, sizeof l);
    l.client = c;
    l.name = "tls-kill";
    l.spec = (rl_spec){.algorithm = RL_TOKEN_BUCKET, .limit = 1000000, .period_ms = 1000, .burst = 0};
    pthread_t threads[4];
    start_load(&l, threads, 4);
    sleep_ms(200);
    redis_kill(&tls);
    sleep_ms(300);
    redis_restart(&tls); /* empty: the scripts are loaded again */
    l.mark = 1;
    sleep_ms(500);
    stop_load(&l, threads, 4);
    printf("  TLS server killed and restarted: %ld calls, %ld connection/timeout errors, %ld after\n", l.calls,
           l.conn_errors, l.ok_after_mark);
    CHECK(l.conn_errors > 0);
    CHECK_EQ(l.other_errors, 0);
    CHECK(l.ok_after_mark > 10);
    rl_client_close(c);
    redis_stop(&tls);
}


/* url with `from` replaced by `to` */
static void url_with(char *out, size_t size, const char *url, const char *from, const char *to)
{
    const char *at = strstr(url, from);
    CHECK(at != NULL);
    if (!at) at = url + strlen(url);
    snprintf(out, size, "%.*s%s%s", (int)(at - url), url, to, *at ? at + strlen(from) : "");
}

/* A sentinel whose default user is off: the URL's sentinel_username goes
 * with sentinel_password; the password alone or another user does not get
 * through, and the message never shows the password. */
static void test_sentinel_acl(void)
{
    const char *url = env("RL_TEST_SENTINEL_ACL_URL");
    const char *password = strstr(url, "sentinel_password=") + strlen("sentinel_password=");
    rl_options o = RL_OPTIONS_INIT;
    o.on_error = RL_ON_ERROR_RAISE;
    rl_request req = {.name = "acl-sentinel", .id = "u", .spec = {.algorithm = RL_GCRA, .limit = 10, .period_ms = 1000, .burst = 0},
                      .permits = 1, .op = RL_OP_ACQUIRE};
    rl_result r;
    rl_client *c = NULL;
    CHECK_OK(rl_client_open(&c, url, &o));
    if (c) {
        CHECK_OK(rl_execute(c, &req, 1, &r));
        CHECK(r.allowed);
    }
    rl_client_close(c);
    char user[64], bad[2][1024];
    snprintf(user, sizeof user, "sentinel_username=%.*s&", (int)strcspn(strstr(url, "sentinel_username=") + 18, "&"),
             strstr(url, "sentinel_username=") + 18);
    url_with(bad[0], sizeof bad[0], url, user, "");
    url_with(bad[1], sizeof bad[1], url, user, "sentinel_username=nobody&");
    for (int i = 0; i < 2; i++) {
        c = NULL;
        CHECK_EQ(rl_client_open(&c, bad[i], &o), RL_ERR_CONNECTION);
        CHECK(strstr(rl_errmsg(), "WRONGPASS") != NULL);
        CHECK(!strstr(rl_errmsg(), password));
        printf("  sentinel ACL, %s: %s\n", i == 0 ? "no user" : "another user", rl_errmsg());
        rl_client_close(c);
    }
}

static void test_sentinel_failover(void)
{
    rl_options o = RL_OPTIONS_INIT;
    o.command_timeout_ms = 500;
    o.connect_timeout_ms = 500;
    o.reconnect_max_ms = 200;
    rl_client *c = open_url(env("RL_TEST_SENTINEL_URL"), &o);
    char name[64], out[512] = "", call[2048];
    snprintf(name, sizeof name, "failover-%lld", (long long)now_ms());
    load l;
    memset(&l, 0, sizeof l);
    l.client = c;
    l.name = name;
    l.spec = (rl_spec){.algorithm = RL_TOKEN_BUCKET, .limit = 1000000, .period_ms = 1000, .burst = 0};
    pthread_t threads[4];
    start_load(&l, threads, 4);
    sleep_ms(300);
    snprintf(call, sizeof call, "sentinel_failover(\"%s\")", topo_dir);
    CHECK_EQ(topology_call(call, out, sizeof out), 0);
    l.mark = 1;
    sleep_ms(1500); /* decisions must flow again on the new master */
    stop_load(&l, threads, 4);
    printf("  sentinel failover (old, new master) %s: %ld calls, %ld connection/timeout errors, %ld after\n", out, l.calls,
           l.conn_errors, l.ok_after_mark);
    CHECK_EQ(l.other_errors, 0);
    if (l.other_errors) fprintf(stderr, "  other error: %s\n", l.other);
    CHECK(l.ok_after_mark > 100);
    rl_result r;
    CHECK_OK(rl_acquire(c, name, "hot", &l.spec, 1, &r));
    rl_client_close(c);
}

/* A load on name's id "hot" (a fixed window of limit per hour); returns its
 * cluster slot. */
static int hot_key_load(load *l, rl_client *c, const char *name, int64_t limit)
{
    char key[256];
    memset(l, 0, sizeof *l);
    l->client = c;
    l->name = name;
    l->spec = (rl_spec){.algorithm = RL_FIXED_WINDOW, .limit = limit, .period_ms = 3600000, .burst = 0};
    int len = rl_key(c, name, "hot", RL_FIXED_WINDOW, key, sizeof key);
    return rl_key_slot(key, (size_t)len);
}

static void test_cluster_under_change(void)
{
    rl_options o = RL_OPTIONS_INIT;
    o.command_timeout_ms = 2000;
    o.reconnect_max_ms = 200;
    rl_client *c = open_url(env("RL_TEST_CLUSTER_URL"), &o);
    char name[64], out[512] = "", call[2048];
    snprintf(name, sizeof name, "reshard-%lld", (long long)now_ms());
    load l;
    /* a limit the load reaches while the slot moves and its master fails over */
    int slot = hot_key_load(&l, c, name, 60000);
    pthread_t threads[4];
    start_load(&l, threads, 4);
    sleep_ms(200);
    snprintf(call, sizeof call, "cluster_move_slot(\"%s\", %d)", topo_dir, slot);
    CHECK_EQ(topology_call(call, out, sizeof out), 0);
    printf("  moved slot %d (from, to): %s\n", slot, out);
    long after_move = l.calls;
    /* the master now holding the slot fails over to its replica */
    snprintf(call, sizeof call, "cluster_failover(\"%s\", t.cluster_slot_owner(\"%s\", %d))", topo_dir, topo_dir, slot);
    CHECK_EQ(topology_call(call, out, sizeof out), 0);
    printf("  failover (old, new master): %s\n", out);
    l.mark = 1;
    sleep_ms(1000);
    stop_load(&l, threads, 4);
    printf("  cluster under change: %ld calls (%ld after the move), %ld admitted of 60000, %ld connection/timeout "
           "errors, %ld after failover\n", l.calls, l.calls - after_move, l.admitted, l.conn_errors, l.ok_after_mark);
    CHECK_EQ(l.other_errors, 0); /* never CROSSSLOT, MOVED or ASK leaking out */
    if (l.other_errors) fprintf(stderr, "  other error: %s\n", l.other);
    CHECK(l.admitted <= 60000); /* a manual failover loses nothing */
    CHECK(l.ok_after_mark > 100);
    rl_result r;
    CHECK_OK(rl_peek(c, name, "hot", &l.spec, 1, &r));
    /* the count moved with the slot and survived the failover, exactly */
    CHECK_EQ(r.remaining, 60000 - l.admitted);
    rl_client_close(c);
}

/* Submits one key's decisions from its own thread, up to 32 in flight. */
typedef struct {
    rl_client *client;
    const rl_request *req;
    volatile int stop;
    long calls, admitted, errors;
    char error[256];
} async_load;

static void *async_load_run(void *arg)
{
    async_load *l = arg;
    rl_completions *cq;
    rl_completion done[32];
    long in_flight = 0;
    if (rl_completions_open(&cq)) return NULL;
    rl_target target = {NULL, NULL, cq};
    while (!l->stop || in_flight > 0) {
        while (!l->stop && in_flight < 32) {
            if (rl_submit(l->client, l->req, 0, &target) != RL_OK) {
                l->errors++;
                snprintf(l->error, sizeof l->error, "submit: %s", rl_errmsg());
                break;
            }
            in_flight++;
        }
        size_t got = drain_completions(cq, done, 1, 5000);
        got += rl_completions_take(cq, done + got, 32 - got);
        if (got == 0) break; /* 5 s without a completion: counted as lost below */
        for (size_t i = 0; i < got; i++) {
            in_flight--;
            l->calls++;
            if (done[i].status != RL_OK) {
                l->errors++;
                snprintf(l->error, sizeof l->error, "%d %s", done[i].status, done[i].error);
            } else if (done[i].result.allowed) {
                l->admitted++;
            }
        }
    }
    l->errors += in_flight;
    rl_completions_close(cq);
    return NULL;
}

/* The last step of a slot migration done source first (older redis-cli
 * --cluster, redis-trib): the source already redirects to the destination,
 * which still redirects back, here for 300 ms. Blocking and asynchronous
 * calls ride it out: no error, every decision counted once. */
static void test_cluster_source_first(void)
{
    rl_options o = RL_OPTIONS_INIT;
    rl_client *c = open_url(env("RL_TEST_CLUSTER_URL"), &o);
    char name[64], out[512] = "", call[2048];
    snprintf(name, sizeof name, "pingpong-%lld", (long long)now_ms());
    load l;
    int slot = hot_key_load(&l, c, name, 1000000);
    rl_request req = {.name = name, .id = "hot", .spec = l.spec, .permits = 1, .op = RL_OP_ACQUIRE};
    async_load al = {.client = c, .req = &req};
    pthread_t threads[2], async_thread;
    start_load(&l, threads, 2);
    pthread_create(&async_thread, NULL, async_load_run, &al);
    sleep_ms(200);
    int64_t t = now_ms();
    snprintf(call, sizeof call, "cluster_move_slot(\"%s\", %d, source_first=True, hold_ms=300)", topo_dir, slot);
    CHECK_EQ(topology_call(call, out, sizeof out), 0);
    printf("  moved slot %d source first, 300 ms of MOVED ping-pong (from, to): %s in %lld ms\n", slot, out,
           (long long)(now_ms() - t));
    l.mark = 1;
    sleep_ms(300);
    al.stop = 1;
    stop_load(&l, threads, 2);
    pthread_join(async_thread, NULL);
    printf("  blocking: %ld calls, %ld errors; async: %ld calls, %ld errors\n", l.calls, l.conn_errors + l.other_errors,
           al.calls, al.errors);
    if (l.other_errors) fprintf(stderr, "  blocking error: %s\n", l.other);
    if (al.errors) fprintf(stderr, "  async error: %s\n", al.error);
    CHECK_EQ(l.conn_errors, 0);
    CHECK_EQ(l.other_errors, 0);
    CHECK_EQ(al.errors, 0);
    CHECK(l.ok_after_mark > 0);
    /* each call counted once, in the moved slot */
    CHECK_EQ(l.admitted, l.calls);
    CHECK_EQ(al.admitted, al.calls);
    rl_result r;
    CHECK_OK(rl_peek(c, name, "hot", &l.spec, 1, &r));
    CHECK_EQ(r.remaining, 1000000 - l.admitted - al.admitted);
    rl_client_close(c);
}

/* rl_execute_each in a loop: batches of 20 decisions on l->req's key and
 * 20 on keys of other slots (one batch call per slot's run per master). */
static void *explicit_load_run(void *arg)
{
    async_load *l = arg;
    enum { HOT = 20, N = 40 };
    rl_request reqs[N];
    rl_result rs[N];
    rl_outcome os[N];
    char ids[N][16];
    for (int i = 0; i < N; i++) {
        snprintf(ids[i], sizeof ids[i], i < HOT ? "hot" : "o%d", i);
        reqs[i] = *l->req;
        reqs[i].id = ids[i];
    }
    while (!l->stop) {
        rl_execute_each(l->client, reqs, N, rs, os);
        for (int i = 0; i < N; i++) {
            if (os[i].status) {
                l->errors++;
                snprintf(l->error, sizeof l->error, "%d %s", os[i].status, os[i].error);
            } else if (i < HOT) {
                l->calls++;
                l->admitted += rs[i].allowed;
            }
        }
    }
    return NULL;
}

static long long cluster_scripts_run(void);

/* Batches under a slot move: whole batch calls answered MOVED (and ASK
 * during the migration) go again to the slot's new master, each decision
 * counted once: asynchronous (32 in flight, batched), explicit, and 8
 * blocking callers combined (combine.c) on one client of their own. */
static void test_cluster_batches_move(void)
{
    rl_options o = RL_OPTIONS_INIT;
    o.command_timeout_ms = 2000;
    rl_client *c = open_url(env("RL_TEST_CLUSTER_URL"), &o);
    char name[64], out[512] = "", call[2048];
    snprintf(name, sizeof name, "batchmove-%lld", (long long)now_ms());
    load l;
    int slot = hot_key_load(&l, c, name, 1000000);
    rl_request req = {.name = name, .id = "hot", .spec = l.spec, .permits = 1, .op = RL_OP_ACQUIRE};
    async_load al[2] = {{.client = c, .req = &req}, {.client = c, .req = &req}};
    async_load el = {.client = c, .req = &req};
    pthread_t threads[3];
    for (int i = 0; i < 2; i++) pthread_create(&threads[i], NULL, async_load_run, &al[i]);
    pthread_create(&threads[2], NULL, explicit_load_run, &el);
    rl_client *blocking = open_url(env("RL_TEST_CLUSTER_URL"), &o);
    load bl = l;
    bl.client = blocking;
    pthread_t combined[8];
    long long scripts = cluster_scripts_run();
    start_load(&bl, combined, 8);
    sleep_ms(200);
    snprintf(call, sizeof call, "cluster_move_slot(\"%s\", %d)", topo_dir, slot);
    CHECK_EQ(topology_call(call, out, sizeof out), 0);
    printf("  batches: moved slot %d (from, to): %s\n", slot, out);
    long before = al[0].calls + al[1].calls + el.calls;
    sleep_ms(300);
    al[0].stop = al[1].stop = 1;
    el.stop = 1;
    for (int i = 0; i < 3; i++) pthread_join(threads[i], NULL);
    stop_load(&bl, combined, 8);
    scripts = cluster_scripts_run() - scripts;
    printf("  batches: 8 blocking callers: %ld decisions (%ld errors), all: %lld script calls\n", bl.calls,
           bl.conn_errors + bl.other_errors, scripts);
    if (bl.other_errors) fprintf(stderr, "  blocking error: %s\n", bl.other);
    CHECK_EQ(bl.conn_errors + bl.other_errors, 0);
    CHECK_EQ(bl.admitted, bl.calls);
    rl_client_close(blocking);
    long calls = al[0].calls + al[1].calls + el.calls + bl.calls;
    long admitted = al[0].admitted + al[1].admitted + el.admitted + bl.admitted;
    printf("  batches: %ld decisions on the moved key (%ld after the move), errors async %ld %ld, explicit %ld\n",
           calls, calls - before, al[0].errors, al[1].errors, el.errors);
    for (int i = 0; i < 2; i++)
        if (al[i].errors) fprintf(stderr, "  async error: %s\n", al[i].error);
    if (el.errors) fprintf(stderr, "  explicit error: %s\n", el.error);
    CHECK_EQ(al[0].errors + al[1].errors + el.errors, 0);
    CHECK(calls - before > 0);
    CHECK_EQ(admitted, calls);
    rl_result r;
    CHECK_OK(rl_peek(c, name, "hot", &l.spec, 1, &r));
    CHECK_EQ(r.remaining, 1000000 - admitted); /* each counted once, in the moved slot */
    rl_client_close(c);
}

/* EVALSHA calls every node of the cluster has run (INFO commandstats). */
static long long cluster_scripts_run(void)
{
    char ports[256];
    long long n = 0;
    snprintf(ports, sizeof ports, "%s", env("RL_TEST_CLUSTER_PORTS"));
    for (char *p = strtok(ports, ","); p; p = strtok(NULL, ",")) {
        test_redis node = {.port = atoi(p)};
        n += redis_scripts_run(&node);
    }
    return n;
}

/* The master port that holds slot (topology.py). */
static int slot_owner(int slot)
{
    char call[1024], out[64] = "";
    snprintf(call, sizeof call, "cluster_slot_owner(\"%s\", %d)", topo_dir, slot);
    return topology_call(call, out, sizeof out) == 0 ? atoi(out) : -1;
}

typedef struct {
    rl_client *client;
    rl_request req[2];
    int first;
    long done, admitted, errors;
} interleaved;

static void interleaved_done(void *ctx, const rl_completion *c)
{
    interleaved *t = ctx;
    if (t->first) { /* on the I/O thread: all of these are drained together */
        t->first = 0;
        rl_target target = {interleaved_done, t, NULL};
        for (int i = 0; i < 32; i++)
            if (rl_submit(t->client, &t->req[i % 2], 0, &target) != RL_OK) t->errors++;
        return;
    }
    if (c->status) t->errors++;
    else t->admitted += c->result.allowed;
    __atomic_add_fetch(&t->done, 1, __ATOMIC_RELEASE);
}

/* Two keys of one master in different slots, their decisions interleaved
 * on one connection: each slot's go in batch calls of their own (two calls
 * of 16, not 32 of one), each decided exactly. */
static void test_cluster_batches_interleaved(void)
{
    rl_options o = RL_OPTIONS_INIT;
    rl_client *c = open_url(env("RL_TEST_CLUSTER_URL"), &o);
    char name[64], ids[2][16], key[256];
    snprintf(name, sizeof name, "interleave-%lld", (long long)now_ms());
    rl_spec spec = {.algorithm = RL_GCRA, .limit = 1000, .period_ms = 3600000, .burst = 0};
    int slots[2], owner = -1;
    for (int i = 0, found = 0; found < 2 && i < 64; i++) {
        snprintf(ids[found], sizeof ids[found], "k%d", i);
        int slot = rl_key_slot(key, (size_t)rl_key(c, name, ids[found], RL_GCRA, key, sizeof key));
        int port = slot_owner(slot);
        if (found == 0) owner = port;
        if (port == owner && (found == 0 || slot != slots[0])) slots[found++] = slot;
    }
    CHECK(slots[0] != slots[1]);
    interleaved t = {.client = c, .first = 1};
    for (int k = 0; k < 2; k++)
        t.req[k] = (rl_request){.name = name, .id = ids[k], .spec = spec, .permits = 1, .op = RL_OP_ACQUIRE};
    rl_target target = {interleaved_done, &t, NULL};
    rl_result r;
    CHECK_OK(rl_execute(c, &t.req[0], 1, &r)); /* connected, script loaded */
    long long before = cluster_scripts_run();
    CHECK_OK(rl_submit(c, &t.req[1], 0, &target));
    for (int64_t end = now_ms() + 10000; __atomic_load_n(&t.done, __ATOMIC_ACQUIRE) < 32 && now_ms() < end;)
        sleep_ms(1);
    long long calls = cluster_scripts_run() - before;
    printf("  batches: 32 decisions interleaved over slots %d and %d of master %d in %lld script calls (+1)\n",
           slots[0], slots[1], owner, calls - 1);
    CHECK_EQ(t.done, 32);
    CHECK_EQ(t.errors, 0);
    CHECK_EQ(t.admitted, 32);
    CHECK(calls - 1 <= 4); /* the first alone, then a call per slot */
    CHECK_OK(rl_peek(c, name, ids[0], &spec, 1, &r));
    CHECK_EQ(r.remaining, 1000 - 1 - 16);
    rl_client_close(c);
}

/* A batch over every master while one of them stalls (SIGSTOP, well under
 * the cluster's node timeout): its requests time out, and every other
 * master's decisions are reported. */
static void test_cluster_node_stalls(void)
{
    enum { N = 64 };
    rl_options o = RL_OPTIONS_INIT;
    o.command_timeout_ms = 300;
    rl_client *c = open_url(env("RL_TEST_CLUSTER_URL"), &o);
    rl_request batch[N];
    rl_result rs[N];
    rl_outcome os[N];
    char ids[N][16], name[64], key[256], call[1024], out[64] = "";
    int slots[N], stalled[N];
    rl_spec spec = {.algorithm = RL_FIXED_WINDOW, .limit = 1, .period_ms = 60000, .burst = 0};
    snprintf(name, sizeof name, "stall-%lld", (long long)now_ms());
    for (int i = 0; i < N; i++) {
        snprintf(ids[i], sizeof ids[i], "user%d", i);
        batch[i] = (rl_request){.name = name, .id = ids[i], .spec = spec, .permits = 1, .op = RL_OP_ACQUIRE};
        slots[i] = rl_key_slot(key, (size_t)rl_key(c, name, ids[i], RL_FIXED_WINDOW, key, sizeof key));
    }
    /* a connection to every master first, so the stall hits a request, not a connect */
    for (int i = 0; i < N; i++) batch[i].name = "stall-warm";
    CHECK_OK(rl_execute(c, batch, N, rs));
    for (int i = 0; i < N; i++) batch[i].name = name;

    snprintf(call, sizeof call, "cluster_slot_owner(\"%s\", %d)", topo_dir, slots[0]);
    CHECK_EQ(topology_call(call, out, sizeof out), 0);
    int port = atoi(out);
    redisContext *raw = redisConnect("127.0.0.1", port);
    redisReply *info = raw && !raw->err ? redisCommand(raw, "INFO server") : NULL;
    redisReply *map = raw && !raw->err ? redisCommand(raw, "CLUSTER SLOTS") : NULL;
    const char *pid_at = info && info->type == REDIS_REPLY_STRING ? strstr(info->str, "process_id:") : NULL;
    pid_t pid = pid_at ? (pid_t)atol(pid_at + 11) : 0;
    int on_it = 0;
    for (int i = 0; i < N; i++) {
        stalled[i] = 0;
        for (size_t k = 0; map && map->type == REDIS_REPLY_ARRAY && k < map->elements; k++) {
            redisReply *range = map->element[k];
            if (range->element[2]->element[1]->integer == port && slots[i] >= range->element[0]->integer &&
                slots[i] <= range->element[1]->integer)
                stalled[i] = 1;
        }
        on_it += stalled[i];
    }
    CHECK(pid > 0 && stalled[0] && on_it < N);
    if (pid <= 0 || !stalled[0] || on_it == N) return;

    int64_t t = now_ms();
    kill(pid, SIGSTOP);
    int rc = rl_execute_each(c, batch, N, rs, os);
    kill(pid, SIGCONT);
    int64_t took = now_ms() - t;
    CHECK_EQ(rc, RL_ERR_TIMEOUT);
    int decided = 0, timed_out = 0;
    for (int i = 0; i < N; i++) {
        if (stalled[i]) {
            timed_out += os[i].status == RL_ERR_TIMEOUT;
        } else {
            decided += os[i].status == RL_OK && rs[i].allowed && !rs[i].fallback;
            if (os[i].status) fprintf(stderr, "  request %d: %s\n", i, os[i].error);
        }
    }
    CHECK_EQ(timed_out, on_it);
    CHECK_EQ(decided, N - on_it);
    printf("  cluster, one master stalled: %d of %d requests decided by the others, %d timed out (%lld ms)\n", decided,
           N, timed_out, (long long)took);
    freeReplyObject(info);
    freeReplyObject(map);
    redisFree(raw);
    rl_client_close(c);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_topology REPO_ROOT TOPOLOGY_DIR [source-first]\n");
        return 2;
    }
    repo_root = argv[1];
    snprintf(topo_dir, sizeof topo_dir, "%s", getenv("RL_TEST_TOPOLOGY_DIR") ? getenv("RL_TEST_TOPOLOGY_DIR") : argv[2]);
    load_env(topo_dir);
    if (argc > 3 && !strcmp(argv[3], "source-first")) { /* one test, by hand */
        test_cluster_source_first();
        return test_summary("topology");
    }
    if (rl_tls_supported()) {
        suite("tls", env("RL_TEST_TLS_URL"), NULL);
        test_tls_checks();
        test_tls_server_killed();
    } else {
        printf("  tls: skipped (this build has no TLS)\n");
    }
    suite("sentinel", env("RL_TEST_SENTINEL_URL"), NULL);
    test_sentinel_acl();
    suite("cluster", env("RL_TEST_CLUSTER_URL"), NULL);
    test_sentinel_failover();
    test_cluster_node_stalls();
    test_cluster_under_change();
    test_cluster_source_first();
    test_cluster_batches_move();
    test_cluster_batches_interleaved();
    return test_summary("topology");
}
