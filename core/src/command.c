/* Commands: built as argv (rl_cmd) and written as RESP straight into a
 * connection's output, one call or (limit.lua's batch form) several
 * decisions in one. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/sds.h>

#include "internal.h"

void rl_cmd_init(rl_cmd *cmd)
{
    cmd->argc = 0;
    cmd->failed = 0;
    cmd->script = -1;
    cmd->slot = -1;
    cmd->batchable = 0;
    cmd->short_form = 0;
    cmd->text_used = 0;
}

void rl_cmd_free(rl_cmd *cmd)
{
    for (int i = 0; i < cmd->argc; i++) free(cmd->owned[i]);
    cmd->argc = 0;
}

void rl_cmd_move(rl_cmd *to, const rl_cmd *from)
{
    uintptr_t lo = (uintptr_t)from, hi = lo + sizeof *from;
    *to = *from;
    for (int i = 0; i < to->argc; i++) /* what pointed into from's storage points into to's */
        if ((uintptr_t)to->argv[i] >= lo && (uintptr_t)to->argv[i] < hi)
            to->argv[i] = (const char *)to + ((uintptr_t)to->argv[i] - lo);
}

static void push_arg(rl_cmd *cmd, const char *s, size_t len, char *owned)
{
    if (cmd->argc >= RL_CMD_MAX_ARGS || !s) {
        free(owned);
        cmd->failed = 1;
        return;
    }
    cmd->argv[cmd->argc] = s;
    cmd->lens[cmd->argc] = len;
    cmd->owned[cmd->argc] = owned;
    cmd->argc++;
}

void rl_cmd_str(rl_cmd *cmd, const char *s, size_t len)
{
    push_arg(cmd, s, len, NULL);
}

void rl_cmd_copy(rl_cmd *cmd, const char *s, size_t len)
{
    char *copy = malloc(len + 1);
    if (copy) {
        memcpy(copy, s, len);
        copy[len] = '\0';
    }
    push_arg(cmd, copy, len, copy);
}

void rl_cmd_cstr(rl_cmd *cmd, const char *s)
{
    push_arg(cmd, s, s ? strlen(s) : 0, NULL);
}

/* v in decimal at p; returns the end. By hand, two digits a step: snprintf
 * was a tenth of a decision's client CPU. */
static char *put_uint(char *p, uint64_t v)
{
    static const char pairs[] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                                "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                                "8081828384858687888990919293949596979899";
    size_t n = 1;
    for (uint64_t above = 10; n < 20 && v >= above; above *= 10) n++;
    char *end = p + n;
    for (; v >= 100; v /= 100) {
        size_t i = (size_t)(v % 100) * 2;
        *--end = pairs[i + 1];
        *--end = pairs[i];
    }
    if (v >= 10) {
        *--end = pairs[v * 2 + 1];
        *--end = pairs[v * 2];
    } else {
        *--end = (char)('0' + v);
    }
    return p + n;
}

void rl_cmd_int(rl_cmd *cmd, int64_t value)
{
    if (cmd->argc >= RL_CMD_MAX_ARGS) {
        cmd->failed = 1;
        return;
    }
    char *s = cmd->ints[cmd->argc], *end = s;
    if (value < 0) *end++ = '-';
    end = put_uint(end, value < 0 ? (uint64_t)0 - (uint64_t)value : (uint64_t)value);
    *end = '\0';
    push_arg(cmd, s, (size_t)(end - s), NULL);
}

/* limit.lua's short form: op, permits, limit, period_ms, burst as one
 * argument, five little-endian int64 (struct.unpack's '<i8'), the
 * script's last. Each is complemented, so the usual small numbers have no
 * zero byte: a tool that cannot send one (redis-benchmark -x) can replay
 * the call. */
void rl_cmd_short_form(rl_cmd *cmd, const int64_t numbers[5])
{
    for (int i = 0; i < 5; i++)
        for (int b = 0; b < 8; b++) cmd->packed[8 * i + b] = (unsigned char)(~(uint64_t)numbers[i] >> (8 * b));
    cmd->short_form = 1;
    push_arg(cmd, (const char *)cmd->packed, sizeof cmd->packed, NULL);
}

int rl_format_key(char *buf, size_t size, const rl_client *client, const char *name, const char *id,
                  const char *suffix)
{
    char *tag = rl_entity_tag(name, id, NULL);
    if (!tag) return rl_fail(RL_ERR_NOMEM, "out of memory");
    int n = snprintf(buf, size, "%s:{%s}:%s", client->prefix, tag, suffix);
    free(tag);
    return n;
}

