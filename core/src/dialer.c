/* The dialer thread: what may block for up to a timeout (connecting a
 * server, asking the sentinels or the cluster where servers are) is done
 * here, so the I/O thread (async.c) goes on serving the servers it is
 * connected to; a finished dial wakes it. */
#include <stdio.h>
#include <stdlib.h>

#include "async.h"

void rl_async_dial(rl_async *a, rl_aconn *ac)
{
    rl_dial *d = calloc(1, sizeof *d);
    if (!d) return; /* its requests time out */
    d->ac = ac;
    pthread_mutex_lock(&a->mutex);
    d->next = a->dial_jobs;
    a->dial_jobs = d;
    pthread_cond_signal(&a->dial_wanted);
    pthread_mutex_unlock(&a->mutex);
}

void rl_async_want_discovery(rl_async *a)
{
    if (a->discovering || rl_now_ms() < a->discover_after_ms) return;
    a->discovering = 1;
    rl_async_dial(a, NULL);
}

void rl_async_free_dials(rl_async *a)
{
    for (rl_dial *d = a->dial_done, *next; d; d = next) {
        next = d->next;
        rl_conn_close(d->conn);
        free(d);
    }
    for (rl_dial *d = a->dial_jobs, *next; d; d = next) {
        next = d->next;
        free(d);
    }
    a->dial_done = a->dial_jobs = NULL;
}

void *rl_async_dialer(void *arg)
{
    rl_async *a = arg;
    rl_client *c = a->client;
    pthread_mutex_lock(&a->mutex);
    for (;;) {
        while (!a->dial_jobs && !a->closing) pthread_cond_wait(&a->dial_wanted, &a->mutex);
        if (a->closing) break;
        rl_dial *d = a->dial_jobs;
        a->dial_jobs = d->next;
        pthread_mutex_unlock(&a->mutex);
        if (d->ac) {
            rl_node *node = d->ac->node;
            d->status = rl_conn_open_data(c, node, &d->conn);
            pthread_mutex_lock(&node->mutex);
            rl_backoff_record(&node->backoff, d->status, c->options.reconnect_max_ms);
            pthread_mutex_unlock(&node->mutex);
        } else {
            rl_node *any;
            d->status = rl_route(c, -1, &any);
        }
        if (d->status) snprintf(d->error, sizeof d->error, "%s", rl_errmsg());
        pthread_mutex_lock(&a->mutex);
        d->next = a->dial_done;
        a->dial_done = d;
        a->sleeping = 0;
        rl_async_wake(a);
    }
    pthread_mutex_unlock(&a->mutex);
    return NULL;
}
