/* Client: opening and freeing, and its fork hooks (closing.c closes; the
 * blocking engine that runs its commands is run.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void rl_options_init(rl_options *options)
{
    rl_options defaults = RL_OPTIONS_INIT;
    *options = defaults;
}

const char *rl_client_prefix(const rl_client *client)
{
    return client->prefix;
}

const char *rl_client_id(const rl_client *client)
{
    return client->id;
}

/* ---- open / close ------------------------------------------------------------ */

void rl_client_free(rl_client *c)
{
    rl_async_free(c);
    for (int i = 0; i < c->node_count; i++) rl_node_free(c->nodes[i]);
    free(c->nodes);
    free(c->slots);
    rl_tls_free(c);
    rl_url_free(&c->url);
    rl_stats_free(c->stats);
    rl_config_cache_free(c->configs);
    rl_leases_free(c->leases);
    free(c->prefix);
    pthread_cond_destroy(&c->discovered);
    pthread_mutex_destroy(&c->topology);
    rl_combining_destroy(&c->combining);
    free(c);
}

/* An option set in code overrides the URL's. */
/* ---- around a fork (fork.c runs these hooks) ---------------------------------- */

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

static int override(char **field, const char *value)
{
    if (!value) return RL_OK;
    free(*field);
    *field = strdup(value);
    return *field ? RL_OK : rl_fail(RL_ERR_NOMEM, "out of memory");
}

/* Zero (or NULL) in any field means its default, as in libgit2's options:
 * `rl_options o = {0};` opens the same client as RL_OPTIONS_INIT. */
static rl_options with_defaults(const rl_options *o)
{
    rl_options d = RL_OPTIONS_INIT, r = *o;
    if (!r.connect_timeout_ms) r.connect_timeout_ms = d.connect_timeout_ms;
    if (!r.command_timeout_ms) r.command_timeout_ms = d.command_timeout_ms;
    if (!r.pool_size) r.pool_size = d.pool_size;
    if (!r.key_prefix) r.key_prefix = d.key_prefix;
    if (!r.reconnect_max_ms) r.reconnect_max_ms = d.reconnect_max_ms;
    if (!r.config_refresh_ms) r.config_refresh_ms = d.config_refresh_ms;
    if (!r.max_in_flight) r.max_in_flight = d.max_in_flight;
    if (!r.max_batch) r.max_batch = d.max_batch;
    /* on_error and tls_verify: their zero values are the defaults already */
    return r;
}

