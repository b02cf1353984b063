/* A rate limit decision on the wire: a spec's and a request's checks, the
 * keys (rl_key) and the limit.lua command, and a reset's DEL, shared by the
 * blocking calls (limiter.c), rl_submit (submit.c) and leases (lease.c,
 * lease_async.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The longest explicit clock accepted (RL_MAX_PERIOD_MS and the other
 * limits are public, ratelimit.h); Lua doubles stay exact. */
#define RL_MAX_NOW_MS (RL_MAX_EXACT / 1000 / 4)
/* sliding_log keeps running totals of permits modulo 2 x 10^15 (within a
 * millisecond they may carry up to limit past it): with limit <= 10^15 every
 * total stays below 2^53, where Lua's doubles are exact. Its cost does not
 * depend on limit or permits. */
#define RL_SLIDING_LOG_MAX 1000000000000000LL

static int has_burst(rl_algorithm a)
{
    return a == RL_TOKEN_BUCKET || a == RL_GCRA;
}

/* what: "<param> x <factor>"; the error names param and its largest
 * value for this factor (units the caller knows, not the product's) */
static int check_product(const char *what, int64_t a, int64_t b)
{
    int64_t product;
    if (__builtin_mul_overflow(a, b, &product) || product > RL_MAX_PRODUCT) {
        char param[64];
        snprintf(param, sizeof param, "%.*s", (int)strcspn(what, " "), what);
        return rl_fail_range(param, "for this rate", a, 0, RL_MAX_PRODUCT / b);
    }
    return RL_OK;
}

/* What one rate can hold: its burst (token_bucket, gcra) or its limit. */
static int64_t rate_capacity(rl_algorithm algorithm, const rl_rate *rate)
{
    return has_burst(algorithm) && rate->burst > 0 ? rate->burst : rate->limit;
}

/* The most permits one request may ask for: what every rate can hold. */
int64_t rl_spec_capacity(const rl_spec *spec)
{
    rl_rate rates[RL_MAX_RATES];
    size_t n = rl_spec_rates(spec, rates);
    int64_t least = rate_capacity(spec->algorithm, &rates[0]);
    for (size_t i = 1; i < n; i++)
        if (rate_capacity(spec->algorithm, &rates[i]) < least) least = rate_capacity(spec->algorithm, &rates[i]);
    return least;
}

static int validate_rate(rl_algorithm algorithm, const rl_rate *rate)
{
    int rc;
    /* a count plus the permits asked for (each up to the limit) stays exact */
    if ((rc = rl_check_range("limit", rate->limit, 1, RL_MAX_EXACT / 2)) ||
        (rc = rl_check_range("period_ms", rate->period_ms, 1, RL_MAX_PERIOD_MS)))
        return rc;
    if (has_burst(algorithm)) {
        if ((rc = rl_check_range("burst", rate->burst, 0, RL_MAX_EXACT / 2))) return rc;
    } else if (rate->burst != 0 && rate->burst != rate->limit) {
        return rl_fail(RL_ERR_INVALID, "burst applies to token_bucket and gcra only (%s got burst %lld)",
                       rl_algorithm_names[algorithm], (long long)rate->burst);
    }
    int64_t capacity = rate_capacity(algorithm, rate);
    switch (algorithm) {
    case RL_SLIDING_LOG:
        return rl_check_range("sliding_log limit", rate->limit, 1, RL_SLIDING_LOG_MAX);
    case RL_SLIDING_WINDOW:
        return check_product("limit x period_ms", rate->limit, rate->period_ms);
    case RL_TOKEN_BUCKET:
        return check_product("burst x period_ms", capacity, rate->period_ms);
    case RL_LEAKY_BUCKET:
        return check_product("capacity x period_ms", rate->limit, rate->period_ms);
    case RL_GCRA: {
        int64_t interval_us = (rate->period_ms * 1000 + rate->limit - 1) / rate->limit;
        return check_product("burst x emission interval (us)", capacity, interval_us);
    }
    default:
        return RL_OK;
    }
}

