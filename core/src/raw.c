/* What bindings and tools need beyond decisions (ratelimit.h, "for bindings
 * and tools"): a batch checked before any of it is submitted, raw commands
 * and their replies, the masters of a cluster. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int rl_requests_validate(const rl_request *requests, size_t n)
{
    char why[200];
    int rc = RL_OK;
    if (n > RL_EXECUTE_MAX)
        return rl_fail(RL_ERR_INVALID, "a batch holds at most %d requests (got %zu)", RL_EXECUTE_MAX, n);
    if (n > 0 && !requests) return rl_fail(RL_ERR_INVALID, "requests must not be NULL");
    for (size_t i = 0; i < n && !rc; i++) {
        const rl_request *r = &requests[i];
        if (!r->stored_spec) rc = rl_validate_request(r);
        else if (!(rc = rl_check_name("name", r->name)) && !(rc = rl_check_id(r->id)))
            rc = rl_check_range("permits", r->permits, 1, RL_MAX_EXACT);
        if (rc && n > 1) {
            snprintf(why, sizeof why, "%s", rl_errmsg());
            rc = rl_fail(rc, "request %zu: %s", i, why);
        }
    }
    return rc;
}

int rl_command_run(rl_client *client, int slot, int argc, const char **argv, const size_t *lens, rl_reply **out)
{
    RL_IN_FLIGHT_ELSE(client, if (out) *out = NULL);
    redisReply *reply = NULL;
    rl_cmd cmd;
    int rc;
    if (!client || !argv || !lens || !out) return rl_fail(RL_ERR_INVALID, "client, argv, lens and out must not be NULL");
    if ((rc = rl_check_range("argc", argc, 1, RL_COMMAND_MAX_ARGS)) ||
        (rc = rl_check_range("slot", slot, -1, RL_CLUSTER_SLOTS - 1)))
        return rc;
    rl_cmd_init(&cmd);
    for (int i = 0; i < argc; i++) rl_cmd_str(&cmd, argv[i], lens[i]);
    cmd.slot = slot;
    rc = rl_run(client, &cmd, 1, &reply);
    rl_cmd_free(&cmd);
    *out = rc ? NULL : (rl_reply *)reply;
    return rc;
}

rl_reply_type rl_reply_kind(const rl_reply *reply)
{
    switch (((const redisReply *)reply)->type) {
    case REDIS_REPLY_STRING: return RL_REPLY_STRING;
    case REDIS_REPLY_INTEGER: return RL_REPLY_INTEGER;
    case REDIS_REPLY_NIL: return RL_REPLY_NIL;
    case REDIS_REPLY_STATUS: return RL_REPLY_STATUS;
    case REDIS_REPLY_ERROR: return RL_REPLY_ERROR;
#ifdef REDIS_REPLY_VERB
    case REDIS_REPLY_VERB: return RL_REPLY_STRING;
    case REDIS_REPLY_DOUBLE: return RL_REPLY_DOUBLE;
    case REDIS_REPLY_BOOL: return RL_REPLY_BOOL;
#endif
    default: return RL_REPLY_ARRAY; /* arrays, sets, maps, pushes */
    }
}

const char *rl_reply_str(const rl_reply *reply, size_t *len)
{
    const redisReply *r = (const redisReply *)reply;
    rl_reply_type kind = rl_reply_kind(reply);
    if (kind != RL_REPLY_STRING && kind != RL_REPLY_STATUS && kind != RL_REPLY_ERROR) return NULL;
    if (len) *len = r->len;
    return r->str;
}

int64_t rl_reply_integer(const rl_reply *reply)
{
    return ((const redisReply *)reply)->integer;
}

double rl_reply_double(const rl_reply *reply)
{
#ifdef REDIS_REPLY_DOUBLE
    return ((const redisReply *)reply)->dval;
#else
    (void)reply;
    return 0;
#endif
}

size_t rl_reply_count(const rl_reply *reply)
{
    return rl_reply_kind(reply) == RL_REPLY_ARRAY ? ((const redisReply *)reply)->elements : 0;
}

const rl_reply *rl_reply_at(const rl_reply *reply, size_t index)
{
    return index < rl_reply_count(reply) ? (const rl_reply *)((const redisReply *)reply)->element[index] : NULL;
}

int rl_client_masters(rl_client *client, int *slots, int max)
{
    RL_IN_FLIGHT(client);
    if (!client || (max > 0 && !slots)) return rl_fail(RL_ERR_INVALID, "client and slots must not be NULL");
    return rl_master_slots(client, slots, max);
}
