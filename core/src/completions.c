/* Completion queues: where the I/O thread leaves finished requests for an
 * event loop, which watches the read end of a pipe (see rl_completions in
 * ratelimit.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct rl_completions {
    rl_fork_hooks fork_hooks; /* first: the hooks' self is the queue */
    pthread_mutex_t mutex;
    rl_completion *items;
    size_t head, count, cap;
    size_t reserved; /* slots held for requests submitted and not completed yet */
    rl_fd fds[2];  /* a pipe's ends (rl_pipe): read, write */
    int signalled;    /* the pipe holds a byte nobody took yet */
};

static void queue_lock(rl_fork_hooks *h)
{
    pthread_mutex_lock(&((rl_completions *)h)->mutex);
}

static void queue_unlock(rl_fork_hooks *h)
{
    pthread_mutex_unlock(&((rl_completions *)h)->mutex);
}

/* In a forked child: the pipe is shared with the parent, whose takes would
 * swallow the child's wake-ups and the child's the parent's. A new one takes
 * the same numbers, so an event loop's registration stays valid.
 * What the queue held at the fork stays; what the parent's requests still
 * in flight complete goes to the parent only. */
static void queue_start_afresh(rl_fork_hooks *h)
{
    rl_completions *q = (rl_completions *)h;
    if (rl_pipe_renew(q->fds) == 0) q->signalled = q->count > 0 && rl_pipe_signal(q->fds[1]);
    queue_unlock(h);
}

int rl_completions_open(rl_completions **out)
{
    rl_completions *q;
    rl_clear_error();
    if (!out) return rl_fail(RL_ERR_INVALID, "out must not be NULL");
    if (!(q = calloc(1, sizeof *q))) return rl_fail(RL_ERR_NOMEM, "out of memory");
    if (rl_pipe(q->fds) < 0) {
        int err = errno;
        free(q);
        return rl_fail(RL_ERR_NOMEM, "pipe: %s", strerror(err));
    }
    pthread_mutex_init(&q->mutex, NULL);
    q->fork_hooks.lock = queue_lock;
    q->fork_hooks.unlock = queue_unlock;
    q->fork_hooks.start_afresh = queue_start_afresh;
    rl_fork_track(&q->fork_hooks);
    *out = q;
    return RL_OK;
}

int rl_completions_fd(const rl_completions *q)
{
    return q ? (int)q->fds[0] : -1; /* Windows: a SOCKET, whose values fit an int */
}

/* Room for every completion is made when its request is submitted, where
 * running out of memory fails that request (RL_ERR_NOMEM); posting it then
 * never allocates, so a completion is never lost. */
int rl_completions_reserve(rl_completions *q)
{
    int rc = RL_OK;
    pthread_mutex_lock(&q->mutex);
    if (q->count + q->reserved == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 64;
        rl_completion *grown = malloc(cap * sizeof *grown);
        if (grown) {
            for (size_t i = 0; i < q->count; i++) grown[i] = q->items[(q->head + i) % q->cap];
            free(q->items);
            q->items = grown;
            q->head = 0;
            q->cap = cap;
        }
    }
    if (q->count + q->reserved < q->cap) q->reserved++;
    else rc = rl_fail(RL_ERR_NOMEM, "out of memory (completion queue)");
    pthread_mutex_unlock(&q->mutex);
    return rc;
}

void rl_completions_unreserve(rl_completions *q)
{
    pthread_mutex_lock(&q->mutex);
    q->reserved--;
    pthread_mutex_unlock(&q->mutex);
}

void rl_completions_push(rl_completions *q, const rl_completion *c)
{
    pthread_mutex_lock(&q->mutex);
    q->reserved--; /* its room, made by rl_completions_reserve */
    q->items[(q->head + q->count++) % q->cap] = *c;
    if (!q->signalled) q->signalled = rl_pipe_signal(q->fds[1]);
    pthread_mutex_unlock(&q->mutex);
}

size_t rl_completions_take(rl_completions *q, rl_completion *out, size_t max)
{
    size_t n = 0;
    if (!q || !out) return 0;
    pthread_mutex_lock(&q->mutex);
    while (n < max && q->count > 0) {
        out[n++] = q->items[q->head];
        q->head = (q->head + 1) % q->cap;
        q->count--;
    }
    if (q->count == 0 && q->signalled) {
        char byte;
        if (rl_pipe_read(q->fds[0], &byte, 1) == 1 || errno == EAGAIN) q->signalled = 0;
    }
    pthread_mutex_unlock(&q->mutex);
    return n;
}

void rl_completions_close(rl_completions *q)
{
    if (!q) return;
    rl_fork_untrack(&q->fork_hooks);
    rl_fd_close(q->fds[0]);
    rl_fd_close(q->fds[1]);
    free(q->items);
    pthread_mutex_destroy(&q->mutex);
    free(q);
}
