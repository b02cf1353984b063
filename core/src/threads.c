/* The asynchronous engine's threads (async.c's I/O thread, dialer.c's
 * dialer): started by the first request handed to them (rl_async_send),
 * stopped and freed when the client closes, left behind in a forked child. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "async.h"

static int async_start(rl_client *c)
{
    rl_async *a = calloc(1, sizeof *a);
    if (!a) return rl_fail(RL_ERR_NOMEM, "out of memory");
    a->client = c;
    pthread_mutex_init(&a->mutex, NULL);
    pthread_cond_init(&a->dial_wanted, NULL);
    a->wake_fds[0] = a->wake_fds[1] = RL_NO_FD;
    a->polls = malloc(sizeof *a->polls); /* the wake pipe's; connections add theirs */
    int dialer_started = 0;
    if (!a->polls || rl_pipe(a->wake_fds) < 0 ||
        !(dialer_started = pthread_create(&a->dialer, NULL, rl_async_dialer, a) == 0) ||
        pthread_create(&a->thread, NULL, rl_async_io_thread, a) != 0) {
        int err = errno;
        if (dialer_started) {
            pthread_mutex_lock(&a->mutex);
            a->closing = 1;
            pthread_cond_broadcast(&a->dial_wanted);
            pthread_mutex_unlock(&a->mutex);
            pthread_join(a->dialer, NULL);
        }
        rl_async_close_wake(a);
        free(a->polls);
        pthread_cond_destroy(&a->dial_wanted);
        pthread_mutex_destroy(&a->mutex);
        free(a);
        return rl_fail(RL_ERR_NOMEM, "cannot start the I/O threads: %s", strerror(err));
    }
    __atomic_store_n(&c->async, a, __ATOMIC_RELEASE);
    return RL_OK;
}

void rl_async_close_wake(rl_async *a)
{
    for (int i = 0; i < 2; i++) {
        if (a->wake_fds[i] != RL_NO_FD) rl_fd_close(a->wake_fds[i]);
        a->wake_fds[i] = RL_NO_FD;
    }
}

static void free_conns(rl_async *a)
{
    for (int i = 0; i < a->nconns; i++) {
        rl_aconn *ac = a->conns[i];
        rl_conn_close(ac->conn);
        for (rl_achannel *ch = ac->channels, *next; ch; ch = next) {
            next = ch->next;
            free(ch->name);
            free(ch);
        }
        free(ac);
    }
    free(a->conns);
    free(a->cancels);
    free(a->polls);
}

/* In a forked child (fork.c): the parent's I/O threads did not come along
 * and may have been changing anything of theirs. Close our copies of the
 * descriptors that never change; leave the rest unread (kept reachable, so a
 * leak checker reports real leaks only). */
void rl_async_abandon(rl_client *c)
{
    rl_async *a = c->async;
    if (!a) return;
    rl_async_close_wake(a);
    rl_fork_leave(a);
    c->async = NULL;
}

/* Called on the I/O thread (a completion callback shut the client down),
 * the thread stops once the callback returns: rl_async_free joins it. */
void rl_async_stop(rl_client *c)
{
    rl_async *a = __atomic_load_n(&c->async, __ATOMIC_ACQUIRE);
    if (!a || a->joined) return;
    pthread_mutex_lock(&a->mutex);
    a->closing = 1;
    rl_async_wake(a); /* under the mutex: the thread closes its pipe under it once it sees closing */
    pthread_mutex_unlock(&a->mutex);
    if (pthread_equal(pthread_self(), a->thread)) return;
    pthread_join(a->thread, NULL);
    a->joined = 1;
}

void rl_async_free(rl_client *c)
{
    rl_async *a = c->async;
    if (!a) return;
    rl_async_stop(c);
    free_conns(a);
    rl_async_close_wake(a);
    pthread_cond_destroy(&a->dial_wanted);
    pthread_mutex_destroy(&a->mutex);
    free(a);
    __atomic_store_n(&c->async, NULL, __ATOMIC_RELEASE);
}

int rl_async_send(rl_client *c, rl_areq *r)
{
    int rc;
    /* a decision's metrics read the clock already (the same clock, in us) */
    if (r) r->deadline_ms = (r->stats.entry ? r->stats.start_us / 1000 : rl_now_ms()) + c->options.command_timeout_ms;

    /* the common case takes no lock: the threads run */
    rl_async *a = __atomic_load_n(&c->async, __ATOMIC_ACQUIRE);
    if (!a) {
        pthread_mutex_lock(&c->topology);
        if (!c->async && (rc = async_start(c))) {
            pthread_mutex_unlock(&c->topology);
            if (r) rl_async_req_free(r);
            return rc;
        }
        a = c->async;
        pthread_mutex_unlock(&c->topology);
    }

    pthread_mutex_lock(&a->mutex);
    if (a->closing) {
        pthread_mutex_unlock(&a->mutex);
        if (r) rl_async_req_free(r);
        return rl_fail(RL_ERR_CLOSED, "the client is closing");
    }
    if (r) list_push(&a->submitted, r);
    if (r && pthread_equal(pthread_self(), a->thread)) a->io_submitted = 1;
    int sleeping = a->sleeping;
    a->sleeping = 0; /* one wake-up is enough for everyone until it runs */
    pthread_mutex_unlock(&a->mutex);
    if (sleeping) rl_async_wake(a);
    return RL_OK;
}

/* r NULL: only the start and the wake-up */
void rl_async_poke(rl_client *c)
{
    rl_async_send(c, NULL);
}
