/* The semaphore, lock and delay queue on the wire: their argument checks,
 * commands, replies and wake-up channels, shared by the blocking calls
 * (sync.c) and the I/O thread's (submit.c, waits.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int rl_new_permit_id(char *out)
{
    unsigned char raw[16];
    if (rl_random_bytes(raw, sizeof raw)) return rl_fail(RL_ERR_CONNECTION, "no random bytes: %s", strerror(errno));
    for (size_t i = 0; i < sizeof raw; i++) snprintf(out + 2 * i, 3, "%02x", raw[i]);
    return RL_OK;
}

/* Wake-up channels are named like keys, <prefix>:{<tag>}:<kind>:wake, with
 * ":<id>" for one waiter (and ":" alone for the prefix the script appends to). */
char *rl_wake_channel(const rl_client *client, const char *name, const char *kind, const char *id)
{
    char suffix[64 + RL_PERMIT_ID_SIZE];
    snprintf(suffix, sizeof suffix, "%s:wake%s%s", kind, id ? ":" : "", id ? id : "");
    int len = rl_format_key(NULL, 0, client, name, NULL, suffix);
    char *s = len < 0 ? NULL : malloc((size_t)len + 1);
    if (s) rl_format_key(s, (size_t)len + 1, client, name, NULL, suffix);
    return s;
}

int rl_build_sem_call(rl_cmd *cmd, rl_client *client, const char *kind, const char *name, const char *op,
                      const char *id, int64_t max, int64_t lease, int enqueue)
{
    char suffix[4][32];
    char *channel = rl_wake_channel(client, name, kind, "");
    rl_cmd_init(cmd);
    if (!channel) return rl_fail(RL_ERR_NOMEM, "out of memory");
    snprintf(suffix[0], sizeof suffix[0], "%s", kind);
    snprintf(suffix[1], sizeof suffix[1], "%s:queue", kind);
    snprintf(suffix[2], sizeof suffix[2], "%s:waiters", kind);
    snprintf(suffix[3], sizeof suffix[3], "%s:meta", kind);
    rl_cmd_script(cmd, RL_SCRIPT_SEMAPHORE, 4);
    for (int i = 0; i < 4; i++) rl_cmd_key(cmd, client, name, NULL, suffix[i]);
    rl_cmd_cstr(cmd, op);
    rl_cmd_copy(cmd, id ? id : "", id ? strlen(id) : 0);
    rl_cmd_int(cmd, max);
    rl_cmd_int(cmd, lease);
    rl_cmd_int(cmd, enqueue);
    rl_cmd_int(cmd, RL_WAITER_TTL_MS);
    rl_cmd_copy(cmd, channel, strlen(channel));
    rl_cmd_cstr(cmd, rl_publish_command(client));
    free(channel);
    return cmd->failed ? rl_fail(RL_ERR_NOMEM, "out of memory building a command") : RL_OK;
}

/* acquire: {granted, fence, queue position, ms until the first lease ends or -1} */
int rl_decode_sem_acquire(const redisReply *r, int *granted, int64_t *fence, int64_t *first_lease_end)
{
    int64_t g = 0;
    int rc;
    if (!(rc = rl_reply_int(r, 0, &g)) && !(rc = rl_reply_int(r, 1, fence)))
        rc = rl_reply_int(r, 3, first_lease_end);
    *granted = g == 1;
    return rc;
}

int rl_check_sem_acquire(rl_client *client, const char *name, int64_t max, int64_t lease)
{
    int rc;
    if (!client) return rl_fail(RL_ERR_INVALID, "client must not be NULL");
    if ((rc = rl_check_name("name", name)) || (rc = rl_check_range("permits", max, 1, RL_MAX_PERMITS)))
        return rc;
    return rl_check_range("lease_ms", lease, 1, RL_MAX_WAIT_MS);
}

int rl_check_permit_call(rl_client *client, const char *name, const char *id)
{
    int rc;
    rl_clear_error();
    if (!client) return rl_fail(RL_ERR_INVALID, "client must not be NULL");
    if ((rc = rl_check_name("name", name)) || (rc = rl_check_name("permit id", id))) return rc;
    if (strlen(id) >= RL_PERMIT_ID_SIZE) return rl_fail(RL_ERR_INVALID, "permit id is too long");
    return RL_OK;
}

int rl_check_semaphore_info(rl_client *client, const char *name, int64_t permits_max)
{
    rl_clear_error();
    if (!client) return rl_fail(RL_ERR_INVALID, "client must not be NULL");
    int rc = rl_check_name("name", name);
    return rc || !permits_max ? rc : rl_check_range("permits", permits_max, 1, RL_MAX_PERMITS);
}

void rl_messages_free(rl_messages *messages)
{
    if (!messages) return;
    for (size_t i = 0; i < messages->count; i++) free(messages->items[i]);
    free(messages->items);
    free(messages->lens);
    memset(messages, 0, sizeof *messages);
}

