/* Leases (request.lease_ms): local decisions that never over-admit.
 * Validation; decisions from memory (script calls counted by the client and
 * by Redis); give-back on rl_leases_give_back, on close and by the idle
 * timer (remaining goes back up); local denials; a reset, a refund and a
 * stored-spec change end leases; rl_submit and rl_decide_from_lease decide
 * locally too; a forked
 * child drops the parent's leases; an outage leaves the block in hand
 * deciding. test_lease_bound.c checks the bound under concurrency. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifndef _WIN32
#include <sys/wait.h>
#include <unistd.h>
#endif

#include "harness.h"

static test_redis redis;

static long long scripts_run(void)
{
    return redis_scripts_run(&redis);
}

static rl_limiter_stats stats_of(const rl_client *c, const char *name)
{
    rl_limiter_stats all[64], found;
    size_t n = 0;
    memset(&found, 0, sizeof found);
    CHECK_OK(rl_client_stats(c, all, 64, &n));
    for (size_t i = 0; i < n && i < 64; i++)
        if (!strcmp(all[i].name, name)) found = all[i];
    return found;
}


static int64_t peek_remaining(rl_client *c, const rl_request *req)
{
    rl_result r;
    CHECK_OK(rl_peek(c, req->name, req->id, &req->spec, 1, &r));
    return r.remaining;
}

/* lease_ms out of 1..3,600,000: RL_ERR_INVALID with its range, nothing sent. */
static void validation(rl_client *c)
{
    int64_t bad[] = {-1, 3600001, INT64_MIN};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rl_request req = leased("val", "x", RL_GCRA, 10, 1000, bad[i]);
        rl_result r;
        rl_range_error range;
        CHECK_EQ(rl_execute(c, &req, 1, &r), RL_ERR_INVALID);
        CHECK(rl_errrange(&range));
        CHECK(!strcmp(range.param, "lease_ms"));
        CHECK_EQ(range.min, 1);
        CHECK_EQ(range.max, 3600000);
        CHECK_EQ(range.value, bad[i]);
        rl_completions *q;
        CHECK_OK(rl_completions_open(&q));
        rl_target t = {NULL, NULL, q};
        CHECK_EQ(rl_submit(c, &req, 1, &t), RL_ERR_INVALID);
        CHECK(rl_errrange(NULL));
        rl_completions_close(q);
    }
    CHECK_EQ(redis_dbsize(&redis), 0);
    CHECK_EQ(rl_leases_give_back(NULL, NULL), RL_ERR_INVALID);
}

/* A hot key with a generous limit: at most 1 script call per 20 decisions,
 * counted by the client (lease_calls) and by Redis (commandstats). */
static void local_decisions(void)
{
    rl_client *c = open_client(&redis, NULL);
    rl_request req = leased("hot", "k", RL_GCRA, 1000000, 1000, 50);
    rl_result r;
    long long before = scripts_run();
    int local = 0, allowed = 0;
    for (int i = 0; i < 20000; i++) {
        CHECK_OK(rl_execute(c, &req, 1, &r));
        allowed += r.allowed;
        local += r.local;
    }
    long long calls = scripts_run() - before;
    rl_limiter_stats s = stats_of(c, "hot");
    CHECK_EQ(allowed, 20000);
    CHECK_EQ(s.allowed, 20000);
    CHECK_EQ(s.local_allowed, (uint64_t)local);
    CHECK(local >= 20000 - 1000);
    CHECK(s.lease_calls * 20 <= 20000);
    CHECK(calls * 20 <= 20000);
    CHECK((long long)s.lease_calls >= calls - 2); /* rl_peek-free: the client saw every call it made */
    printf("  hot key: %d of 20000 local, %llu lease calls, %lld scripts run\n", local,
           (unsigned long long)s.lease_calls, calls);
    rl_client_close(c);
}

/* Blocks grow on a busy key, then going back restores capacity: by
 * rl_leases_give_back, by rl_client_close, and by the idle timer. On
 * token_bucket: a gcra block given back before its validity ends keeps the
 * validity booked (a TAT cannot prove nothing happened since; semantics.md,
 * Leases). */
