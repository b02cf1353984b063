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
    rl_at_fork(before_fork, in_parent, in_child);
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
