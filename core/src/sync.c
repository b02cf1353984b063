/* Semaphore, lock and delay queue: the waiting side of the library (their
 * commands and replies: primitive_commands.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

size_t rl_script_count(void)
{
    return RL_SCRIPT_COUNT;
}

int rl_script_info(size_t index, const char **name, const char **sha1)
{
    if (index >= RL_SCRIPT_COUNT) return rl_fail(RL_ERR_INVALID, "no script %zu", index);
    if (name) *name = rl_scripts[index].name;
    if (sha1) *sha1 = rl_scripts[index].sha1;
    return RL_OK;
}

/* Waits up to ms for a message on a subscribed connection. Returns 1 when one
 * arrived, 0 on timeout, or a negative status. */
static int wait_message(rl_client *client, rl_conn *sub, int64_t ms, const rl_wait *wait)
{
    int64_t end = rl_now_ms() + ms;
    for (;;) {
        if (wait && wait->cancel && wait->cancel(wait->cancel_ctx))
            return rl_fail(RL_ERR_CANCELLED, "wait cancelled");
        if (rl_waits_stopped(client)) return RL_ERR_CLOSED;
        int64_t left = end - rl_now_ms();
        if (left <= 0) return 0;
        struct pollfd pfd = {sub->ctx->fd, POLLIN, 0};
        int n = rl_poll(&pfd, 1, (int)(left < 100 ? left : 100));
        if (n < 0 && errno != EINTR) return rl_fail(RL_ERR_CONNECTION, "poll: %s", strerror(errno));
        if (n <= 0) continue;
        void *reply = NULL;
        if (rl_conn_read(sub, &reply) != REDIS_OK) return rl_conn_error(sub, "wait for wake-up");
        rl_reply_free(reply);
        /* several wake-ups read at once count as one: we retry right away */
        while (redisReaderGetReply(sub->ctx->reader, &reply) == REDIS_OK && reply) rl_reply_free(reply);
        return 1;
    }
}

/* Waits for a wake-up on sub, or sleeps when there is none (the
 * subscription broke: a failover, a slot that moved). Sleeping is still
 * correct, as every waiter tries again at least every nap; it is only
 * slower to notice a release. */
static int nap(rl_client *client, rl_conn **sub, int64_t ms, const rl_wait *wait)
{
    if (*sub) {
        int rc = wait_message(client, *sub, ms, wait);
        if (rc != RL_ERR_CONNECTION && rc != RL_ERR_TIMEOUT && rc != RL_ERR_PROTOCOL) return rc < 0 ? rc : RL_OK;
        rl_conn_close(*sub);
        *sub = NULL;
    }
    return rl_client_sleep(client, ms < 1000 ? ms : 1000, wait);
}

/* A connection of its own subscribed to channel, on the server that owns
 * the channel's slot: sharded (SSUBSCRIBE) in a cluster. */
static int subscribe(rl_client *client, const char *channel, rl_conn **out)
{
    const char *argv[2] = {client->url.mode == RL_MODE_CLUSTER ? "SSUBSCRIBE" : "SUBSCRIBE", channel};
    rl_node *node;
    rl_conn *sub;
    redisReply *r;
    int rc;
    if ((rc = rl_route(client, rl_key_slot(channel, strlen(channel)), &node)) ||
        (rc = rl_conn_open_data(client, node, &sub)))
        return rc;
    r = rl_command(sub, 2, argv, NULL);
    if (!r || r->type != REDIS_REPLY_ARRAY) {
        rc = r ? rl_fail(RL_ERR_REDIS, "%s failed: %s", argv[0], r->type == REDIS_REPLY_ERROR ? r->str : "bad reply")
               : rl_conn_error(sub, argv[0]);
        if (r) rl_reply_free(r);
        rl_conn_close(sub);
        return rc;
    }
    rl_reply_free(r);
    *out = sub;
    return RL_OK;
}

static int64_t wait_timeout(const rl_wait *wait)
{
    return wait ? wait->timeout_ms : 0;
}

/* ---- semaphore and lock ------------------------------------------------ */

typedef struct {
    int granted;
    int64_t fence;
    int64_t first_lease_end; /* ms until the earliest lease ends, -1 none */
} sem_reply;