static void give_back(int how)
{
    static const char *const names[] = {"gb-call", "gb-close", "gb-idle"};
    rl_client *c = open_client(&redis, NULL);
    rl_request req = leased(names[how], "k", RL_TOKEN_BUCKET, 1000, 60000, how == 2 ? 200 : 5000);
    rl_result r;
    for (int i = 0; i < 200; i++) {
        CHECK_OK(rl_execute(c, &req, 1, &r));
        CHECK(r.allowed);
    }
    int64_t held = peek_remaining(c, &req);
    CHECK(held < 800); /* the block in hand counts as taken */
    if (how == 0) {
        CHECK_OK(rl_leases_give_back(c, "gb-call"));
    } else if (how == 1) {
        rl_client_close(c);
        c = open_client(&redis, NULL);
    } else {
        sleep_ms(200 + 400);
    }
    int64_t back = peek_remaining(c, &req);
    if (back < 800) printf("  %s: remaining %lld held, %lld after\n", names[how], (long long)held, (long long)back);
    CHECK(back >= 800);
    CHECK(back > held);
    rl_client_close(c);
}

/* More leases than the first guess of a give-back list (8), all given back
 * in one call: a built command points into itself, so the list of them must
 * not move once built (ASan saw the moved ones). */
static void many_given_back(void)
{
    enum { N = 20 };
    rl_client *c = open_client(&redis, NULL);
    char ids[N][8];
    rl_request req[N];
    int64_t held[N];
    rl_result r;
    for (int k = 0; k < N; k++) {
        snprintf(ids[k], sizeof ids[k], "m%d", k);
        req[k] = leased("gb-many", ids[k], RL_TOKEN_BUCKET, 1000, 60000, 5000);
        for (int i = 0; i < 50; i++) {
            CHECK_OK(rl_execute(c, &req[k], 1, &r));
            CHECK(r.allowed);
        }
        held[k] = peek_remaining(c, &req[k]);
    }
    CHECK_OK(rl_leases_give_back(c, "gb-many"));
    for (int k = 0; k < N; k++) {
        int64_t back = peek_remaining(c, &req[k]);
        CHECK(back >= 950);
        CHECK(back > held[k]);
    }
    rl_client_close(c);
}

/* A denial is remembered: calls for as many permits are denied from memory
 * (no script) until its retry_after. */
static void local_denials(void)
{
    rl_client *c = open_client(&redis, NULL);
    rl_request req = leased("deny", "k", RL_FIXED_WINDOW, 5, 60000, 1000);
    rl_result r;
    int allowed = 0;
    for (int i = 0; i < 10; i++) {
        CHECK_OK(rl_execute(c, &req, 1, &r));
        allowed += r.allowed;
    }
    CHECK_EQ(allowed, 5);
    long long before = scripts_run();
    for (int i = 0; i < 100; i++) {
        CHECK_OK(rl_execute(c, &req, 1, &r));
        CHECK(!r.allowed);
        CHECK(r.local);
        CHECK(r.retry_after_ms > 0 && r.retry_after_ms <= 60000);
        CHECK_EQ(r.granted, 0);
    }
    CHECK_EQ(scripts_run() - before, 0);
    rl_limiter_stats s = stats_of(c, "deny");
    CHECK(s.local_denied >= 100);
    CHECK_EQ(s.allowed + s.denied, 110);
    rl_client_close(c);
}

/* A reset by this client ends its lease: the next call fetches afresh. */
static void reset_ends(void)
{
    rl_client *c = open_client(&redis, NULL);
    rl_request req = leased("reset", "k", RL_SLIDING_LOG, 100, 60000, 5000);
    rl_result r;
    for (int i = 0; i < 101; i++) CHECK_OK(rl_execute(c, &req, 1, &r));
    CHECK(!r.allowed);
    CHECK_OK(rl_reset(c, "reset", "k", &req.spec));
    uint64_t calls = stats_of(c, "reset").lease_calls;
    CHECK_OK(rl_execute(c, &req, 1, &r));
    CHECK(r.allowed);
    CHECK(!r.local);
    CHECK_EQ(stats_of(c, "reset").lease_calls, calls + 1);
    rl_client_close(c);
}