void rl_cmd_key(rl_cmd *cmd, const rl_client *client, const char *name, const char *id, const char *suffix)
{
    rl_cmd_entity_key(cmd, client, name, id, NULL, suffix);
}

void rl_cmd_entity_key(rl_cmd *cmd, const rl_client *client, const char *name, const char *id, const char *owner,
                       const char *suffix)
{
    size_t prefix_len = strlen(client->prefix), tag_len = rl_entity_tag_write(name, id, owner, NULL),
           suffix_len = strlen(suffix);
    size_t len = prefix_len + 2 + tag_len + 2 + suffix_len;
    /* in cmd's own text when it fits: no malloc, nothing to free */
    char *owned = NULL, *s = cmd->text + cmd->text_used;
    if (len + 1 <= sizeof cmd->text - cmd->text_used) cmd->text_used += len + 1;
    else if (!(s = owned = malloc(len + 1))) {
        cmd->failed = 1;
        return;
    }
    /* prefix ":{" tag "}:" suffix, as rl_format_key writes it */
    memcpy(s, client->prefix, prefix_len);
    memcpy(s + prefix_len, ":{", 2);
    rl_entity_tag_write(name, id, owner, s + prefix_len + 2);
    memcpy(s + prefix_len + 2 + tag_len, "}:", 2);
    memcpy(s + prefix_len + 4 + tag_len, suffix, suffix_len + 1);
    push_arg(cmd, s, len, owned);
    if (cmd->slot < 0 && !cmd->failed) cmd->slot = rl_key_slot(s, len);
}

void rl_cmd_script(rl_cmd *cmd, int script, int nkeys)
{
    cmd->script = script;
    rl_cmd_cstr(cmd, "EVALSHA");
    rl_cmd_cstr(cmd, rl_scripts[script].sha1);
    rl_cmd_int(cmd, nkeys);
}