static int sem_call(rl_client *client, const char *kind, const char *name, const char *op, const char *id,
                    int64_t max, int64_t lease, int enqueue, redisReply **reply)
{
    rl_cmd cmd;
    int rc = rl_build_sem_call(&cmd, client, kind, name, op, id, max, lease, enqueue);
    if (!rc) rc = rl_run(client, &cmd, 1, reply);
    rl_cmd_free(&cmd);
    return rc;
}

static int sem_try(rl_client *client, const char *kind, const char *name, const char *id, int64_t max,
                   int64_t lease, int enqueue, sem_reply *out)
{
    redisReply *r;
    int rc = sem_call(client, kind, name, "acquire", id, max, lease, enqueue, &r);
    if (rc) return rc;
    rc = rl_decode_sem_acquire(r, &out->granted, &out->fence, &out->first_lease_end);
    rl_reply_free(r);
    return rc;
}

static int sem_simple(rl_client *client, const char *kind, const char *name, const char *op, const char *id,
                      int64_t lease, int *done)
{
    redisReply *r;
    int64_t v = 0;
    int rc = sem_call(client, kind, name, op, id, 1, lease, 0, &r);
    if (rc) return rc;
    rc = rl_reply_int(r, 0, &v);
    rl_reply_free(r);
    if (done) *done = v == 1;
    return rc;
}

static int sem_acquire(rl_client *client, const char *kind, const char *name, int64_t max, int64_t lease,
                       const rl_wait *wait, rl_permit *out)
{
    int64_t timeout = wait_timeout(wait), deadline;
    rl_conn *sub = NULL;
    char *channel = NULL;
    sem_reply reply;
    int rc;

    rl_clear_error();
    if (!out) return rl_fail(RL_ERR_INVALID, "out must not be NULL");
    memset(out, 0, sizeof *out);
    if ((rc = rl_check_sem_acquire(client, name, max, lease)) ||
        (rc = rl_check_range("timeout_ms", timeout, 0, RL_MAX_WAIT_MS)) || (rc = rl_new_permit_id(out->id)))
        return rc;
    out->lease_ms = lease;
    deadline = rl_now_ms() + timeout;
    if ((rc = sem_try(client, kind, name, out->id, max, lease, 0, &reply))) return rc;
    if (reply.granted || timeout == 0) goto done;

    /* Subscribe before queueing: a release between our try and our wait
     * then still reaches us. */
    if (!(channel = rl_wake_channel(client, name, kind, out->id))) return rl_fail(RL_ERR_NOMEM, "out of memory");
    /* no subscription (a failover under way): poll, every nap */
    if ((rc = subscribe(client, channel, &sub)) && rc != RL_ERR_CONNECTION && rc != RL_ERR_TIMEOUT &&
        rc != RL_ERR_REDIS)
        goto cleanup;
    rc = RL_OK;
    for (;;) {
        if ((rc = sem_try(client, kind, name, out->id, max, lease, 1, &reply)) || reply.granted) break;
        int64_t left = deadline - rl_now_ms();
        if (left <= 0) break;
        int64_t pause = RL_WAITER_TTL_MS / 3;
        if (reply.first_lease_end >= 0 && reply.first_lease_end + 1 < pause) pause = reply.first_lease_end + 1;
        if (left < pause) pause = left;
        if ((rc = nap(client, &sub, pause, wait))) break;
    }
    if (!reply.granted) {
        /* leave the queue so those behind us move up; keep the first error */
        char msg[512];
        snprintf(msg, sizeof msg, "%s", rl_errmsg());
        sem_simple(client, kind, name, "leave", out->id, 0, NULL);
        if (rc) rl_fail(rc, "%s", msg);
    }
cleanup:
    rl_conn_close(sub);
    free(channel);
    if (rc) return rc;
done:
    out->acquired = reply.granted;
    out->fencing_token = reply.granted ? reply.fence : 0;
    if (!reply.granted) out->id[0] = '\0';
    return RL_OK;
}