/* rl_submit: a local decision completes at once, many submissions share
 * one fetch, and the script calls stay few. */
static void submitted(void)
{
    rl_client *c = open_client(&redis, NULL);
    rl_completions *q;
    CHECK_OK(rl_completions_open(&q));
    rl_target t = {NULL, NULL, q};
    rl_request req = leased("async", "k", RL_TOKEN_BUCKET, 1000000, 1000, 50);
    static rl_completion out[4096];
    size_t got = 0;
    int local = 0;
    for (int round = 0; round < 10; round++) {
        for (int i = 0; i < 400; i++) CHECK_OK(rl_submit(c, &req, (uint64_t)i, &t));
        size_t n = drain_completions(q, out, 400, 5000);
        got += n;
        for (size_t i = 0; i < n; i++) {
            CHECK_OK(out[i].status);
            CHECK(out[i].result.allowed);
            local += out[i].result.local;
        }
    }
    CHECK_EQ(got, 4000);
    rl_limiter_stats s = stats_of(c, "async");
    CHECK_EQ(s.allowed, 4000);
    CHECK_EQ(s.local_allowed, (uint64_t)local);
    CHECK(s.lease_calls * 20 <= 4000);
    printf("  rl_submit: %d of 4000 local, %llu lease calls\n", local, (unsigned long long)s.lease_calls);
    rl_client_close(c);
    rl_completions_close(q);
}

/* rl_decide_from_lease: decided from the block in hand or a remembered
 * denial, counted as local decisions; otherwise not decided, with nothing
 * sent, nothing fetched and the block untouched. */
static void from_lease(void)
{
    rl_client *c = open_client(&redis, NULL);
    rl_request req = leased("inhand", "k", RL_GCRA, 1000000, 1000, 1000);
    rl_result r;
    int decided = -1;
    redis_flush(&redis);
    long long before = scripts_run();
    CHECK_OK(rl_decide_from_lease(c, &req, &r, &decided)); /* no block yet */
    CHECK_EQ(decided, 0);
    CHECK_EQ(scripts_run(), before);
    CHECK_EQ(redis_dbsize(&redis), 0);
    CHECK_EQ(rl_decide_from_lease(c, &req, &r, NULL), RL_ERR_INVALID);
    rl_request bad = req;
    bad.permits = 0;
    decided = -1;
    CHECK_EQ(rl_decide_from_lease(c, &bad, &r, &decided), RL_ERR_INVALID);
    CHECK_EQ(decided, 0);
    rl_request plain = req, peek = req;
    plain.lease_ms = 0;
    peek.op = RL_OP_PEEK;
    CHECK_OK(rl_decide_from_lease(c, &plain, &r, &decided));
    CHECK_EQ(decided, 0);
    CHECK_OK(rl_decide_from_lease(c, &peek, &r, &decided));
    CHECK_EQ(decided, 0);
    CHECK_EQ(scripts_run(), before);

    /* a block in hand (grown by rl_execute): up to 100 decisions from it */
    for (int i = 0; i < 1000; i++) CHECK_OK(rl_execute(c, &req, 1, &r));
    rl_limiter_stats s0 = stats_of(c, "inhand");
    before = scripts_run();
    int local = 0;
    for (int i = 0; i < 100; i++) {
        CHECK_OK(rl_decide_from_lease(c, &req, &r, &decided));
        if (!decided) break; /* the block ran out or expired: fine, counted below */
        CHECK(r.allowed);
        CHECK(r.local);
        CHECK_EQ(r.granted, 1);
        local++;
    }
    CHECK(local > 0);
    rl_request more = req; /* more than any block: not decided, the block untouched */
    more.permits = 1000000;
    CHECK_OK(rl_decide_from_lease(c, &more, &r, &decided));
    CHECK_EQ(decided, 0);
    CHECK_EQ(scripts_run(), before);
    rl_limiter_stats s = stats_of(c, "inhand");
    CHECK_EQ(s.allowed - s0.allowed, (uint64_t)local);
    CHECK_EQ(s.local_allowed - s0.local_allowed, (uint64_t)local);
    uint64_t timed = 0;
    for (int b = 0; b < RL_STATS_BUCKETS; b++) timed += s.latency_buckets[b];
    CHECK_EQ(timed, s.allowed + s.denied); /* each with its latency */

    /* a remembered denial decides too */
    rl_request deny = leased("inhand-deny", "k", RL_FIXED_WINDOW, 5, 60000, 1000);
    for (int i = 0; i < 10; i++) CHECK_OK(rl_execute(c, &deny, 1, &r));
    before = scripts_run();
    s0 = stats_of(c, "inhand-deny");
    CHECK_OK(rl_decide_from_lease(c, &deny, &r, &decided));
    CHECK_EQ(decided, 1);
    CHECK(!r.allowed);
    CHECK(r.local);
    CHECK(r.retry_after_ms > 0 && r.retry_after_ms <= 60000);
    CHECK_EQ(scripts_run(), before);
    s = stats_of(c, "inhand-deny");
    CHECK_EQ(s.local_denied - s0.local_denied, 1);
    CHECK_EQ(s.allowed + s.denied, 11);
    printf("  rl_decide_from_lease: %d of 100 decided from the block in hand\n", local);
    rl_client_close(c);
}

