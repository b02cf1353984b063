/* Several plain decisions for one server in one call of limit.lua's batch
 * form: Redis pays the per-call cost (protocol, script lookup, TIME) once
 * for the batch instead of once per decision. */
#include <string.h>

#include <hiredis/sds.h>

#include "internal.h"

/* The single form is EVALSHA sha nkeys key... arg...; the batch form
 * EVALSHA sha K key... "batch" n, then per decision its nkeys and its args
 * (lua/limit.lua). */
static size_t nkeys_of(const rl_cmd *cmd)
{
    size_t k = 0;
    for (size_t i = 0; i < cmd->lens[2]; i++) k = k * 10 + (size_t)(cmd->argv[2][i] - '0');
    return k;
}

static char *put_arg(char *p, const char *s, size_t len)
{
    p = rl_resp_header(p, '$', len);
    memcpy(p, s, len);
    p += len;
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

static char *put_int(char *p, size_t v)
{
    char digits[32];
    size_t len = (size_t)(rl_resp_header(digits, ':', v) - digits) - 3; /* ":" digits "\r\n" */
    return put_arg(p, digits + 1, len);
}

int rl_append_batch(redisContext *ctx, const rl_cmd *const *cmds, size_t n)
{
    size_t argc = 5, keys = 0, total = 6 * 26;
    for (size_t j = 0; j < n; j++) {
        argc += (size_t)cmds[j]->argc - 3 + 1;
        keys += nkeys_of(cmds[j]);
        total += 26;
        for (int i = 3; i < cmds[j]->argc; i++) total += 1 + 20 + 2 + cmds[j]->lens[i] + 2;
    }
    sds buf = sdsMakeRoomFor(ctx->obuf, total);
    if (!buf) {
        ctx->err = REDIS_ERR_OOM;
        strcpy(ctx->errstr, "Out of memory");
        return REDIS_ERR;
    }
    ctx->obuf = buf;
    char *start = buf + sdslen(buf), *p = rl_resp_header(start, '*', argc);
    p = put_arg(p, cmds[0]->argv[0], cmds[0]->lens[0]); /* EVALSHA sha */
    p = put_arg(p, cmds[0]->argv[1], cmds[0]->lens[1]);
    p = put_int(p, keys);
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0, k = nkeys_of(cmds[j]); i < k; i++) p = put_arg(p, cmds[j]->argv[3 + i], cmds[j]->lens[3 + i]);
    p = put_arg(p, "batch", 5);
    p = put_int(p, n);
    for (size_t j = 0; j < n; j++) {
        size_t k = nkeys_of(cmds[j]);
        p = put_int(p, k);
        for (int i = 3 + (int)k; i < cmds[j]->argc; i++) p = put_arg(p, cmds[j]->argv[i], cmds[j]->lens[i]);
    }
    sdsIncrLen(buf, (ssize_t)(p - start));
    return REDIS_OK;
}

int rl_batch_reply_ok(const redisReply *reply, size_t n)
{
    if (!reply || reply->type != REDIS_REPLY_ARRAY || reply->elements != n) return 0;
    for (size_t i = 0; i < n; i++)
        if (reply->element[i]->type != REDIS_REPLY_ARRAY && reply->element[i]->type != REDIS_REPLY_ERROR) return 0;
    return 1;
}