int rl_semaphore_acquire(rl_client *client, const char *name, int64_t permits_max, int64_t lease_ms,
                         const rl_wait *wait, rl_permit *out)
{
    RL_IN_FLIGHT_ELSE(client, if (out) memset(out, 0, sizeof *out));
    return sem_acquire(client, "semaphore", name, permits_max, lease_ms, wait, out);
}

int rl_semaphore_release(rl_client *client, const char *name, const char *permit_id, int *released)
{
    RL_IN_FLIGHT(client);
    int rc = rl_check_permit_call(client, name, permit_id);
    return rc ? rc : sem_simple(client, "semaphore", name, "release", permit_id, 0, released);
}

int rl_semaphore_refresh(rl_client *client, const char *name, const char *permit_id, int64_t lease_ms,
                         int *refreshed)
{
    RL_IN_FLIGHT(client);
    int rc = rl_check_permit_call(client, name, permit_id);
    if (!rc) rc = rl_check_range("lease_ms", lease_ms, 1, RL_MAX_WAIT_MS);
    return rc ? rc : sem_simple(client, "semaphore", name, "refresh", permit_id, lease_ms, refreshed);
}

static int sem_info(rl_client *client, const char *name, int64_t *holders, int64_t *waiters)
{
    redisReply *r;
    int rc;
    rl_clear_error();
    if ((rc = rl_check_semaphore_info(client, name, 0))) return rc;
    if ((rc = sem_call(client, "semaphore", name, "info", NULL, 1, 1, 0, &r))) return rc;
    if (!(rc = rl_reply_int(r, 0, holders))) rc = rl_reply_int(r, 1, waiters);
    rl_reply_free(r);
    return rc;
}

int rl_semaphore_available(rl_client *client, const char *name, int64_t permits_max, int64_t *available)
{
    RL_IN_FLIGHT(client);
    int64_t holders, waiters;
    int rc = rl_check_range("permits", permits_max, 1, RL_MAX_PERMITS);
    if (!rc && !available) rc = rl_fail(RL_ERR_INVALID, "available must not be NULL");
    if (rc || (rc = sem_info(client, name, &holders, &waiters))) return rc;
    *available = permits_max > holders ? permits_max - holders : 0;
    return RL_OK;
}

int rl_semaphore_holders(rl_client *client, const char *name, int64_t *holders)
{
    RL_IN_FLIGHT(client);
    int64_t waiters;
    if (!holders) return rl_fail(RL_ERR_INVALID, "holders must not be NULL");
    return sem_info(client, name, holders, &waiters);
}

int rl_lock_acquire(rl_client *client, const char *name, int64_t lease_ms, const rl_wait *wait, rl_permit *out)
{
    RL_IN_FLIGHT_ELSE(client, if (out) memset(out, 0, sizeof *out));
    return sem_acquire(client, "lock", name, 1, lease_ms, wait, out);
}

int rl_lock_release(rl_client *client, const char *name, const char *token, int *released)
{
    RL_IN_FLIGHT(client);
    int rc = rl_check_permit_call(client, name, token);
    return rc ? rc : sem_simple(client, "lock", name, "release", token, 0, released);
}

int rl_lock_extend(rl_client *client, const char *name, const char *token, int64_t lease_ms, int *extended)
{
    RL_IN_FLIGHT(client);
    int rc = rl_check_permit_call(client, name, token);
    if (!rc) rc = rl_check_range("lease_ms", lease_ms, 1, RL_MAX_WAIT_MS);
    return rc ? rc : sem_simple(client, "lock", name, "refresh", token, lease_ms, extended);
}

/* ---- delay queue ------------------------------------------------------------ */

int rl_queue_push(rl_client *client, const char *queue, const char *message, size_t message_len,
                  int64_t delay_ms, int *added)
{
    RL_IN_FLIGHT(client);
    rl_cmd cmd;
    redisReply *r;
    int64_t v = 0;
    int rc;
    if ((rc = rl_check_queue_push(client, queue, message, message_len, delay_ms))) return rc;
    if (!(rc = rl_build_queue_push(&cmd, client, queue, message, message_len, delay_ms)))
        rc = rl_run(client, &cmd, 1, &r);
    rl_cmd_free(&cmd);
    if (rc) return rc;
    rc = rl_decode_integer(r, "delay_queue push", &v);
    if (!rc && added) *added = v == 1;
    rl_reply_free(r);
    return rc;
}

