/* Rate limiters: validation, keys, and decoding the scripts' replies. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The longest period and explicit clock accepted; Lua doubles stay exact. */
#define RL_MAX_PERIOD_MS ((int64_t)100 * 365 * 24 * 3600 * 1000)
#define RL_MAX_NOW_MS (RL_MAX_EXACT / 1000 / 4)
/* sliding_log keeps running totals of permits modulo 2 x 10^15 (within a
 * millisecond they may carry up to limit past it): with limit <= 10^15 every
 * total stays below 2^53, where Lua's doubles are exact. Its cost does not
 * depend on limit or permits. */
#define RL_SLIDING_LOG_MAX 1000000000000000LL

static const char *const algorithm_names[RL_ALGORITHM_COUNT] = {
    "fixed_window", "sliding_log", "sliding_window", "token_bucket", "leaky_bucket", "gcra",
};

static const int algorithm_scripts[RL_ALGORITHM_COUNT] = {
    RL_SCRIPT_FIXED_WINDOW, RL_SCRIPT_SLIDING_LOG, RL_SCRIPT_SLIDING_WINDOW,
    RL_SCRIPT_TOKEN_BUCKET, RL_SCRIPT_LEAKY_BUCKET, RL_SCRIPT_GCRA,
};

const char *rl_algorithm_name(rl_algorithm algorithm)
{
    if ((int)algorithm < 0 || algorithm >= RL_ALGORITHM_COUNT) return NULL;
    return algorithm_names[algorithm];
}

int rl_algorithm_parse(const char *name, rl_algorithm *out)
{
    for (int i = 0; name && i < RL_ALGORITHM_COUNT; i++) {
        if (!strcmp(name, algorithm_names[i])) {
            *out = (rl_algorithm)i;
            return RL_OK;
        }
    }
    return rl_fail(RL_ERR_INVALID, "unknown algorithm '%s' (expected fixed_window, sliding_log, "
                   "sliding_window, token_bucket, leaky_bucket or gcra)", name ? name : "(null)");
}

static int has_burst(rl_algorithm a)
{
    return a == RL_TOKEN_BUCKET || a == RL_GCRA;
}

static int check_product(const char *what, int64_t a, int64_t b)
{
    int64_t product;
    if (__builtin_mul_overflow(a, b, &product) || product > RL_MAX_PRODUCT)
        return rl_fail(RL_ERR_INVALID, "%s is too large (%lld x %lld exceeds 2^51)", what, (long long)a,
                       (long long)b);
    return RL_OK;
}

/* The most permits one request may ask for: what the limiter can hold. */
static int64_t capacity_of(const rl_spec *spec)
{
    return has_burst(spec->algorithm) && spec->burst > 0 ? spec->burst : spec->limit;
}

static int validate_spec(const rl_spec *spec)
{
    int rc;
    if (!spec) return rl_fail(RL_ERR_INVALID, "spec must not be NULL");
    if (!rl_algorithm_name(spec->algorithm)) return rl_fail(RL_ERR_INVALID, "unknown algorithm %d", (int)spec->algorithm);
    /* a count plus the permits asked for (each up to the limit) stays exact */
    if ((rc = rl_check_range("limit", spec->limit, 1, RL_MAX_EXACT / 2)) ||
        (rc = rl_check_range("period_ms", spec->period_ms, 1, RL_MAX_PERIOD_MS)))
        return rc;
    if (has_burst(spec->algorithm)) {
        if ((rc = rl_check_range("burst", spec->burst, 0, RL_MAX_EXACT / 2))) return rc;
    } else if (spec->burst != 0 && spec->burst != spec->limit) {
        return rl_fail(RL_ERR_INVALID, "burst applies to token_bucket and gcra only (%s got burst %lld)",
                       algorithm_names[spec->algorithm], (long long)spec->burst);
    }
    switch (spec->algorithm) {
    case RL_SLIDING_LOG:
        return rl_check_range("sliding_log limit", spec->limit, 1, RL_SLIDING_LOG_MAX);
    case RL_SLIDING_WINDOW:
        return check_product("limit x period_ms", spec->limit, spec->period_ms);
    case RL_TOKEN_BUCKET:
        return check_product("burst x period_ms", capacity_of(spec), spec->period_ms);
    case RL_LEAKY_BUCKET:
        return check_product("capacity x period_ms", spec->limit, spec->period_ms);
    case RL_GCRA: {
        int64_t interval_us = (spec->period_ms * 1000 + spec->limit - 1) / spec->limit;
        return check_product("burst x emission interval (us)", capacity_of(spec), interval_us);
    }
    default:
        return RL_OK;
    }
}

int rl_spec_validate(const rl_spec *spec)
{
    rl_clear_error();
    return validate_spec(spec);
}

