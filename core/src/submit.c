/* Submitting asynchronous requests (rl_submit_*, rl_cancel): checked, built
 * and handed to the I/O thread (threads.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "async.h"

static int check_target(const rl_client *c, const rl_target *target)
{
    if (!c || !target) return rl_fail(RL_ERR_INVALID, "client and target must not be NULL");
    if ((target->fn == NULL) == (target->queue == NULL))
        return rl_fail(RL_ERR_INVALID, "a target is a callback or a completion queue (exactly one)");
    return RL_OK;
}

static rl_areq *new_request(rl_req_kind kind, uint64_t tag, const rl_target *target)
{
    rl_areq *r = rl_async_req_new(kind);
    if (!r) return NULL;
    r->tag = tag;
    r->target = *target;
    return r;
}

/* Hands a built request to the I/O thread (started on first use). */
static int queue_request(rl_client *c, rl_areq *r, int build_rc)
{
    int rc = build_rc;
    if (!rc && r->cmd.failed) rc = rl_fail(RL_ERR_NOMEM, "out of memory building a command");
    if (!rc && r->target.queue && (rc = rl_completions_reserve(r->target.queue)) == RL_OK) r->reserved = 1;
    if (rc) {
        rl_async_req_free(r);
        return rc;
    }
    int reserved = r->reserved;
    rl_completions *queue = r->target.queue;
    if ((rc = rl_async_send(c, r)) && reserved) rl_completions_unreserve(queue);
    return rc;
}

int rl_submit(rl_client *c, const rl_request *request, uint64_t tag, const rl_target *target)
{
    RL_IN_FLIGHT(c);
    rl_areq *r;
    int rc;
    rl_clear_error();
    if ((rc = check_target(c, target))) return rc;
    if (!request) return rl_fail(RL_ERR_INVALID, "request must not be NULL");
    rl_request resolved;
    /* a stored spec not cached yet is read here, on the caller's thread (at
     * most once per config_refresh_ms and name) */
    if (request->stored_spec && (rc = rl_resolve_stored(c, request, &resolved))) {
        /* its stored spec cannot be read: the policy decides, as in rl_execute */
        if (!rl_unreachable(rc) || c->options.on_error == RL_ON_ERROR_RAISE) return rc;
        if (!(r = new_request(REQ_DECISION, tag, target))) return rl_fail(RL_ERR_NOMEM, "out of memory");
        r->permits = request->permits;
        r->failed = rc;
        snprintf(r->failure, sizeof r->failure, "%s", rl_errmsg());
        rl_stats_begin(c, request->name, &r->stats);
        return queue_request(c, r, RL_OK);
    }
    if (request->stored_spec) request = &resolved;
    if ((rc = rl_validate_request(request))) return rc;
    if (rl_lease_applies(c, request) && (rc = rl_lease_submit(c, request, tag, target)) != RL_LEASE_NOT_TAKEN)
        return rc;
    /* a refund ends this client's leases on the entity (their rest given back first) */
    if (request->op == RL_OP_REFUND) rl_leases_end(c, request->name, request->id, RL_LEASES_GIVE_BACK);
    if (!(r = new_request(REQ_DECISION, tag, target))) return rl_fail(RL_ERR_NOMEM, "out of memory");
    r->capacity = rl_spec_capacity(&request->spec);
    r->permits = request->permits;
    rl_stats_begin(c, request->name, &r->stats);
    rl_build_decision(&r->cmd, c, request);
    return queue_request(c, r, RL_OK);
}

int rl_decide_from_lease(rl_client *c, const rl_request *request, rl_result *out, int *decided)
{
    RL_IN_FLIGHT(c);
    int rc;
    rl_clear_error();
    if (!decided) return rl_fail(RL_ERR_INVALID, "decided must not be NULL");
    *decided = 0;
    if (!c || !request || !out) return rl_fail(RL_ERR_INVALID, "client, request and out must not be NULL");
    /* a stored spec may need reading from Redis: rl_submit does that */
    if (request->stored_spec) return RL_OK;
    if ((rc = rl_validate_request(request))) return rc;
    if (rl_lease_applies(c, request)) *decided = rl_lease_try(c, request, out);
    return RL_OK;
}