static int check_options(const rl_options *o)
{
    if (o->connect_timeout_ms <= 0 || o->command_timeout_ms <= 0)
        return rl_fail(RL_ERR_INVALID, "timeouts must be positive (got connect %d ms, command %d ms)",
                       o->connect_timeout_ms, o->command_timeout_ms);
    if (o->pool_size <= 0 || o->pool_size > 1024)
        return rl_fail(RL_ERR_INVALID, "pool_size must be in 1..1024 (got %d)", o->pool_size);
    if (o->on_error < RL_ON_ERROR_RAISE || o->on_error > RL_ON_ERROR_DENY)
        return rl_fail(RL_ERR_INVALID, "on_error must be RAISE, ALLOW or DENY");
    if (!o->key_prefix || !*o->key_prefix) return rl_fail(RL_ERR_INVALID, "key_prefix must not be empty");
    if (strlen(o->key_prefix) > 256) return rl_fail(RL_ERR_INVALID, "key_prefix is longer than 256 bytes");
    if (strpbrk(o->key_prefix, "{}"))
        return rl_fail(RL_ERR_INVALID, "key_prefix must not contain '{' or '}' (the hash tag is the entity's)");
    if (o->tls_verify < RL_TLS_VERIFY_DEFAULT || o->tls_verify > RL_TLS_VERIFY_NONE)
        return rl_fail(RL_ERR_INVALID, "tls_verify must be DEFAULT, REQUIRED or NONE");
    if (o->metrics_off < 0 || o->metrics_off > 1) return rl_fail(RL_ERR_INVALID, "metrics_off must be 0 or 1");
    if (o->reconnect_max_ms < 1 || o->reconnect_max_ms > 600000)
        return rl_check_range("reconnect_max_ms", o->reconnect_max_ms, 1, 600000);
    if (o->max_in_flight < 1 || o->max_in_flight > 1000000)
        return rl_check_range("max_in_flight", o->max_in_flight, 1, 1000000);
    if (o->max_batch < 1 || o->max_batch > RL_MAX_BATCH)
        return rl_check_range("max_batch", o->max_batch, 1, RL_MAX_BATCH);
    if (o->config_refresh_ms < 1 || o->config_refresh_ms > 3600000)
        return rl_fail(RL_ERR_INVALID, "config_refresh_ms must be in 1..3600000 (got %d)", o->config_refresh_ms);
    /* it becomes part of keys, after "%P": nothing that needs escaping */
    if (o->client_id && (!*o->client_id || strlen(o->client_id) > 64 ||
                         strspn(o->client_id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
                             strlen(o->client_id)))
        return rl_fail(RL_ERR_INVALID, "client_id must be 1..64 of A-Z a-z 0-9 . _ - (got '%.80s')", o->client_id);
    const char *files[3] = {o->tls_ca_file, o->tls_cert_file, o->tls_key_file};
    for (int i = 0; i < 3; i++)
        if (files[i] && !*files[i]) return rl_fail(RL_ERR_INVALID, "TLS file options must be NULL or a path, not empty");
    return RL_OK;
}

int rl_client_open(rl_client **out, const char *url, const rl_options *options)
{
    rl_options defaults = RL_OPTIONS_INIT;
    rl_client *c;
    int rc;

    rl_clear_error();
    if (!out) return rl_fail(RL_ERR_INVALID, "out must not be NULL");
    *out = NULL;
    if (options) defaults = with_defaults(options);
    options = &defaults;
    if ((rc = check_options(options))) return rc;

    c = calloc(1, sizeof *c);
    if (!c) return rl_fail(RL_ERR_NOMEM, "out of memory");
    c->closing_work = rl_closing_work;
    pthread_mutex_init(&c->topology, NULL);
    rl_combining_init(&c->combining);
    pthread_cond_init(&c->discovered, NULL);
    c->options = *options;
    c->prefix = strdup(options->key_prefix);
    c->options.key_prefix = c->prefix;
    c->configs = rl_config_cache_new();
    c->leases = rl_leases_new();
    c->leases_tick = rl_leases_tick;
    if (!c->prefix || !c->configs || !c->leases) {
        rl_client_free(c);
        return rl_fail(RL_ERR_NOMEM, "out of memory");
    }
    if (options->client_id) {
        snprintf(c->id, sizeof c->id, "%s", options->client_id);
    } else if ((rc = rl_new_permit_id(c->id))) {
        rl_client_free(c);
        return rc;
    }
    if ((rc = rl_url_parse(url, &c->url)) || (rc = override(&c->url.tls_ca_file, options->tls_ca_file)) ||
        (rc = override(&c->url.tls_cert_file, options->tls_cert_file)) ||
        (rc = override(&c->url.tls_key_file, options->tls_key_file))) {
        rl_client_free(c);
        return rc;
    }
    if (options->tls_verify != RL_TLS_VERIFY_DEFAULT) c->url.tls_verify = options->tls_verify;
    if (!c->url.tls && (c->url.tls_ca_file || c->url.tls_cert_file || c->url.tls_key_file ||
                        c->url.tls_verify != RL_TLS_VERIFY_DEFAULT)) {
        rl_client_free(c);
        return rl_fail(RL_ERR_INVALID, "TLS options need a rediss:// URL");
    }
    if ((rc = rl_tls_setup(c))) {
        rl_client_free(c);
        return rc;
    }
    if (c->url.mode == RL_MODE_STANDALONE) {
        c->master = c->url.unix_path ? rl_node_for(c, c->url.unix_path, 0)
                                     : rl_node_for(c, c->url.addrs[0].host, c->url.addrs[0].port);
        if (!c->master) {
            rl_client_free(c);
            return RL_ERR_NOMEM;
        }
    }
    /* raise: report a dead server, bad password or bad certificate now;
     * allow / deny: an application boots during an outage, but not with a
     * server certificate it refuses (a misconfiguration, not an outage) */
    rc = rl_topology_connect(c);
    if (rc && (options->on_error == RL_ON_ERROR_RAISE || !rl_unreachable(rc) ||
               c->certificate_refused)) {
        rl_client_free(c);
        return rc;
    }
    rl_fork_track_client(c);
    rl_clear_error();
    *out = c;
    return RL_OK;
}