/* One pop; *next_in = ms until the next message is due, -1 if none. */
static int pop_once(rl_client *client, const char *queue, size_t max, rl_messages *out, int64_t *next_in)
{
    rl_cmd cmd;
    redisReply *r;
    int rc = rl_build_queue_pop(&cmd, client, queue, max);
    if (!rc) rc = rl_run(client, &cmd, 1, &r);
    rl_cmd_free(&cmd);
    if (rc) return rc;
    rc = rl_decode_queue_pop(r, out, next_in);
    rl_reply_free(r);
    return rc;
}

int rl_queue_pop_ready(rl_client *client, const char *queue, size_t max, rl_messages *out)
{
    RL_IN_FLIGHT_ELSE(client, if (out) memset(out, 0, sizeof *out)); /* freed by callers */
    int64_t next_in;
    int rc;
    if (!out) return rl_fail(RL_ERR_INVALID, "out must not be NULL");
    memset(out, 0, sizeof *out);
    if ((rc = rl_check_queue_pop(client, queue, max, 0))) return rc;
    return pop_once(client, queue, max, out, &next_in);
}

int rl_queue_pop_wait(rl_client *client, const char *queue, size_t max, const rl_wait *wait, rl_messages *out)
{
    RL_IN_FLIGHT_ELSE(client, if (out) memset(out, 0, sizeof *out)); /* freed by callers */
    int64_t timeout = wait_timeout(wait), deadline, next_in;
    rl_conn *sub = NULL;
    char *channel;
    int rc;
    if (!out) return rl_fail(RL_ERR_INVALID, "out must not be NULL");
    memset(out, 0, sizeof *out);
    if ((rc = rl_check_queue_pop(client, queue, max, timeout))) return rc;
    deadline = rl_now_ms() + timeout;
    if ((rc = pop_once(client, queue, max, out, &next_in)) || out->count || timeout == 0) return rc;
    if (!(channel = rl_wake_channel(client, queue, "delay_queue", NULL))) return rl_fail(RL_ERR_NOMEM, "out of memory");
    rc = subscribe(client, channel, &sub);
    free(channel);
    if (rc == RL_ERR_CONNECTION || rc == RL_ERR_TIMEOUT || rc == RL_ERR_REDIS) rc = RL_OK; /* poll instead */
    while (rc == RL_OK) {
        /* subscribed first, so a push between this pop and the wait wakes us */
        if ((rc = pop_once(client, queue, max, out, &next_in)) || out->count) break;
        int64_t left = deadline - rl_now_ms();
        if (left <= 0) break;
        if (next_in >= 0 && next_in < left) left = next_in;
        if (!sub && left > 1000) left = 1000; /* polling: check again soon */
        rc = nap(client, &sub, left, wait);
    }
    rl_conn_close(sub);
    return rc;
}

int rl_queue_size(rl_client *client, const char *queue, int64_t *size)
{
    RL_IN_FLIGHT(client);
    rl_cmd cmd;
    redisReply *r;
    int rc = rl_build_queue_call(&cmd, client, queue, NULL, 0);
    if (!rc && !size) rc = rl_fail(RL_ERR_INVALID, "size must not be NULL");
    if (!rc) rc = rl_run(client, &cmd, 1, &r);
    rl_cmd_free(&cmd);
    if (rc) return rc;
    rc = rl_decode_integer(r, "ZCARD", size);
    rl_reply_free(r);
    return rc;
}

int rl_queue_remove(rl_client *client, const char *queue, const char *message, size_t message_len, int *removed)
{
    RL_IN_FLIGHT(client);
    rl_cmd cmd;
    redisReply *r;
    int64_t v = 0;
    int rc;
    /* no message is an empty one here (message NULL would count the queue) */
    if (!(rc = rl_build_queue_call(&cmd, client, queue, message ? message : "", message ? message_len : 0)))
        rc = rl_run(client, &cmd, 1, &r);
    rl_cmd_free(&cmd);
    if (rc) return rc;
    rc = rl_decode_integer(r, "ZREM", &v);
    if (!rc && removed) *removed = v == 1;
    rl_reply_free(r);
    return rc;
}
