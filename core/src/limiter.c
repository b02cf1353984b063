/* Rate limiters: validation, keys, and decoding the scripts' replies. */
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

/* out = req with the spec stored for its name (req->stored_spec set). */
int rl_resolve_stored(rl_client *client, const rl_request *req, rl_request *out)
{
    int rc;
    *out = *req;
    out->stored_spec = 0;
    if ((rc = rl_check_name("name", req->name))) return rc;
    return rl_config_resolve(client, req->name, &out->spec);
}

static void set_outcome(rl_outcome *o, int status, const char *msg)
{
    o->status = status;
    snprintf(o->error, sizeof o->error, "%s", msg && *msg ? msg : rl_strerror(status));
}

/* The requests as they are, or (*copy, to free unless it is one) with their
 * stored specs filled in; a spec that cannot be read is that request's
 * outcome (its spec zeroed: no capacity for a fallback). */
static int resolve_all(rl_client *client, const rl_request *requests, size_t n, rl_request *one,
                       const rl_request **out, rl_request **copy, rl_outcome *outcomes)
{
    size_t stored = 0;
    *out = requests;
    *copy = NULL;
    for (size_t i = 0; i < n; i++) stored += requests[i].stored_spec != 0;
    if (!stored) return RL_OK;
    /* the common single decision needs no heap */
    if (!(*copy = n == 1 ? one : malloc(n * sizeof **copy))) return rl_fail(RL_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        int rc;
        if (!requests[i].stored_spec) (*copy)[i] = requests[i];
        else if ((rc = rl_resolve_stored(client, &requests[i], &(*copy)[i]))) {
            /* the spec unknown, what needs none is still checked: bad input never gets a fallback */
            if (rc != RL_ERR_INVALID && requests[i].permits < 1)
                rc = rl_fail(RL_ERR_INVALID, "permits must be at least 1 (got %lld)", (long long)requests[i].permits);
            if (rc != RL_ERR_INVALID && rl_check_id(requests[i].id)) rc = RL_ERR_INVALID;
            set_outcome(&outcomes[i], rc, rl_errmsg());
            memset(&(*copy)[i].spec, 0, sizeof (*copy)[i].spec);
        }
    }
    *out = *copy;
    return RL_OK;
}

/* Every request valid (a stored spec that names nothing is not), or
 * RL_ERR_INVALID for the batch: nothing is sent, and each outcome says why. */
static int validate_all(const rl_request *requests, size_t n, rl_outcome *outcomes)
{
    size_t first = n;
    for (size_t i = 0; i < n; i++) {
        if (outcomes[i].status == RL_OK && rl_validate_request(&requests[i]))
            set_outcome(&outcomes[i], RL_ERR_INVALID, rl_errmsg());
        if (outcomes[i].status == RL_ERR_INVALID && first == n) first = i;
    }
    if (first == n) return RL_OK;
    for (size_t i = 0; i < n; i++) {
        if (outcomes[i].status == RL_ERR_INVALID) continue;
        outcomes[i].status = RL_ERR_INVALID;
        snprintf(outcomes[i].error, sizeof outcomes[i].error, "not sent: request %zu is invalid", first);
    }
    /* one request: rl_errmsg() (and rl_errrange) stay its own */
    return n == 1 ? RL_ERR_INVALID : rl_fail(RL_ERR_INVALID, "request %zu: %s", first, outcomes[first].error);
}

static void execute(rl_client *client, const rl_request *requests, size_t n, rl_result *results,
                    rl_outcome *outcomes);