/* rl_acquire_wait over local denials: it sleeps their retry_after and gets
 * through when the window turns; batches decide leased requests from memory
 * (a second request of one batch for a key it fetches goes to Redis). */
static void wait_and_batch(void)
{
    rl_client *c = open_client(&redis, NULL);
    rl_request req = leased("wait", "k", RL_FIXED_WINDOW, 5, 1000, 500);
    rl_result r;
    for (int i = 0; i < 7; i++) CHECK_OK(rl_execute(c, &req, 1, &r));
    CHECK(!r.allowed);
    rl_wait w = {3000, NULL, NULL};
    CHECK_OK(rl_acquire_wait(c, &req, &w, &r));
    CHECK(r.allowed);

    rl_request batch[4];
    rl_result results[4];
    for (int i = 0; i < 4; i++) batch[i] = leased("batch", i < 3 ? "a" : "b", RL_GCRA, 100000, 1000, 1000);
    int allowed = 0, local = 0;
    for (int round = 0; round < 50; round++) {
        CHECK_OK(rl_execute(c, batch, 4, results));
        for (int i = 0; i < 4; i++) {
            allowed += results[i].allowed;
            local += results[i].local;
        }
    }
    CHECK_EQ(allowed, 200);
    CHECK(local >= 150);
    CHECK_EQ(stats_of(c, "batch").local_allowed, (uint64_t)local);
    rl_client_close(c);
}

/* A spec the script grants no validity (token_bucket with tau = burst x
 * period / limit < 2 ms): its 0 ms grants send the key to Redis as without
 * a lease for 1, 2, 4 ... up to lease_ms (a lease would cost a GIVE_BACK
 * per decision): a few LEASE calls, each deciding its request. */
static void no_validity(void)
{
    rl_client *c = open_client(&redis, NULL);
    rl_request req = leased("tau", "k", RL_TOKEN_BUCKET, 1000, 1000, 50);
    req.spec.burst = 1;
    rl_result r;
    for (int i = 0; i < 50; i++) {
        CHECK_OK(rl_execute(c, &req, 1, &r));
        CHECK(!r.local || !r.allowed);
        sleep_ms(2);
    }
    rl_completions *q;
    CHECK_OK(rl_completions_open(&q));
    rl_target t = {NULL, NULL, q};
    rl_completion out[20];
    for (int round = 0; round < 2; round++) {
        /* round 1, a fresh key: submissions parked on its first fetch go plainly */
        req.id = round ? "fresh" : "k";
        for (int i = 0; i < 20; i++) CHECK_OK(rl_submit(c, &req, (uint64_t)i, &t));
        CHECK_EQ(drain_completions(q, out, 20, 5000), 20);
        for (int i = 0; i < 20; i++) {
            CHECK_OK(out[i].status);
            CHECK(!out[i].result.local || !out[i].result.allowed);
        }
    }
    rl_limiter_stats s = stats_of(c, "tau");
    printf("  tau < 2 ms: %llu lease calls for 90 decisions\n", (unsigned long long)s.lease_calls);
    CHECK(s.lease_calls <= 20);
    CHECK_EQ(s.allowed + s.denied, 90);
    rl_client_close(c);
    rl_completions_close(q);
}

