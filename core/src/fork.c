/* fork() safety. Every client and completion queue is tracked; around a
 * fork, pthread_atfork handlers hold all their locks (POSIX's own recipe),
 * so the child copies state no other thread was halfway through changing,
 * then each object starts afresh in the child: its own locks, no parent
 * connection, no parent thread. The parent's I/O thread did not come along
 * and its private state may be mid-change: the child leaks it unread. */
#include <pthread.h>
#include <stdlib.h>

#include "internal.h"

static pthread_mutex_t tracked_lock = PTHREAD_MUTEX_INITIALIZER;
static rl_fork_hooks *tracked;
static pthread_once_t handlers_once = PTHREAD_ONCE_INIT;

/* tracked_lock, then each object's own locks: no thread holds two objects'
 * locks at once, so any order of objects is deadlock-free. */
static void before_fork(void)
{
    pthread_mutex_lock(&tracked_lock);
    for (rl_fork_hooks *h = tracked; h; h = h->next) h->lock(h);
}

static void in_parent(void)
{
    for (rl_fork_hooks *h = tracked; h; h = h->next) h->unlock(h);
    pthread_mutex_unlock(&tracked_lock);
}

static void in_child(void)
{
    for (rl_fork_hooks *h = tracked; h; h = h->next) h->start_afresh(h);
    pthread_mutex_unlock(&tracked_lock);
}

/* What a child leaves unfreed stays reachable from here, so leak checkers
 * (valgrind, LeakSanitizer) do not report it as lost. */
static struct left_behind {
    struct left_behind *next;
    void *what;
} *left_behind;

void rl_fork_leave(void *what)
{
    struct left_behind *l = malloc(sizeof *l);
    if (!l) return;
    l->what = what;
    l->next = left_behind;
    left_behind = l;
}

static void install_handlers(void)
{
    pthread_atfork(before_fork, in_parent, in_child);
}

void rl_fork_track(rl_fork_hooks *h)
{
    pthread_once(&handlers_once, install_handlers);
    pthread_mutex_lock(&tracked_lock);
    h->prev = NULL;
    h->next = tracked;
    if (tracked) tracked->prev = h;
    tracked = h;
    pthread_mutex_unlock(&tracked_lock);
}

void rl_fork_untrack(rl_fork_hooks *h)
{
    pthread_mutex_lock(&tracked_lock);
    if (h->prev) h->prev->next = h->next;
    else tracked = h->next;
    if (h->next) h->next->prev = h->prev;
    pthread_mutex_unlock(&tracked_lock);
}

/* ---- a client ---------------------------------------------------------------- */

static void client_lock(rl_fork_hooks *h)
{
    rl_client *c = (rl_client *)h;
    pthread_mutex_lock(&c->combining.mutex);
    pthread_mutex_lock(&c->topology);
    for (int i = 0; i < c->node_count; i++) pthread_mutex_lock(&c->nodes[i]->mutex);
    rl_config_cache_lock(c->configs);
}

static void client_unlock(rl_fork_hooks *h)
{
    rl_client *c = (rl_client *)h;
    rl_config_cache_unlock(c->configs);
    for (int i = 0; i < c->node_count; i++) pthread_mutex_unlock(&c->nodes[i]->mutex);
    pthread_mutex_unlock(&c->topology);
    pthread_mutex_unlock(&c->combining.mutex);
}

/* Pools start empty (the parent's connections are the parent's), the I/O
 * thread starts again on the first rl_submit, metrics count this process's
 * decisions; the routes and stored specs known stay; leases are the
 * parent's (dropped here, never given back by the child). Condition variables
 * start anew: the parent's waiters on them did not come along. */
static void client_start_afresh(rl_fork_hooks *h)
{
    rl_client *c = (rl_client *)h;
    client_unlock(h);
    pthread_cond_init(&c->discovered, NULL);
    c->discovery.probing = 0;
    for (int i = 0; i < c->node_count; i++) {
        rl_node *node = c->nodes[i];
        pthread_cond_init(&node->available, NULL);
        for (int k = 0; k < node->idle_count; k++) rl_conn_abandon(node->idle[k]);
        node->idle_count = 0;
        node->open_count = 0; /* the checked-out ones are in threads that are gone */
        node->backoff.probing = 0;
    }
    rl_combining_start_afresh(&c->combining); /* its callers are the parent's threads */
    rl_async_abandon(c);
    rl_calls_start_afresh(c);
    rl_leases_abandon(c);
    rl_stats_free(c->stats);
    c->stats = NULL;
}

void rl_fork_track_client(rl_client *c)
{
    c->fork_hooks.lock = client_lock;
    c->fork_hooks.unlock = client_unlock;
    c->fork_hooks.start_afresh = client_start_afresh;
    rl_fork_track(&c->fork_hooks);
}