/* What names an entity's keys: the algorithm, the number of rates, the scope. */
static int check_shape(const rl_spec *spec)
{
    if (!spec) return rl_fail(RL_ERR_INVALID, "spec must not be NULL");
    if (!rl_algorithm_name(spec->algorithm)) return rl_fail(RL_ERR_INVALID, "unknown algorithm %d", (int)spec->algorithm);
    if (spec->more_count > RL_MAX_RATES - 1)
        return rl_fail(RL_ERR_INVALID, "a limiter holds at most %d rates (got %zu)", RL_MAX_RATES, spec->more_count + 1);
    if (spec->scope != RL_SCOPE_OVERALL && spec->scope != RL_SCOPE_PER_CLIENT)
        return rl_fail(RL_ERR_INVALID, "scope must be RL_SCOPE_OVERALL or RL_SCOPE_PER_CLIENT (got %d)", (int)spec->scope);
    return RL_OK;
}

static int validate_spec(const rl_spec *spec)
{
    rl_rate rates[RL_MAX_RATES];
    int rc;
    if ((rc = check_shape(spec))) return rc;
    size_t n = rl_spec_rates(spec, rates);
    for (size_t i = 0; i < n; i++) {
        if ((rc = validate_rate(spec->algorithm, &rates[i]))) {
            if (n == 1) return rc;
            char msg[400];
            snprintf(msg, sizeof msg, "%s", rl_errmsg());
            return rl_fail(rc, "rate %zu: %s", i + 1, msg);
        }
    }
    if (spec->initial_tokens != 0) {
        if (spec->algorithm != RL_TOKEN_BUCKET && spec->algorithm != RL_GCRA && spec->algorithm != RL_LEAKY_BUCKET)
            return rl_fail(RL_ERR_INVALID, "initial tokens apply to token_bucket, gcra and leaky_bucket (not %s)",
                           rl_algorithm_names[spec->algorithm]);
        if (spec->initial_tokens != RL_EMPTY &&
            (rc = rl_check_range("initial_tokens", spec->initial_tokens, 1, RL_MAX_EXACT / 2)))
            return rc;
    }
    return RL_OK;
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
    if (req->op < RL_OP_ACQUIRE || req->op > RL_OP_REFUND) return rl_fail(RL_ERR_INVALID, "unknown operation %d", (int)req->op);
    if (req->permits < 1) return rl_fail(RL_ERR_INVALID, "permits must be at least 1 (got %lld)", (long long)req->permits);
    /* up to: as many as there are, however many were asked for */
    if (req->op == RL_OP_ACQUIRE_UP_TO) {
        if ((rc = rl_check_range("permits", req->permits, 1, RL_MAX_EXACT / 2))) return rc;
    } else if (req->permits > rl_spec_capacity(&req->spec)) {
        return rl_fail(RL_ERR_INVALID, "requested permits (%lld) exceed what the %s limiter can hold (%lld)",
                       (long long)req->permits, rl_algorithm_names[req->spec.algorithm],
                       (long long)rl_spec_capacity(&req->spec));
    }
    if (req->op == RL_OP_RESERVE) {
        if (req->spec.algorithm != RL_TOKEN_BUCKET && req->spec.algorithm != RL_LEAKY_BUCKET &&
            req->spec.algorithm != RL_GCRA)
            return rl_fail(RL_ERR_INVALID, "reserve needs token_bucket, leaky_bucket or gcra (not %s)",
                           rl_algorithm_names[req->spec.algorithm]);
        if ((rc = rl_check_range("max_wait_ms", req->max_wait_ms, 0, RL_MAX_PERIOD_MS))) return rc;
        rl_rate rates[RL_MAX_RATES];
        size_t n = rl_spec_rates(&req->spec, rates);
        for (size_t i = 0; i < n && req->spec.algorithm == RL_TOKEN_BUCKET; i++)
            if ((rc = check_product("max_wait_ms x limit", req->max_wait_ms, rates[i].limit))) return rc;
    } else if (req->max_wait_ms != 0) {
        return rl_fail(RL_ERR_INVALID, "max_wait_ms applies to reserve only");
    }
    if (req->lease_ms != 0 && (rc = rl_check_range("lease_ms", req->lease_ms, 1, RL_LEASE_MAX_MS))) return rc;
    return rl_check_range("now_ms", req->now_ms, 0, RL_MAX_NOW_MS);
}