/* Eight threads on one hot key share its fetches (single flight): still at
 * most one script call per 20 decisions. */
static rl_client *shared;

static void *hammer(void *arg)
{
    rl_request req = leased("threads", "k", RL_GCRA, 1000000, 1000, 50);
    rl_result r;
    for (int i = 0; i < 5000; i++)
        if (rl_execute(shared, &req, 1, &r) != RL_OK || !r.allowed) __atomic_fetch_add((int *)arg, 1, __ATOMIC_RELAXED);
    return NULL;
}

static void threads(void)
{
    pthread_t t[8];
    int failed = 0;
    shared = open_client(&redis, NULL);
    long long before = scripts_run();
    for (int i = 0; i < 8; i++) pthread_create(&t[i], NULL, hammer, &failed);
    for (int i = 0; i < 8; i++) pthread_join(t[i], NULL);
    long long calls = scripts_run() - before;
    rl_limiter_stats s = stats_of(shared, "threads");
    CHECK_EQ(failed, 0);
    CHECK_EQ(s.allowed, 40000);
    CHECK(calls * 20 <= 40000);
    printf("  8 threads: %llu of 40000 local, %lld scripts run\n", (unsigned long long)s.local_allowed, calls);
    rl_client_close(shared);
}

/* A block of 1000/hour taken by enough calls to have grown. */
static int64_t hold_block(rl_client *c, rl_request *req)
{
    rl_result r;
    for (int i = 0; i < 100; i++) {
        CHECK_OK(rl_execute(c, req, 1, &r));
        CHECK(r.allowed);
    }
    return peek_remaining(c, req);
}

#ifndef _WIN32 /* no fork */
/* A forked child drops the parent's leases without giving them back: its
 * close leaves the parent's block counted, and its calls fetch their own. */