/* A request that may wait: its first try goes out now, the rest from the I/O thread. */
static rl_areq *new_wait(rl_client *c, rl_req_kind kind, const char *what, const char *name, int64_t timeout, uint64_t tag,
                      const rl_target *target)
{
    rl_areq *r = new_request(kind, tag, target);
    if (!r) return NULL;
    if (!(r->wait = calloc(1, sizeof *r->wait)) || !(r->wait->name = strdup(name)) ||
        (kind == REQ_ACQUIRE && rl_new_permit_id(r->permit_id)) ||
        !(r->wait->channel = rl_wake_channel(c, name, what, kind == REQ_ACQUIRE ? r->permit_id : NULL))) {
        rl_async_req_free(r);
        return NULL;
    }
    r->wait->kind = what;
    r->wait->until_ms = rl_now_ms() + timeout;
    return r;
}

static int submit_acquire(rl_client *c, const char *kind, const char *name, int64_t max, int64_t lease,
                          int64_t timeout, uint64_t tag, const rl_target *target)
{
    rl_areq *r;
    int rc;
    rl_clear_error();
    if ((rc = check_target(c, target)) || (rc = rl_check_sem_acquire(c, name, max, lease)) ||
        (rc = rl_check_range("timeout_ms", timeout, 0, RL_MAX_WAIT_MS)))
        return rc;
    if (!(r = new_wait(c, REQ_ACQUIRE, kind, name, timeout, tag, target)))
        return rl_fail(RL_ERR_NOMEM, "out of memory");
    r->wait->max = max;
    r->wait->lease = lease;
    return queue_request(c, r, rl_build_sem_call(&r->cmd, c, kind, name, "acquire", r->permit_id, max, lease, 0));
}

static int submit_flag(rl_client *c, const char *kind, const char *name, const char *op, const char *id,
                       int64_t lease, uint64_t tag, const rl_target *target)
{
    rl_areq *r;
    int rc;
    rl_clear_error();
    /* a refresh needs a lease; a release passes none */
    if ((rc = check_target(c, target)) || (rc = rl_check_permit_call(c, name, id)) ||
        (!strcmp(op, "refresh") && (rc = rl_check_range("lease_ms", lease, 1, RL_MAX_WAIT_MS))))
        return rc;
    if (!(r = new_request(REQ_DONE_FLAG, tag, target))) return rl_fail(RL_ERR_NOMEM, "out of memory");
    return queue_request(c, r, rl_build_sem_call(&r->cmd, c, kind, name, op, id, 1, lease, 0));
}

int rl_submit_semaphore_acquire(rl_client *c, const char *name, int64_t permits_max, int64_t lease_ms,
                                int64_t timeout_ms, uint64_t tag, const rl_target *target)
{
    RL_IN_FLIGHT(c);
    return submit_acquire(c, "semaphore", name, permits_max, lease_ms, timeout_ms, tag, target);
}

int rl_submit_semaphore_release(rl_client *c, const char *name, const char *permit_id, uint64_t tag,
                                const rl_target *target)
{
    RL_IN_FLIGHT(c);
    return submit_flag(c, "semaphore", name, "release", permit_id, 0, tag, target);
}

int rl_submit_semaphore_refresh(rl_client *c, const char *name, const char *permit_id, int64_t lease_ms,
                                uint64_t tag, const rl_target *target)
{
    RL_IN_FLIGHT(c);
    return submit_flag(c, "semaphore", name, "refresh", permit_id, lease_ms, tag, target);
}

int rl_submit_lock_acquire(rl_client *c, const char *name, int64_t lease_ms, int64_t timeout_ms, uint64_t tag,
                           const rl_target *target)
{
    RL_IN_FLIGHT(c);
    return submit_acquire(c, "lock", name, 1, lease_ms, timeout_ms, tag, target);
}

int rl_submit_lock_release(rl_client *c, const char *name, const char *token, uint64_t tag, const rl_target *target)
{
    RL_IN_FLIGHT(c);
    return submit_flag(c, "lock", name, "release", token, 0, tag, target);
}

int rl_submit_lock_extend(rl_client *c, const char *name, const char *token, int64_t lease_ms, uint64_t tag,
                          const rl_target *target)
{
    RL_IN_FLIGHT(c);
    return submit_flag(c, "lock", name, "refresh", token, lease_ms, tag, target);
}

int rl_submit_queue_push(rl_client *c, const char *queue, const char *message, size_t message_len, int64_t delay_ms,
                         uint64_t tag, const rl_target *target)
{
    RL_IN_FLIGHT(c);
    rl_areq *r;
    int rc;
    rl_clear_error();
    if ((rc = check_target(c, target)) || (rc = rl_check_queue_push(c, queue, message, message_len, delay_ms)))
        return rc;
    if (!(r = new_request(REQ_PUSH, tag, target))) return rl_fail(RL_ERR_NOMEM, "out of memory");
    return queue_request(c, r, rl_build_queue_push(&r->cmd, c, queue, message, message_len, delay_ms));
}