int rl_execute_each(rl_client *client, const rl_request *requests, size_t n, rl_result *results,
                    rl_outcome *outcomes)
{
    const rl_request *resolved;
    rl_request one, *copy;
    int rc;

    rl_clear_error();
    if (!client) return rl_fail(RL_ERR_INVALID, "client must not be NULL");
    if (n > 0 && (!requests || !results || !outcomes))
        return rl_fail(RL_ERR_INVALID, "requests, results and outcomes must not be NULL");
    for (size_t i = 0; i < n; i++) {
        outcomes[i].status = RL_OK;
        outcomes[i].error[0] = '\0';
    }
    if (n > RL_EXECUTE_MAX) {
        rc = rl_fail(RL_ERR_INVALID, "a batch holds at most %d requests (got %zu)", RL_EXECUTE_MAX, n);
        for (size_t i = 0; i < n; i++) set_outcome(&outcomes[i], rc, rl_errmsg());
        return rc;
    }
    if (n == 0) return RL_OK;
    RL_IN_FLIGHT_ELSE(client, for (size_t i = 0; i < n; i++) set_outcome(&outcomes[i], RL_ERR_CLOSED, rl_errmsg()));
    int64_t started = rl_stats_start(client);
    if ((rc = resolve_all(client, requests, n, &one, &resolved, &copy, outcomes))) {
        for (size_t i = 0; i < n; i++) set_outcome(&outcomes[i], rc, rl_errmsg());
        return rc;
    }
    if (!(rc = validate_all(resolved, n, outcomes))) {
        execute(client, resolved, n, results, outcomes);
        rl_stats_execute(client, requests, n, results, outcomes, started);
        for (size_t i = 0; i < n && !rc; i++) {
            if (!outcomes[i].status) continue;
            /* one request: rl_errmsg() already holds its whole message */
            rc = n == 1 ? outcomes[i].status
                        : rl_fail(outcomes[i].status, "request %zu: %s", i, outcomes[i].error);
        }
    }
    if (copy != &one) free(copy);
    return rc;
}

int rl_execute(rl_client *client, const rl_request *requests, size_t n, rl_result *results)
{
    rl_outcome one, *outcomes = n <= 1 ? &one : calloc(n, sizeof *outcomes);
    if (!outcomes) return rl_fail(RL_ERR_NOMEM, "out of memory");
    int rc = rl_execute_each(client, requests, n, results, outcomes);
    if (outcomes != &one) free(outcomes);
    return rc;
}

/* Sends the requests whose outcome is still RL_OK (all valid) and sets each
 * one's result or error; then the on_error policy decides, per request, for
 * those Redis could not be asked or did not answer in time. A leased request
 * is decided from memory when it can (rl_leases_plan); else it fetches its
 * block, or (the block too small for it) is asked again plainly. */
static void execute(rl_client *client, const rl_request *requests, size_t n, rl_result *results,
                    rl_outcome *outcomes)
{
    /* the common single decision needs no heap for its bookkeeping; a fetch
     * may send a GIVE_BACK before it: up to 2n commands */
    rl_cmd one_cmd[2];
    redisReply *one_reply[2];
    rl_outcome one_out[2];
    size_t one_map[2];
    char one_plan = RL_PLAN_PLAIN;
    int64_t one_want;
    rl_cmd *cmds = n == 1 ? one_cmd : calloc(2 * n, sizeof *cmds);
    redisReply **replies = n == 1 ? one_reply : calloc(2 * n, sizeof *replies);
    rl_outcome *sent = n == 1 ? one_out : calloc(2 * n, sizeof *sent);
    size_t *map = n == 1 ? one_map : calloc(2 * n, sizeof *map);
    char *plan = n == 1 ? &one_plan : calloc(n, 1);
    int64_t *wants = n == 1 ? &one_want : calloc(n, sizeof *wants);
    if (!cmds || !replies || !sent || !map || !plan || !wants) {
        rl_fail(RL_ERR_NOMEM, "out of memory");
        for (size_t i = 0; i < n; i++) set_outcome(&outcomes[i], RL_ERR_NOMEM, "out of memory");
        goto done;
    }
    int leased = 0;
    for (size_t i = 0; i < n; i++) {
        if (outcomes[i].status) continue;
        leased |= rl_lease_applies(client, &requests[i]);
        /* a refund ends this client's leases on the entity (their rest given back first) */
        if (requests[i].op == RL_OP_REFUND)
            rl_leases_end(client, requests[i].name, requests[i].id, RL_LEASES_GIVE_BACK_NOW);
    }
    if (leased) rl_leases_plan(client, requests, n, results, outcomes, plan, wants);
    /* overlapping callers share batch calls (combine.c) */
    int combine = n == 1 && !outcomes[0].status && plan[0] == RL_PLAN_PLAIN ? rl_combine_enter(client)
                                                                           : RL_COMBINE_UNCOUNTED;
    if (combine == RL_COMBINE_QUEUE) {
        rl_build_decision(&cmds[0], client, &requests[0]);
        combine = rl_combine_decide(client, &cmds[0], &results[0], &outcomes[0]);
    }
    if (combine == RL_COMBINE_DECIDED) plan[0] = RL_PLAN_DONE;
    /* a second round for fetched blocks too small for their request */
    for (int round = 0; round < 2; round++) {
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            if (outcomes[i].status || plan[i] == RL_PLAN_DONE) continue;
            if (plan[i] == RL_PLAN_FETCH && rl_lease_build_give_back(&cmds[m], client, &requests[i]))
                map[m++] = SIZE_MAX; /* its reply changes nothing here */
            map[m] = i;
            if (plan[i] == RL_PLAN_FETCH) rl_lease_build_fetch(&cmds[m++], client, &requests[i], wants[i]);
            else rl_build_decision(&cmds[m++], client, &requests[i]);
        }
        if (m == 0) break;
        int64_t sent_ms = rl_now_ms(); /* a block's validity counts from here */
        rl_run_each(client, cmds, m, replies, sent);
        for (size_t j = 0; j < m; j++) {
            size_t i = map[j];
            if (i == SIZE_MAX) {
                if (!sent[j].status) rl_reply_free(replies[j]);
                continue;
            }
            outcomes[i] = sent[j];
            if (plan[i] == RL_PLAN_FETCH) {
                int rc = rl_lease_fetched(client, &requests[i], sent[j].status, sent[j].status ? NULL : replies[j],
                                          sent_ms, &results[i]);
                plan[i] = rc == RL_LEASE_AGAIN ? RL_PLAN_PLAIN : RL_PLAN_DONE;
                if (rc && rc != RL_LEASE_AGAIN && !sent[j].status) set_outcome(&outcomes[i], rc, rl_errmsg());
            } else {
                plan[i] = RL_PLAN_DONE;
                if (!sent[j].status && rl_decode_result(replies[j], &results[i]))
                    set_outcome(&outcomes[i], RL_ERR_PROTOCOL, rl_errmsg());
            }
            if (!sent[j].status) rl_reply_free(replies[j]);
        }
        for (size_t j = 0; j < m; j++) rl_cmd_free(&cmds[j]);
    }
    if (combine == RL_COMBINE_ALONE) rl_combine_done(client);
    for (size_t i = 0; i < n && client->options.on_error != RL_ON_ERROR_RAISE; i++) {
        if (!rl_unreachable(outcomes[i].status)) continue;
        /* the error stays in outcomes[i].error (and rl_errmsg()): why the policy decided */
        rl_fallback_result(client, rl_spec_capacity(&requests[i].spec), requests[i].permits, &results[i]);
        outcomes[i].status = RL_OK;
    }