int rl_validate_request(const rl_request *req)
{
    int rc;
    if ((rc = rl_check_name("name", req->name)) || (rc = rl_check_id(req->id)) ||
        (rc = validate_spec(&req->spec)))
        return rc;
    if (req->permits < 1) return rl_fail(RL_ERR_INVALID, "permits must be at least 1 (got %lld)", (long long)req->permits);
    if (req->permits > capacity_of(&req->spec))
        return rl_fail(RL_ERR_INVALID, "requested permits (%lld) exceed what the %s limiter can hold (%lld)",
                       (long long)req->permits, algorithm_names[req->spec.algorithm],
                       (long long)capacity_of(&req->spec));
    if (req->op < RL_OP_ACQUIRE || req->op > RL_OP_RESERVE) return rl_fail(RL_ERR_INVALID, "unknown operation %d", (int)req->op);
    if (req->op == RL_OP_RESERVE) {
        if (req->spec.algorithm != RL_TOKEN_BUCKET && req->spec.algorithm != RL_LEAKY_BUCKET &&
            req->spec.algorithm != RL_GCRA)
            return rl_fail(RL_ERR_INVALID, "reserve needs token_bucket, leaky_bucket or gcra (not %s)",
                           algorithm_names[req->spec.algorithm]);
        if ((rc = rl_check_range("max_wait_ms", req->max_wait_ms, 0, RL_MAX_PERIOD_MS))) return rc;
        if (req->spec.algorithm == RL_TOKEN_BUCKET &&
            (rc = check_product("max_wait_ms x limit", req->max_wait_ms, req->spec.limit)))
            return rc;
    } else if (req->max_wait_ms != 0) {
        return rl_fail(RL_ERR_INVALID, "max_wait_ms applies to reserve only");
    }
    return rl_check_range("now_ms", req->now_ms, 0, RL_MAX_NOW_MS);
}

int rl_key(const rl_client *client, const char *name, const char *id, rl_algorithm algorithm, char *buf,
           size_t size)
{
    int rc;
    if (!client) return rl_fail(RL_ERR_INVALID, "client must not be NULL");
    if ((rc = rl_check_name("name", name)) || (rc = rl_check_id(id))) return rc;
    if (!rl_algorithm_name(algorithm)) return rl_fail(RL_ERR_INVALID, "unknown algorithm %d", (int)algorithm);
    return rl_format_key(buf, size, client, name, id, algorithm_names[algorithm]);
}

void rl_build_decision(rl_cmd *cmd, const rl_client *client, const rl_request *req)
{
    rl_cmd_init(cmd);
    rl_cmd_script(cmd, algorithm_scripts[req->spec.algorithm], 1);
    rl_cmd_key(cmd, client, req->name, req->id, algorithm_names[req->spec.algorithm]);
    rl_cmd_int(cmd, req->now_ms);
    rl_cmd_int(cmd, req->spec.limit);
    rl_cmd_int(cmd, req->spec.period_ms);
    rl_cmd_int(cmd, capacity_of(&req->spec));
    rl_cmd_int(cmd, req->permits);
    rl_cmd_int(cmd, (int64_t)req->op);
    rl_cmd_int(cmd, req->max_wait_ms);
}

int rl_decode_result(const redisReply *r, rl_result *out)
{
    int64_t v[6];
    int rc;
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 6)
        return rl_fail(RL_ERR_PROTOCOL, "a limiter script returned an unexpected reply");
    for (size_t i = 0; i < 6; i++)
        if ((rc = rl_reply_int(r, i, &v[i]))) return rc;
    out->allowed = v[0] != 0;
    out->limit = v[1];
    out->remaining = v[2];
    out->retry_after_ms = v[3];
    out->reset_after_ms = v[4];
    out->wait_ms = v[5];
    out->fallback = 0;
    return RL_OK;
}

/* Redis is unreachable and the client was told to decide without it. */
void rl_fallback_result(const rl_client *client, const rl_spec *spec, rl_result *out)
{
    int allow = client->options.on_error == RL_ON_ERROR_ALLOW;
    out->allowed = allow;
    out->limit = capacity_of(spec);
    out->remaining = 0;
    out->retry_after_ms = allow ? -1 : 1000;
    out->reset_after_ms = 0;
    out->wait_ms = 0;
    out->fallback = 1;
}