int rl_submit_queue_pop(rl_client *c, const char *queue, size_t max, int64_t timeout_ms, uint64_t tag,
                        const rl_target *target)
{
    RL_IN_FLIGHT(c);
    rl_areq *r;
    int rc;
    rl_clear_error();
    if ((rc = check_target(c, target)) || (rc = rl_check_queue_pop(c, queue, max, timeout_ms))) return rc;
    if (!(r = new_wait(c, REQ_POP, "delay_queue", queue, timeout_ms, tag, target)))
        return rl_fail(RL_ERR_NOMEM, "out of memory");
    return queue_request(c, r, rl_build_queue_pop(&r->cmd, c, queue, max));
}

int rl_cancel(rl_client *c, uint64_t tag)
{
    RL_IN_FLIGHT_ELSE(c, return RL_OK); /* shut down: every wait completes with RL_ERR_CLOSED */
    rl_clear_error();
    if (!c) return rl_fail(RL_ERR_INVALID, "client must not be NULL");
    rl_async *a = __atomic_load_n(&c->async, __ATOMIC_ACQUIRE);
    if (!a) return RL_OK; /* nothing submitted here */
    pthread_mutex_lock(&a->mutex);
    if (a->closing) {
        pthread_mutex_unlock(&a->mutex);
        return RL_OK; /* every wait completes with RL_ERR_CLOSED */
    }
    if (a->cancel_count == a->cancel_cap) {
        size_t cap = a->cancel_cap ? a->cancel_cap * 2 : 16;
        uint64_t *grown = realloc(a->cancels, cap * sizeof *grown);
        if (!grown) {
            pthread_mutex_unlock(&a->mutex);
            return rl_fail(RL_ERR_NOMEM, "out of memory");
        }
        a->cancels = grown;
        a->cancel_cap = cap;
    }
    a->cancels[a->cancel_count++] = tag;
    int sleeping = a->sleeping;
    a->sleeping = 0;
    pthread_mutex_unlock(&a->mutex);
    if (sleeping) rl_async_wake(a);
    return RL_OK;
}

/* One round trip whose completion is a number (value); the caller builds
 * its command into r->cmd. */
static rl_areq *count_request(rl_client *c, rl_req_kind kind, uint64_t tag, const rl_target *target, int *rc)
{
    rl_areq *r = NULL;
    rl_clear_error();
    if (!(*rc = check_target(c, target)) && !(r = new_request(kind, tag, target)))
        *rc = rl_fail(RL_ERR_NOMEM, "out of memory");
    return r;
}

int rl_submit_reset(rl_client *c, const char *name, const char *id, const rl_spec *spec, uint64_t tag,
                    const rl_target *target)
{
    RL_IN_FLIGHT(c);
    int rc;
    rl_areq *r = count_request(c, REQ_COUNT, tag, target, &rc);
    if (!r) return rc;
    if ((rc = rl_build_reset(&r->cmd, c, name, id, spec)) == RL_OK) rc = rl_lease_reset_begin(c, r, name, id);
    return queue_request(c, r, rc);
}

int rl_submit_semaphore_info(rl_client *c, const char *name, int64_t permits_max, uint64_t tag,
                             const rl_target *target)
{
    RL_IN_FLIGHT(c);
    int rc;
    rl_areq *r = count_request(c, REQ_INFO, tag, target, &rc);
    if (!r) return rc;
    if ((rc = rl_check_semaphore_info(c, name, permits_max))) {
        rl_async_req_free(r);
        return rc;
    }
    r->permits = permits_max;
    return queue_request(c, r, rl_build_sem_call(&r->cmd, c, "semaphore", name, "info", NULL, 1, 1, 0));
}

int rl_submit_queue_size(rl_client *c, const char *queue, uint64_t tag, const rl_target *target)
{
    RL_IN_FLIGHT(c);
    int rc;
    rl_areq *r = count_request(c, REQ_COUNT, tag, target, &rc);
    return r ? queue_request(c, r, rl_build_queue_call(&r->cmd, c, queue, NULL, 0)) : rc;
}

int rl_submit_queue_remove(rl_client *c, const char *queue, const char *message, size_t message_len, uint64_t tag,
                           const rl_target *target)
{
    RL_IN_FLIGHT(c);
    int rc;
    rl_areq *r = count_request(c, REQ_COUNT, tag, target, &rc);
    if (r && !message) {
        rl_async_req_free(r);
        return rl_fail(RL_ERR_INVALID, "message must not be empty");
    }
    return r ? queue_request(c, r, rl_build_queue_call(&r->cmd, c, queue, message, message_len)) : rc;
}