static void forked(void)
{
    rl_client *c = open_client(&redis, NULL);
    rl_request req = leased("fork", "k", RL_GCRA, 1000, 3600000, 60000);
    int64_t held = hold_block(c, &req);
    pid_t pid = fork();
    if (pid == 0) {
        rl_result r;
        int ok = rl_execute(c, &req, 1, &r) == RL_OK && r.allowed && !r.local;
        rl_client_close(c);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* the child's own block (its first fetch) stays counted too */
    CHECK(peek_remaining(c, &req) <= held - 1);
    rl_result r;
    CHECK_OK(rl_execute(c, &req, 1, &r));
    CHECK(r.local);
    rl_client_close(c);
}
#endif

/* A refund by this client ends its lease on the entity (the rest goes back);
 * a stored spec that changes ends the leases of that name. */
static void refund_and_config(void)
{
    rl_client *c = open_client(&redis, NULL);
    rl_request req = leased("refund", "k", RL_TOKEN_BUCKET, 1000, 3600000, 60000);
    int64_t held = hold_block(c, &req);
    rl_request refund = req;
    refund.op = RL_OP_REFUND;
    refund.lease_ms = 0;
    rl_result r;
    CHECK_OK(rl_execute(c, &refund, 1, &r));
    sleep_ms(200); /* the give-back goes out on the I/O thread */
    CHECK(peek_remaining(c, &req) >= 1000 - 100 + 1);
    CHECK(peek_remaining(c, &req) > held);

    rl_spec stored = req.spec;
    CHECK_OK(rl_config_set(c, "stored", &stored));
    rl_request sreq = leased("stored", "k", RL_TOKEN_BUCKET, 1000, 3600000, 60000);
    sreq.stored_spec = 1;
    held = hold_block(c, &sreq);
    CHECK(held < 900);
    stored.limit = 2000;
    CHECK_OK(rl_config_set(c, "stored", &stored));
    sleep_ms(200);
    rl_spec old = req.spec;
    CHECK_OK(rl_peek(c, "stored", "k", &old, 1, &r));
    CHECK(r.remaining >= 900);
    rl_client_close(c);
}

/* Another client changes the stored spec: this client's config refresh
 * finds it on its next call and ends the leases of that name (given back). */
static void refreshed(void)
{
    rl_options o = RL_OPTIONS_INIT;
    o.config_refresh_ms = 100;
    rl_client *a = open_client(&redis, &o), *b = open_client(&redis, NULL);
    rl_request old = leased("refreshed", "k", RL_TOKEN_BUCKET, 1000, 3600000, 60000); /* as give_back's */
    CHECK_OK(rl_config_set(b, "refreshed", &old.spec));
    rl_request req = old;
    req.stored_spec = 1;
    CHECK(hold_block(a, &req) < 900);
    rl_spec changed = old.spec;
    changed.algorithm = RL_GCRA; /* other keys: the old one shows the give-back alone */
    CHECK_OK(rl_config_set(b, "refreshed", &changed));
    sleep_ms(150);
    rl_result r;
    CHECK_OK(rl_execute(a, &req, 1, &r));
    sleep_ms(200); /* the give-back goes out on the I/O thread */
    CHECK(peek_remaining(b, &old) >= 900);
    rl_client_close(a);
    rl_client_close(b);
}

/* Redis gone: a block in hand keeps deciding until it is used, then the
 * on_error policy decides; the close's give-back fails and is dropped, within
 * the command timeout. */
static void outage(void)
{
    rl_options o = RL_OPTIONS_INIT;
    o.on_error = RL_ON_ERROR_DENY;
    o.command_timeout_ms = 300;
    rl_client *c = open_client(&redis, &o);
    rl_request req = leased("outage", "k", RL_GCRA, 1000, 3600000, 60000);
    rl_result r;
    for (int i = 0; i < 100; i++) CHECK_OK(rl_execute(c, &req, 1, &r));
    redis_kill(&redis);
    int local = 0, fallback = 0;
    for (int i = 0; i < 200; i++) {
        CHECK_OK(rl_execute(c, &req, 1, &r));
        if (r.local) {
            CHECK(r.allowed);
            CHECK(!fallback); /* the block first, then the policy */
            local++;
        }
        if (r.fallback) {
            CHECK(!r.allowed);
            fallback++;
        }
    }
    CHECK(local > 0);
    CHECK(fallback > 0);
    CHECK_EQ(local + fallback, 200);
    int64_t before = now_ms();
    rl_client_close(c);
    CHECK(now_ms() - before < 5 * 300); /* a failed give-back is dropped, not retried */
    redis_restart(&redis);
}

/* A 0 ms grant (a window's last ms) is a retry-later, not a verdict: a hot
 * key keeps deciding from memory across its windows (issue 32: 90-98% of
 * decisions local fell to 0% within 250 ms, or about 1 s). */
static void window_edges(void)
{
    static const struct {
        rl_algorithm algorithm;
        int64_t period_ms, run_ms;
    } cases[] = {{RL_FIXED_WINDOW, 20, 600}, {RL_SLIDING_WINDOW, 1000, 2500}};
    rl_client *c = open_client(&redis, NULL);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        rl_request req = leased("edges", rl_algorithm_name(cases[k].algorithm), cases[k].algorithm, 10000000,
                                cases[k].period_ms, 1000);
        long late = 0, late_local = 0, failed = 0;
        int64_t start = now_ms(), elapsed;
        rl_result r;
        while ((elapsed = now_ms() - start) < cases[k].run_ms) {
            failed += rl_execute(c, &req, 1, &r) != RL_OK || !r.allowed;
            if (elapsed * 2 < cases[k].run_ms) continue;
            late++;
            late_local += r.local;
        }
        printf("  %s, %lld ms windows: %.1f%% local in the run's second half\n",
               rl_algorithm_name(cases[k].algorithm), (long long)cases[k].period_ms,
               100.0 * (double)late_local / (double)late);
        CHECK_EQ(failed, 0);
        CHECK(late_local * 10 >= late * 8);
    }
    rl_client_close(c);
}

