/* Closing a client while other threads call it, in two steps as shutdown(2)
 * and close(2), or SQLite's sqlite3_close_v2 and its zombie handle.
 * rl_client_shutdown refuses new calls; when the last call in flight returns
 * (at once when none is) that thread gives the leases back, stops the I/O
 * thread and closes the pooled connections. The memory stays until
 * rl_client_close, which waits for that work and for every call, then frees.
 * Why two steps: a binding cannot make "read the pointer, then enter the
 * core" atomic against another thread's close without a guard of its own,
 * unless the memory outlives the close. With them, a binding's close() shuts
 * down and its object's deallocation (no thread can hold the pointer any
 * more) closes. The calls in flight are counted in calls.c. */
#include "internal.h"

/* No call in flight after a shutdown (rl_client_open sets it as the
 * client's closing_work). Completion callbacks may run on this
 * thread meanwhile (the I/O thread's, when called from one: it stops after
 * the callback returns, rl_async_free joins it). */
void rl_closing_work(rl_client *c)
{
    rl_leases_end(c, NULL, NULL, RL_LEASES_GIVE_BACK_NOW); /* bounded by the command timeout */
    rl_async_stop(c);
    pthread_mutex_lock(&c->topology);
    for (int i = 0; i < c->node_count; i++) {
        rl_node *node = c->nodes[i];
        pthread_mutex_lock(&node->mutex);
        for (int k = 0; k < node->idle_count; k++) rl_conn_close(node->idle[k]);
        node->open_count -= node->idle_count;
        node->idle_count = 0;
        pthread_mutex_unlock(&node->mutex);
    }
    pthread_mutex_unlock(&c->topology);
    __atomic_store_n(&c->shut_down, 1, __ATOMIC_RELEASE);
}

int rl_client_shutdown(rl_client *c, int stop_waits)
{
    if (!c) return 0;
    if (!rl_calls_refuse(c, stop_waits)) return __atomic_load_n(&c->shut_down, __ATOMIC_ACQUIRE);
    rl_closing_work(c);
    return 1;
}

void rl_client_close(rl_client *c)
{
    if (!c) return;
    rl_client_shutdown(c, 1);
    rl_calls_wait_out(c); /* the waits stopped: each call returns within the command timeout */
    rl_fork_untrack(&c->fork_hooks);
    rl_client_free(c);
}
