/* An asynchronous request's life off the wire: made, completed (decoded,
 * the on_error policy, metrics, its target told) and freed, by the I/O
 * thread (async.c). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "async.h"

rl_areq *rl_async_req_new(rl_req_kind kind)
{
    rl_areq *r = malloc(sizeof *r);
    if (!r) return NULL;
    memset(r, 0, offsetof(rl_areq, cmd));
    rl_cmd_init(&r->cmd);
    r->kind = kind;
    return r;
}

void rl_async_req_free(rl_areq *r)
{
    if (r->wait) {
        free(r->wait->name);
        free(r->wait->id);
        free(r->wait->channel);
        rl_messages_free(&r->wait->taken);
        free(r->wait);
    }
    free(r->reset_entity);
    rl_cmd_free(&r->cmd);
    free(r);
}

void rl_async_complete(rl_async *a, rl_areq *r, int status, const redisReply *reply)
{
    rl_completion c;
    if (r->silent) return;
    if (r->kind == REQ_READ) {
        r->read_done(a, r->read_ctx, status, status == RL_OK ? reply : NULL);
        return;
    }
    if (r->wait) rl_wait_ended(a, r, status);
    if (r->lease) r->lease_ended(a, r, status, NULL); /* its LEASE got no reply */
    memset(&c, 0, sizeof c);
    c.tag = r->tag;
    c.status = status;
    if (status == RL_OK) {
        int granted = 0;
        int64_t first_end;
        switch (r->kind) {
        case REQ_ACQUIRE:
            c.status = rl_decode_sem_acquire(reply, &granted, &c.fencing_token, &first_end);
            c.acquired = granted;
            if (granted) memcpy(c.permit_id, r->permit_id, sizeof c.permit_id);
            else c.fencing_token = 0;
            break;
        case REQ_DONE_FLAG:
            c.status = rl_reply_int(reply, 0, &c.value);
            break;
        case REQ_PUSH:
            c.status = rl_decode_integer(reply, "delay_queue push", &c.value);
            break;
        case REQ_COUNT:
            c.status = rl_decode_integer(reply, "count", &c.value);
            break;
        case REQ_INFO: /* permits: the permits_max to count available permits out of, 0: holders */
            c.status = rl_reply_int(reply, 0, &c.value);
            if (!c.status && r->permits) c.value = r->permits > c.value ? r->permits - c.value : 0;
            break;
        case REQ_POP:
            break;
        default:
            if (r->decided) {
                c.status = r->decided_status;
                c.result = r->result;
            } else {
                c.status = rl_decode_result(reply, &c.result);
            }
        }
    }
    if (r->kind == REQ_POP) { /* taken from Redis: handed over even with an error */
        c.messages = r->wait->taken;
        memset(&r->wait->taken, 0, sizeof r->wait->taken);
    }
    if (c.status != RL_OK && !c.error[0]) snprintf(c.error, sizeof c.error, "%s", rl_errmsg());
    /* the on_error policy decides rate limits only, as in the blocking calls */
    if (rl_unreachable(c.status) && r->kind == REQ_DECISION &&
        a->client->options.on_error != RL_ON_ERROR_RAISE) {
        rl_fallback_result(a->client, r->capacity, r->permits, &c.result);
        c.status = RL_OK; /* the message still says what went wrong */
    }
    rl_stats_end(&r->stats, c.status, &c.result);
    if (r->target.queue) rl_completions_push(r->target.queue, &c);
    else r->target.fn(r->target.ctx, &c);
}

/* A decision is done: completed unless it already was (timed out). */
void rl_async_finish(rl_async *a, rl_areq *r, int status, const redisReply *reply)
{
    if (r->reset_entity) r->reset_done(a->client, r);
    if (r->kind <= REQ_READ && !r->abandoned) rl_async_complete(a, r, status, reply);
    rl_async_req_free(r);
}

void rl_async_fail_list(rl_async *a, rl_areq_list *l, int status, const char *message)
{
    rl_areq *r;
    while ((r = list_pop(l))) {
        rl_fail(status, "%s", message);
        rl_async_finish(a, r, status, NULL);
    }
}