/* One submission's completion (its result in *out). */
static int submit_one(rl_client *c, const rl_request *req, rl_result *out)
{
    rl_completions *q;
    rl_completion done;
    int rc = rl_completions_open(&q);
    rl_target t = {NULL, NULL, q};
    if (!rc) rc = rl_submit(c, req, 1, &t);
    if (!rc) rc = drain_completions(q, &done, 1, 5000) == 1 ? done.status : RL_ERR_TIMEOUT;
    if (!rc) *out = done.result;
    rl_completions_close(q);
    return rc;
}

/* This client's refund ends its remembered denials on the entity (Redis
 * would admit again), on the blocking and the asynchronous path. */
static void refund_ends_denial(void)
{
    rl_client *c = open_client(&redis, NULL);
    for (int async = 0; async < 2; async++) {
        rl_request req = leased("refund-denial", async ? "async" : "blocking", RL_FIXED_WINDOW, 2, 60000, 5000);
        rl_request refund = req;
        refund.op = RL_OP_REFUND;
        refund.lease_ms = 0;
        rl_result r;
        for (int i = 0; i < 3; i++) CHECK_OK(async ? submit_one(c, &req, &r) : rl_execute(c, &req, 1, &r));
        CHECK(!r.allowed);
        CHECK_OK(async ? submit_one(c, &req, &r) : rl_execute(c, &req, 1, &r));
        CHECK(!r.allowed && r.local); /* remembered */
        CHECK_OK(async ? submit_one(c, &refund, &r) : rl_execute(c, &refund, 1, &r));
        CHECK_OK(async ? submit_one(c, &req, &r) : rl_execute(c, &req, 1, &r));
        CHECK(r.allowed);
    }
    rl_client_close(c);
}

/* The asynchronous reset drops this client's leases when queued and again
 * when done, as the blocking one does around its DEL: a block fetched in
 * between (here by a blocking call, while the I/O thread still connects)
 * may predate the delete. Only runs where that fetch ran before the DEL
 * (the key is gone after the reset) tell. */
static void async_reset_drops_after(void)
{
    int told = 0;
    for (int attempt = 0; attempt < 20 && told < 3; attempt++) {
        rl_client *c = open_client(&redis, NULL);
        char id[32], key[256];
        snprintf(id, sizeof id, "race-%d", attempt);
        rl_request req = leased("async-reset", id, RL_FIXED_WINDOW, 1000, 60000, 5000);
        rl_result r;
        rl_completions *q;
        rl_completion done;
        CHECK_OK(rl_execute(c, &req, 1, &r)); /* a block of 1, used: the next call fetches 2 */
        CHECK_OK(rl_completions_open(&q));
        rl_target t = {NULL, NULL, q};
        CHECK_OK(rl_submit_reset(c, "async-reset", id, &req.spec, 1, &t));
        CHECK_OK(rl_execute(c, &req, 1, &r));
        CHECK_EQ(drain_completions(q, &done, 1, 5000), 1);
        rl_completions_close(q);
        CHECK(rl_key(c, "async-reset", id, RL_FIXED_WINDOW, key, sizeof key) > 0);
        redisContext *raw = redis_raw(&redis);
        if (!redis_int(raw, "EXISTS %s", key)) {
            told++;
            CHECK_OK(rl_execute(c, &req, 1, &r));
            CHECK(!r.local); /* the block's booking was deleted */
        }
        redisFree(raw);
        rl_client_close(c);
    }
    printf("  async reset: %d runs fetched before the DEL\n", told);
    CHECK(told > 0);
}

int main(void)
{
    redis_start(&redis);
    rl_client *c = open_client(&redis, NULL);
    validation(c);
    rl_client_close(c);
    local_decisions();
    for (int how = 0; how < 3; how++) give_back(how);
    many_given_back();
    local_denials();
    reset_ends();
    submitted();
    from_lease();
    wait_and_batch();
    no_validity();
    threads();
#ifndef _WIN32
    forked();
#else
    printf("forked: skipped (Windows has no fork)\n");
#endif
    refund_and_config();
    refreshed();
    outage();
    window_edges();
    refund_ends_denial();
    async_reset_drops_after();
    redis_stop(&redis);
    return test_summary("lease");
}