int rl_execute(rl_client *client, const rl_request *requests, size_t n, rl_result *results)
{
    rl_cmd *cmds;
    redisReply **replies;
    int rc = RL_OK;

    rl_clear_error();
    if (!client) return rl_fail(RL_ERR_INVALID, "client must not be NULL");
    if (n == 0) return RL_OK;
    if (!requests || !results) return rl_fail(RL_ERR_INVALID, "requests and results must not be NULL");
    if (n > 100000) return rl_fail(RL_ERR_INVALID, "a batch holds at most 100000 requests (got %zu)", n);
    for (size_t i = 0; i < n; i++) {
        if ((rc = rl_validate_request(&requests[i]))) {
            if (n > 1) {
                char msg[512];
                snprintf(msg, sizeof msg, "%s", rl_errmsg());
                return rl_fail(rc, "request %zu: %s", i, msg);
            }
            return rc;
        }
    }
    /* the common single decision needs no heap for its bookkeeping */
    rl_cmd one_cmd;
    redisReply *one_reply;
    cmds = n == 1 ? &one_cmd : calloc(n, sizeof *cmds);
    replies = n == 1 ? &one_reply : calloc(n, sizeof *replies);
    if (!cmds || !replies) {
        if (n > 1) {
            free(cmds);
            free(replies);
        }
        return rl_fail(RL_ERR_NOMEM, "out of memory");
    }
    int64_t started = rl_stats_start(client);
    for (size_t i = 0; i < n; i++) rl_build_decision(&cmds[i], client, &requests[i]);
    rc = rl_run(client, cmds, n, replies);
    if (rc == RL_OK) {
        for (size_t i = 0; i < n && rc == RL_OK; i++) rc = rl_decode_result(replies[i], &results[i]);
        for (size_t i = 0; i < n; i++) freeReplyObject(replies[i]);
    } else if ((rc == RL_ERR_CONNECTION || rc == RL_ERR_TIMEOUT) && client->options.on_error != RL_ON_ERROR_RAISE) {
        for (size_t i = 0; i < n; i++) rl_fallback_result(client, &requests[i].spec, &results[i]);
        rc = RL_OK; /* rl_errmsg() still says what went wrong */
    }
    rl_stats_execute(client, requests, n, results, rc, started);
    for (size_t i = 0; i < n; i++) rl_cmd_free(&cmds[i]);
    if (n > 1) {
        free(cmds);
        free(replies);
    }
    return rc;
}

static int single(rl_client *client, const char *name, const char *id, const rl_spec *spec, int64_t permits,
                  rl_op op, rl_result *out)
{
    rl_request req;
    if (!spec) return rl_fail(RL_ERR_INVALID, "spec must not be NULL");
    memset(&req, 0, sizeof req);
    req.name = name;
    req.id = id;
    req.spec = *spec;
    req.permits = permits;
    req.op = op;
    return rl_execute(client, &req, 1, out);
}

int rl_acquire(rl_client *client, const char *name, const char *id, const rl_spec *spec, int64_t permits,
               rl_result *out)
{
    return single(client, name, id, spec, permits, RL_OP_ACQUIRE, out);
}

int rl_peek(rl_client *client, const char *name, const char *id, const rl_spec *spec, int64_t permits,
            rl_result *out)
{
    return single(client, name, id, spec, permits, RL_OP_PEEK, out);
}

int rl_reset(rl_client *client, const char *name, const char *id, const rl_spec *spec)
{
    rl_cmd cmd;
    redisReply *reply;
    int rc;

    rl_clear_error();
    if (!client) return rl_fail(RL_ERR_INVALID, "client must not be NULL");
    if ((rc = rl_check_name("name", name)) || (rc = rl_check_id(id))) return rc;
    if (!spec || !rl_algorithm_name(spec->algorithm)) return rl_fail(RL_ERR_INVALID, "spec must name a known algorithm");
    rl_cmd_init(&cmd);
    rl_cmd_cstr(&cmd, "DEL");
    rl_cmd_key(&cmd, client, name, id, algorithm_names[spec->algorithm]);
    rc = rl_run(client, &cmd, 1, &reply);
    if (rc == RL_OK) freeReplyObject(reply);
    rl_cmd_free(&cmd);
    return rc;
}

int rl_acquire_wait(rl_client *client, const rl_request *request, const rl_wait *wait, rl_result *out)
{
    int64_t timeout = wait ? wait->timeout_ms : 0;
    int64_t deadline;
    int rc;

    if (!request || !out) return rl_fail(RL_ERR_INVALID, "request and out must not be NULL");
    if (request->op != RL_OP_ACQUIRE) return rl_fail(RL_ERR_INVALID, "only acquire can wait");
    if ((rc = rl_check_range("timeout_ms", timeout, 0, RL_MAX_PERIOD_MS))) return rc;
    deadline = rl_monotonic_ms() + timeout;
    for (;;) {
        if ((rc = rl_execute(client, request, 1, out)) || out->allowed || out->fallback) return rc;
        int64_t left = deadline - rl_monotonic_ms();
        /* the limiter says when it can pass; if that is past the deadline,
         * waiting cannot help */
        if (out->retry_after_ms > left) return RL_OK;
        if ((rc = rl_sleep(out->retry_after_ms > 0 ? out->retry_after_ms : 1, wait))) return rc;
    }
}