int rl_key(const rl_client *client, const char *name, const char *id, rl_algorithm algorithm, char *buf,
           size_t size)
{
    int rc;
    if (!client) return rl_fail(RL_ERR_INVALID, "client must not be NULL");
    if ((rc = rl_check_name("name", name)) || (rc = rl_check_id(id))) return rc;
    if (!rl_algorithm_name(algorithm)) return rl_fail(RL_ERR_INVALID, "unknown algorithm %d", (int)algorithm);
    return rl_format_key(buf, size, client, name, id, rl_algorithm_names[algorithm]);
}

/* The key suffix of rate i: the algorithm, then ":2", ":3"... */
static void rate_suffix(char *buf, size_t size, rl_algorithm algorithm, size_t i)
{
    if (i == 0) /* no snprintf: this is on every decision's path */
        memcpy(buf, rl_algorithm_names[algorithm], strlen(rl_algorithm_names[algorithm]) + 1);
    else
        snprintf(buf, size, "%s:%zu", rl_algorithm_names[algorithm], i + 1);
}

static void push_keys(rl_cmd *cmd, const rl_client *client, const char *name, const char *id, const rl_spec *spec)
{
    const char *owner = spec->scope == RL_SCOPE_PER_CLIENT ? client->id : NULL;
    size_t n = spec->more_count + 1;
    for (size_t i = 0; i < n; i++) {
        char suffix[40];
        rate_suffix(suffix, sizeof suffix, spec->algorithm, i);
        rl_cmd_entity_key(cmd, client, name, id, owner, suffix);
    }
}

void rl_build_decision(rl_cmd *cmd, const rl_client *client, const rl_request *req)
{
    rl_rate rates[RL_MAX_RATES];
    size_t n = rl_spec_rates(&req->spec, rates);
    int64_t initial = req->spec.initial_tokens;
    rl_cmd_init(cmd);
    rl_cmd_script(cmd, RL_SCRIPT_LIMIT, (int)n);
    push_keys(cmd, client, req->name, req->id, &req->spec);
    /* the script's -1 is "full", 0 "none" */
    int64_t script_initial = initial == 0 ? -1 : initial == RL_EMPTY ? 0 : initial;
    cmd->batchable = req->op <= RL_OP_REFUND;
    /* the usual call in limit.lua's short form: 2 arguments, not 9, each costs Redis */
    if (n == 1 && req->now_ms == 0 && req->max_wait_ms == 0 && script_initial == -1 && cmd->batchable &&
        req->op != RL_OP_ACQUIRE_UP_TO) {
        rl_cmd_cstr(cmd, rl_algorithm_names[req->spec.algorithm]);
        int64_t numbers[5] = {(int64_t)req->op, req->permits, rates[0].limit, rates[0].period_ms,
                              rate_capacity(req->spec.algorithm, &rates[0])};
        rl_cmd_short_form(cmd, numbers);
        return;
    }
    rl_cmd_int(cmd, req->now_ms);
    rl_cmd_cstr(cmd, rl_algorithm_names[req->spec.algorithm]);
    rl_cmd_int(cmd, (int64_t)req->op);
    rl_cmd_int(cmd, req->permits);
    rl_cmd_int(cmd, req->max_wait_ms);
    rl_cmd_int(cmd, script_initial);
    for (size_t i = 0; i < n; i++) {
        rl_cmd_int(cmd, rates[i].limit);
        rl_cmd_int(cmd, rates[i].period_ms);
        rl_cmd_int(cmd, rate_capacity(req->spec.algorithm, &rates[i]));
    }
}

int rl_build_delete(rl_cmd *cmd, const rl_client *client, const char *name, const char *id, const rl_spec *spec)
{
    int rc;
    /* the keys are all a reset needs (the JNI reset passes no rate) */
    if ((rc = check_shape(spec))) return rc;
    rl_cmd_cstr(cmd, "DEL");
    push_keys(cmd, client, name, id, spec);
    return cmd->failed ? rl_fail(RL_ERR_NOMEM, "out of memory building a command") : RL_OK;
}
