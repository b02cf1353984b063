/* Rate limiters: the blocking decisions (rl_execute and the calls built on
 * it, through leases and combining), stored specs resolved, resets. Their
 * checks, keys and commands: decision_commands.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

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
    return rl_build_delete(cmd, client, name, id, spec);
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