static void queue_cmd(rl_cmd *cmd, rl_client *client, const char *queue, const char *command)
{
    rl_cmd_init(cmd);
    rl_cmd_cstr(cmd, command);
    rl_cmd_key(cmd, client, queue, NULL, "delay_queue");
}

static int check_queue_call(rl_client *client, const char *queue)
{
    rl_clear_error();
    if (!client) return rl_fail(RL_ERR_INVALID, "client must not be NULL");
    return rl_check_name("queue", queue);
}

static int check_message(const char *message, size_t len)
{
    if (!message || len == 0) return rl_fail(RL_ERR_INVALID, "message must not be empty");
    if (len > 64 * 1024 * 1024) return rl_fail(RL_ERR_INVALID, "message is larger than 64 MiB");
    return RL_OK;
}

/* An integer reply: delay_queue push, ZCARD, ZREM. */
int rl_decode_integer(const redisReply *r, const char *what, int64_t *out)
{
    if (r->type != REDIS_REPLY_INTEGER) return rl_fail(RL_ERR_PROTOCOL, "%s: unexpected reply", what);
    *out = r->integer;
    return RL_OK;
}

int rl_check_queue_push(rl_client *client, const char *queue, const char *message, size_t len, int64_t delay_ms)
{
    int rc;
    if ((rc = check_queue_call(client, queue)) || (rc = check_message(message, len))) return rc;
    return rl_check_range("delay_ms", delay_ms, 0, RL_MAX_WAIT_MS);
}

/* The message is copied: the command may outlive the caller's buffer. */
int rl_build_queue_push(rl_cmd *cmd, rl_client *client, const char *queue, const char *message, size_t len,
                        int64_t delay_ms)
{
    char *channel = rl_wake_channel(client, queue, "delay_queue", NULL);
    rl_cmd_init(cmd);
    if (!channel) return rl_fail(RL_ERR_NOMEM, "out of memory");
    rl_cmd_script(cmd, RL_SCRIPT_DELAY_QUEUE, 1);
    rl_cmd_key(cmd, client, queue, NULL, "delay_queue");
    rl_cmd_cstr(cmd, "push");
    rl_cmd_copy(cmd, message, len);
    rl_cmd_int(cmd, delay_ms);
    rl_cmd_copy(cmd, channel, strlen(channel));
    rl_cmd_cstr(cmd, rl_publish_command(client));
    free(channel);
    return cmd->failed ? rl_fail(RL_ERR_NOMEM, "out of memory building a command") : RL_OK;
}

int rl_check_queue_pop(rl_client *client, const char *queue, size_t max, int64_t timeout_ms)
{
    int rc;
    if ((rc = check_queue_call(client, queue)) || (rc = rl_check_range("max", (int64_t)max, 1, RL_QUEUE_POP_MAX)))
        return rc;
    return rl_check_range("timeout_ms", timeout_ms, 0, RL_MAX_WAIT_MS);
}

int rl_build_queue_pop(rl_cmd *cmd, rl_client *client, const char *queue, size_t max)
{
    rl_cmd_init(cmd);
    rl_cmd_script(cmd, RL_SCRIPT_DELAY_QUEUE, 1);
    rl_cmd_key(cmd, client, queue, NULL, "delay_queue");
    rl_cmd_cstr(cmd, "pop");
    rl_cmd_int(cmd, (int64_t)max);
    return cmd->failed ? rl_fail(RL_ERR_NOMEM, "out of memory building a command") : RL_OK;
}

/* pop: {ms until the next message is due or -1, message...} into out */
int rl_decode_queue_pop(const redisReply *r, rl_messages *out, int64_t *next_in)
{
    int rc;
    if ((rc = rl_reply_int(r, 0, next_in))) return rc;
    size_t n = r->elements - 1;
    if (n) {
        out->items = calloc(n, sizeof *out->items);
        out->lens = calloc(n, sizeof *out->lens);
        if (!out->items || !out->lens) return rl_fail(RL_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        redisReply *m = r->element[i + 1];
        /* messages already taken from Redis are handed over even on a later error */
        if (m->type != REDIS_REPLY_STRING) return rl_fail(RL_ERR_PROTOCOL, "delay_queue pop: unexpected reply");
        if (!(out->items[i] = malloc(m->len + 1))) return rl_fail(RL_ERR_NOMEM, "out of memory");
        memcpy(out->items[i], m->str, m->len);
        out->items[i][m->len] = '\0';
        out->lens[i] = m->len;
        out->count = i + 1;
    }
    return RL_OK;
}

int rl_build_queue_call(rl_cmd *cmd, rl_client *client, const char *queue, const char *message, size_t len)
{
    int rc;
    rl_cmd_init(cmd);
    if ((rc = check_queue_call(client, queue)) || (message && (rc = check_message(message, len)))) return rc;
    queue_cmd(cmd, client, queue, message ? "ZREM" : "ZCARD");
    if (message) rl_cmd_str(cmd, message, len);
    return cmd->failed ? rl_fail(RL_ERR_NOMEM, "out of memory building a command") : RL_OK;
}
