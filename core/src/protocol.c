/* The request protocol both engines follow (run.c blocking, async.c on
 * the I/O thread): which commands share a batch call and how its reply
 * splits, what a reply means (the answer, a redirect, "not now", a script
 * not loaded), how long to keep trying, and SCRIPT LOAD. The engines move
 * the bytes; the decisions are made here, once. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

size_t rl_plan_calls(const rl_client *c, const rl_cmd *const *cmds, const char *alone, size_t m, size_t *ord,
                     size_t *len, char *placed)
{
    size_t calls = 0, o = 0, cap = (size_t)c->options.max_batch;
    int cluster = c->url.mode == RL_MODE_CLUSTER;
#define JOINS(k) (cmds[k]->batchable && !(alone && alone[k]) && cap > 1)
    memset(placed, 0, m);
    for (size_t k = 0; k < m; k++) {
        if (placed[k]) continue;
        size_t start = o;
        int passed = 0;
        ord[o++] = k;
        placed[k] = 1;
        for (size_t j = k + 1; JOINS(k) && j < m && o - start < cap; j++) {
            if (!JOINS(j)) break;
            if (placed[j]) continue;
            if (cluster && cmds[j]->slot != cmds[k]->slot) {
                passed = 1;
                continue;
            }
            ord[o++] = j;
            placed[j] = passed ? 2 : 1;
        }
        len[calls++] = o - start;
    }
    return calls;
#undef JOINS
}

int rl_append_call(redisContext *ctx, const rl_cmd *const *cmds, size_t n)
{
    if (n > 1) return rl_append_batch(ctx, cmds, n);
    return rl_append_command(ctx, cmds[0]->argc, (const char **)cmds[0]->argv, cmds[0]->lens);
}

const redisReply *rl_batch_part(const redisReply *reply, int ok, size_t i)
{
    static const redisReply empty = {.type = REDIS_REPLY_ARRAY};
    return ok ? reply->element[i] : reply->type == REDIS_REPLY_ERROR ? reply : &empty;
}

int64_t rl_retry_pause_ms(int64_t previous_ms, int tries, int later)
{
    if (!later && tries <= RL_FREE_REDIRECTS) return 0;
    return previous_ms <= 0 ? 5 : previous_ms < 50 ? previous_ms * 2 : 100;
}

int rl_reply_is_noscript(const redisReply *r)
{
    return r && r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "NOSCRIPT", 8);
}

int rl_reload_wanted(const rl_cmd *cmd, const redisReply *r, int tries)
{
    return cmd->script >= 0 && rl_reply_is_noscript(r) && tries < RL_MAX_RESENDS;
}

void rl_script_load_command(int script, const char *argv[3], size_t lens[3])
{
    const char *words[3] = {"SCRIPT", "LOAD", rl_scripts[script].text};
    size_t sizes[3] = {6, 4, rl_scripts[script].length};
    memcpy(argv, words, sizeof words);
    memcpy(lens, sizes, sizeof sizes);
}

/* Replies that prove the command did not run may send it again; nothing
 * else ever is (a timeout or a broken connection may have consumed). */
rl_reply_verdict rl_classify_reply(const rl_client *c, const redisReply *r, int *slot, char *host, size_t host_size,
                             int *port)
{
    if (!r || r->type != REDIS_REPLY_ERROR) return REPLY_FINAL;
    int moved = !strncmp(r->str, "MOVED ", 6), ask = !strncmp(r->str, "ASK ", 4);
    if ((moved || ask) && c->url.mode == RL_MODE_CLUSTER) {
        /* MOVED 3999 127.0.0.1:6381 ; an empty host means the same server */
        const char *p = r->str + (moved ? 6 : 4);
        char *end;
        long s = strtol(p, &end, 10);
        const char *colon = strrchr(end, ':');
        if (end == p || *end != ' ' || !colon || s < 0 || s >= RL_CLUSTER_SLOTS) return REPLY_FINAL;
        size_t len = (size_t)(colon - end - 1);
        if (len >= host_size) return REPLY_FINAL;
        memcpy(host, end + 1, len);
        host[len] = '\0';
        *slot = (int)s;
        long n = strtol(colon + 1, NULL, 10); /* not atoi: it wraps 4294967297 to 1 */
        if (n <= 0 || n > 65535) return REPLY_FINAL;
        *port = (int)n;
        return moved ? REPLY_MOVED : REPLY_ASK;
    }
    if (!strncmp(r->str, "TRYAGAIN", 8) || !strncmp(r->str, "CLUSTERDOWN", 11) || !strncmp(r->str, "LOADING", 7) ||
        !strncmp(r->str, "MASTERDOWN", 10))
        return REPLY_LATER;
    /* a replica refused the script's write: in a batch call, limit.lua's
     * pcall reports it as "ERR " and Redis's message (nothing was written) */
    if ((!strncmp(r->str, "READONLY", 8) || !strncmp(r->str, "ERR READONLY", 12)) && c->url.mode == RL_MODE_SENTINEL)
        return REPLY_READONLY;
    return REPLY_FINAL;
}

rl_reply_verdict rl_follow_reply(rl_client *c, const redisReply *r, rl_node *from, rl_node **ask)
{
    char host[256];
    int slot = -1, port = 0;
    rl_reply_verdict kind = rl_classify_reply(c, r, &slot, host, sizeof host, &port);
    *ask = NULL;
    if (kind == REPLY_MOVED) rl_cluster_moved(c, slot, host[0] ? host : from->host, port);
    else if (kind == REPLY_ASK) *ask = rl_node_for(c, host[0] ? host : from->host, port);
    else if (kind == REPLY_READONLY) rl_topology_suspect(c, from);
    return kind;
}

/* ---- a script's reply ---- */

int rl_reply_int(const redisReply *r, size_t index, int64_t *out)
{
    if (!r || r->type != REDIS_REPLY_ARRAY || index >= r->elements ||
        r->element[index]->type != REDIS_REPLY_INTEGER)
        return rl_fail(RL_ERR_PROTOCOL, "unexpected reply shape from a script");
    *out = r->element[index]->integer;
    return RL_OK;
}

/* limit.lua's reply to one decision */
int rl_decode_result(const redisReply *r, rl_result *out)
{
    int64_t v[8];
    int rc;
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 8)
        return rl_fail(RL_ERR_PROTOCOL, "a limiter script returned an unexpected reply");
    for (size_t i = 0; i < 8; i++)
        if ((rc = rl_reply_int(r, i, &v[i]))) return rc;
    if (v[7] < 0 || v[7] >= RL_MAX_RATES)
        return rl_fail(RL_ERR_PROTOCOL, "a limiter script named rate %lld", (long long)v[7]);
    out->allowed = v[0] != 0;
    out->limit = v[1];
    out->remaining = v[2];
    out->retry_after_ms = v[3];
    out->reset_after_ms = v[4];
    out->wait_ms = v[5];
    out->granted = v[6];
    out->rate_index = (int)v[7];
    out->fallback = 0;
    out->local = 0;
    return RL_OK;
}

/* Redis is unreachable and the client was told to decide without it. */
void rl_fallback_result(const rl_client *client, int64_t capacity, int64_t permits, rl_result *out)
{
    int allow = client->options.on_error == RL_ON_ERROR_ALLOW;
    out->allowed = allow;
    out->limit = capacity;
    out->remaining = 0;
    out->retry_after_ms = allow ? -1 : 1000;
    out->reset_after_ms = 0;
    out->wait_ms = 0;
    out->fallback = 1;
    out->granted = allow ? permits : 0;
    out->rate_index = 0;
    out->local = 0;
}