char *rl_resp_header(char *p, char kind, size_t n)
{
    *p++ = kind;
    p = put_uint(p, n);
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

/* room for total more bytes in ctx's output: its end, or NULL (out of memory, ctx->err set) */
static char *reserve(redisContext *ctx, size_t total)
{
    sds buf = sdsMakeRoomFor(ctx->obuf, total);
    if (!buf) {
        ctx->err = REDIS_ERR_OOM;
        snprintf(ctx->errstr, sizeof ctx->errstr, "Out of memory");
        return NULL;
    }
    ctx->obuf = buf;
    return buf + sdslen(buf);
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

static char *put_int_arg(char *p, size_t v)
{
    char digits[24];
    return put_arg(p, digits, (size_t)(put_uint(digits, v) - digits));
}

/* redisAppendCommandArgv, formatted by hand straight into the output buffer:
 * hiredis's sdscatfmt per argument and copy were a third of a pipelined
 * decision's client instructions. lens NULL: C strings. */
int rl_append_command(redisContext *ctx, int argc, const char **argv, const size_t *lens)
{
    size_t total = 1 + 20 + 2;
    for (int i = 0; i < argc; i++) total += 1 + 20 + 2 + (lens ? lens[i] : strlen(argv[i])) + 2;
    char *start = reserve(ctx, total), *p;
    if (!start) return REDIS_ERR;
    p = rl_resp_header(start, '*', (size_t)argc);
    for (int i = 0; i < argc; i++) p = put_arg(p, argv[i], lens ? lens[i] : strlen(argv[i]));
    sdsIncrLen(ctx->obuf, (ssize_t)(p - start));
    return REDIS_OK;
}

/* The single form is EVALSHA sha nkeys key... arg...; the batch form
 * EVALSHA sha K key... "batch" n, then per decision its nkeys and its args,
 * "*" and a short form's two args, or "=" and its permits where the args
 * are the decision before's but for permits (lua/limit.lua). */
static size_t nkeys_of(const rl_cmd *cmd)
{
    size_t k = 0;
    for (size_t i = 0; i < cmd->lens[2]; i++) k = k * 10 + (size_t)(cmd->argv[2][i] - '0');
    return k;
}

/* permits among a full form's args (the single form's ARGV); a short
 * form's args are its algorithm (argv[4]) and the packed numbers, permits
 * at byte 8 */
enum { PERMITS_ARG = 3, SHORT_ALGORITHM_ARG = 4, SHORT_PERMITS_AT = 8 };

static size_t decision_argc(const rl_cmd *cmd, size_t k)
{
    return (size_t)cmd->argc - 3 - k;
}

/* whether b's arguments are a's but for permits (same key count, same form) */
static int repeats(const rl_cmd *a, const rl_cmd *b)
{
    size_t k = nkeys_of(a), n = decision_argc(a, k);
    if (a->short_form != b->short_form) return 0;
    if (a->short_form) {
        const size_t la = a->lens[SHORT_ALGORITHM_ARG], rest = SHORT_PERMITS_AT + 8;
        return la == b->lens[SHORT_ALGORITHM_ARG] &&
               !memcmp(a->argv[SHORT_ALGORITHM_ARG], b->argv[SHORT_ALGORITHM_ARG], la) &&
               !memcmp(a->packed, b->packed, SHORT_PERMITS_AT) &&
               !memcmp(a->packed + rest, b->packed + rest, sizeof a->packed - rest);
    }
    if (k != nkeys_of(b) || n != decision_argc(b, k)) return 0;
    for (size_t i = 3 + k; i < 3 + k + n; i++)
        if (i != 3 + k + PERMITS_ARG && (a->lens[i] != b->lens[i] || memcmp(a->argv[i], b->argv[i], a->lens[i]) != 0))
            return 0;
    return 1;
}

/* the permits a repeat sends: a full form's in decimal, a short form's packed */
static const char *repeated_permits(const rl_cmd *cmd, size_t k, size_t *len)
{
    if (cmd->short_form) {
        *len = 8;
        return (const char *)cmd->packed + SHORT_PERMITS_AT;
    }
    *len = cmd->lens[3 + k + PERMITS_ARG];
    return cmd->argv[3 + k + PERMITS_ARG];
}

int rl_append_batch(redisContext *ctx, const rl_cmd *const *cmds, size_t n)
{
    size_t argc = 5, keys = 0, total = 6 * 26, len;
    unsigned char repeated[RL_MAX_BATCH];
    if (n > RL_MAX_BATCH) { /* callers group at most max_batch */
        ctx->err = REDIS_ERR_OTHER;
        snprintf(ctx->errstr, sizeof ctx->errstr, "a batch of more than %d decisions", RL_MAX_BATCH);
        return REDIS_ERR;
    }
    for (size_t j = 0; j < n; j++) {
        size_t k = nkeys_of(cmds[j]), m = decision_argc(cmds[j], k);
        keys += k;
        argc += k;
        total += k * 26;
        for (size_t i = 3; i < 3 + k; i++) total += cmds[j]->lens[i];
        repeated[j] = j > 0 && repeats(cmds[j - 1], cmds[j]);
        if (repeated[j]) {
            argc += 2;
            repeated_permits(cmds[j], k, &len);
            total += 2 * 26 + len;
            continue;
        }
        /* its nkeys (or "*") and its args */
        argc += 1 + m;
        total += 26 + m * 26;
        for (size_t i = 3 + k; i < 3 + k + m; i++) total += cmds[j]->lens[i];
    }
    char *start = reserve(ctx, total), *p;
    if (!start) return REDIS_ERR;
    p = rl_resp_header(start, '*', argc);
    p = put_arg(p, cmds[0]->argv[0], cmds[0]->lens[0]); /* EVALSHA sha */
    p = put_arg(p, cmds[0]->argv[1], cmds[0]->lens[1]);
    p = put_int_arg(p, keys);
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0, k = nkeys_of(cmds[j]); i < k; i++) p = put_arg(p, cmds[j]->argv[3 + i], cmds[j]->lens[3 + i]);
    p = put_arg(p, "batch", 5);
    p = put_int_arg(p, n);
    for (size_t j = 0; j < n; j++) {
        size_t k = nkeys_of(cmds[j]), m = decision_argc(cmds[j], k);
        if (repeated[j]) {
            p = put_arg(p, "=", 1);
            const char *s = repeated_permits(cmds[j], k, &len);
            p = put_arg(p, s, len);
            continue;
        }
        p = cmds[j]->short_form ? put_arg(p, "*", 1) : put_int_arg(p, k);
        for (size_t i = 3 + k; i < 3 + k + m; i++) p = put_arg(p, cmds[j]->argv[i], cmds[j]->lens[i]);
    }
    sdsIncrLen(ctx->obuf, (ssize_t)(p - start));
    return REDIS_OK;
}

int rl_batch_reply_ok(const redisReply *reply, size_t n)
{
    if (!reply || reply->type != REDIS_REPLY_ARRAY || reply->elements != n) return 0;
    for (size_t i = 0; i < n; i++)
        if (reply->element[i]->type != REDIS_REPLY_ARRAY && reply->element[i]->type != REDIS_REPLY_ERROR) return 0;
    return 1;
}

const char *rl_publish_command(const rl_client *client)
{
    return client->url.mode == RL_MODE_CLUSTER ? "SPUBLISH" : "PUBLISH";
}