done:
    if (n > 1) {
        free(cmds);
        free(replies);
        free(sent);
        free(map);
        free(plan);
        free(wants);
    }
}

static int single(rl_client *client, const char *name, const char *id, const rl_spec *spec, int64_t permits,
                  rl_op op, rl_result *out)
{
    rl_request req;
    memset(&req, 0, sizeof req);
    req.name = name;
    req.id = id;
    if (spec) req.spec = *spec;
    req.stored_spec = !spec;
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

int rl_build_reset(rl_cmd *cmd, rl_client *client, const char *name, const char *id, const rl_spec *spec)
{
    rl_spec stored;
    int rc;
    rl_cmd_init(cmd);
    if (!client) return rl_fail(RL_ERR_INVALID, "client must not be NULL");
    if ((rc = rl_check_name("name", name)) || (rc = rl_check_id(id))) return rc;
    if (!spec) {
        if ((rc = rl_config_resolve(client, name, &stored))) return rc;
        spec = &stored;
    }
    /* the keys are all a reset needs (the JNI reset passes no rate) */
    if ((rc = check_shape(spec))) return rc;
    rl_cmd_cstr(cmd, "DEL");
    push_keys(cmd, client, name, id, spec);
    return cmd->failed ? rl_fail(RL_ERR_NOMEM, "out of memory building a command") : RL_OK;
}

int rl_reset(rl_client *client, const char *name, const char *id, const rl_spec *spec)
{
    RL_IN_FLIGHT(client);
    rl_cmd cmd;
    redisReply *reply;
    int rc;

    rl_clear_error();
    if ((rc = rl_build_reset(&cmd, client, name, id, spec))) {
        rl_cmd_free(&cmd);
        return rc;
    }
    /* this client's leases on the entity end, given back to nobody */
    rl_leases_end(client, name, id, RL_LEASES_DROP);
    rc = rl_run(client, &cmd, 1, &reply);
    if (rc == RL_OK) rl_reply_free(reply);
    rl_cmd_free(&cmd);
    /* a block another thread fetched meanwhile may predate the DEL */
    rl_leases_end(client, name, id, RL_LEASES_DROP);
    return rc;
}
