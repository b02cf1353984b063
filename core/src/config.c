/* Limiter specs stored in Redis (rl_config_*), and the per-client cache
 * that lets a decision use one without another round trip. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define CACHE_BUCKETS 256
/* names beyond this empty the cache (hostile names cannot grow it) */
#define CACHE_MAX 10000

typedef struct cache_entry {
    struct cache_entry *next;
    int found;
    rl_spec spec;
    int64_t fetched_ms;
    char name[];
} cache_entry;

struct rl_config_cache {
    pthread_mutex_t mutex;
    size_t count;
    cache_entry *buckets[CACHE_BUCKETS];
};

static const char *const scope_names[] = {"overall", "per_client"};

static unsigned bucket_of(const char *name)
{
    unsigned h = 2166136261u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) h = (h ^ *p) * 16777619u;
    return h % CACHE_BUCKETS;
}

static void clear_entries(rl_config_cache *cache)
{
    for (int i = 0; i < CACHE_BUCKETS; i++) {
        while (cache->buckets[i]) {
            cache_entry *e = cache->buckets[i];
            cache->buckets[i] = e->next;
            free(e);
        }
    }
    cache->count = 0;
}

rl_config_cache *rl_config_cache_new(void)
{
    rl_config_cache *cache = calloc(1, sizeof *cache);
    if (cache) pthread_mutex_init(&cache->mutex, NULL);
    return cache;
}

void rl_config_cache_free(rl_config_cache *cache)
{
    if (!cache) return;
    clear_entries(cache);
    pthread_mutex_destroy(&cache->mutex);
    free(cache);
}

/* Around fork (fork.c): the cache is consistent in the child, and kept. */
void rl_config_cache_lock(rl_config_cache *cache)
{
    pthread_mutex_lock(&cache->mutex);
}

void rl_config_cache_unlock(rl_config_cache *cache)
{
    pthread_mutex_unlock(&cache->mutex);
}

/* Copies the cached answer for name into *found / *spec; returns 1 when
 * there is one no older than max_age_ms (any age when max_age_ms < 0). */
static int cache_get(rl_config_cache *cache, const char *name, int64_t max_age_ms, int *found, rl_spec *spec)
{
    int hit = 0;
    pthread_mutex_lock(&cache->mutex);
    for (cache_entry *e = cache->buckets[bucket_of(name)]; e; e = e->next) {
        if (strcmp(e->name, name)) continue;
        if (max_age_ms < 0 || rl_now_ms() - e->fetched_ms <= max_age_ms) {
            *found = e->found;
            *spec = e->spec;
            hit = 1;
        }
        break;
    }
    pthread_mutex_unlock(&cache->mutex);
    return hit;
}

static int same_spec(const rl_spec *a, const rl_spec *b);

/* Caches what is stored for name; a spec that changed (or went) ends this
 * client's leases of that name, their rest given back. */
static void cache_put(rl_client *client, const char *name, int found, const rl_spec *spec)
{
    rl_config_cache *cache = client->configs;
    int changed = 0;
    unsigned b = bucket_of(name);
    pthread_mutex_lock(&cache->mutex);
    cache_entry *e = cache->buckets[b];
    while (e && strcmp(e->name, name)) e = e->next;
    if (!e) {
        if (cache->count >= CACHE_MAX) clear_entries(cache);
        size_t len = strlen(name);
        if ((e = malloc(sizeof *e + len + 1))) {
            memcpy(e->name, name, len + 1);
            e->found = 0;
            e->next = cache->buckets[b];
            cache->buckets[b] = e;
            cache->count++;
        }
    }
    if (e) {
        changed = e->found && (!found || !same_spec(&e->spec, spec));
        e->found = found;
        if (found) e->spec = *spec;
        e->fetched_ms = rl_now_ms();
    }
    pthread_mutex_unlock(&cache->mutex);
    if (changed) rl_leases_end(client, name, NULL, RL_LEASES_GIVE_BACK);
}

/* ---- the stored form --------------------------------------------------- */

/* Appends "<prefix>:config:<escaped name>" to cmd; out of memory marks cmd
 * failed (rl_run refuses it), as rl_cmd_key does. */
static void config_key(rl_cmd *cmd, const rl_client *client, const char *name)
{
    char *tag = rl_entity_tag(name, NULL, NULL);
    size_t len = tag ? strlen(client->prefix) + strlen(":config:") + strlen(tag) : 0;
    char *key = tag ? malloc(len + 1) : NULL;
    if (key) {
        snprintf(key, len + 1, "%s:config:%s", client->prefix, tag);
        rl_cmd_copy(cmd, key, len);
        cmd->slot = rl_key_slot(key, len);
    } else {
        cmd->failed = 1;
    }
    free(key);
    free(tag);
}

/* "limit/period_ms/burst;..." */
static void format_rates(const rl_spec *spec, char *buf, size_t size)
{
    rl_rate rates[RL_MAX_RATES];
    size_t n = rl_spec_rates(spec, rates), used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld/%lld/%lld", i ? ";" : "", (long long)rates[i].limit,
                                 (long long)rates[i].period_ms, (long long)rates[i].burst);
}

static int parse_int(const char *s, int64_t *out)
{
    char *end;
    long long v;
    if (!s || !*s) return -1;
    v = strtoll(s, &end, 10);
    if (*end && *end != '/' && *end != ';') return -1;
    *out = v;
    return (int)(end - s);
}

/* the stored fields, as HMGET returns them, into spec */
static int parse_stored(const char *name, const redisReply *r, int *found, rl_spec *spec)
{
    const char *fields[4];
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 4)
        return rl_fail(RL_ERR_PROTOCOL, "reading the configuration of '%s': unexpected reply", name);
    for (int i = 0; i < 4; i++)
        fields[i] = r->element[i]->type == REDIS_REPLY_STRING ? r->element[i]->str : NULL;
    *found = fields[0] != NULL;
    if (!*found) return RL_OK;
    memset(spec, 0, sizeof *spec);
    int64_t numbers[3 * RL_MAX_RATES], v;
    size_t count = 0;
    const char *p = fields[1];
    int ok = rl_algorithm_parse(fields[0], &spec->algorithm) == RL_OK && p;
    while (ok && count < 3 * RL_MAX_RATES) {
        int used = parse_int(p, &v);
        if (used <= 0) {
            ok = 0;
            break;
        }
        numbers[count++] = v;
        p += used;
        if (!*p) break;
        ok = (*p == '/' && count % 3 != 0) || (*p == ';' && count % 3 == 0);
        p++;
    }
    ok = ok && !*p && count >= 3 && count % 3 == 0;
    if (ok) {
        spec->limit = numbers[0];
        spec->period_ms = numbers[1];
        spec->burst = numbers[2];
        spec->more_count = count / 3 - 1;
        for (size_t i = 1; i < count / 3; i++)
            spec->more[i - 1] = (rl_rate){numbers[3 * i], numbers[3 * i + 1], numbers[3 * i + 2]};
        ok = fields[2] && parse_int(fields[2], &spec->initial_tokens) > 0 && fields[3];
    }
    if (ok) {
        if (!strcmp(fields[3], scope_names[RL_SCOPE_PER_CLIENT])) spec->scope = RL_SCOPE_PER_CLIENT;
        else ok = !strcmp(fields[3], scope_names[RL_SCOPE_OVERALL]);
    }
    if (!ok || rl_spec_validate(spec) != RL_OK)
        return rl_fail(RL_ERR_PROTOCOL, "the configuration stored for limiter '%s' is not one this library wrote", name);
    return RL_OK;
}

void rl_config_read_command(rl_cmd *cmd, const rl_client *client, const char *name)
{
    rl_cmd_init(cmd);
    rl_cmd_cstr(cmd, "HMGET");
    config_key(cmd, client, name);
    rl_cmd_cstr(cmd, "algorithm");
    rl_cmd_cstr(cmd, "rates");
    rl_cmd_cstr(cmd, "initial_tokens");
    rl_cmd_cstr(cmd, "scope");
}

static int fetch(rl_client *client, const char *name, int *found, rl_spec *spec)
{
    rl_cmd cmd;
    redisReply *reply;
    int rc;
    rl_config_read_command(&cmd, client, name);
    rc = rl_run(client, &cmd, 1, &reply);
    rl_cmd_free(&cmd);
    if (rc) return rc;
    rc = parse_stored(name, reply, found, spec);
    rl_reply_free(reply);
    if (rc == RL_OK) cache_put(client, name, *found, spec);
    return rc;
}

/* ---- public API -------------------------------------------------------- */

static int store(rl_client *client, const char *name, const rl_spec *spec, int if_absent, int *set)
{
    rl_cmd cmd;
    redisReply *reply;
    char rates[RL_MAX_RATES * 64];
    int64_t done;
    int rc;

    rl_clear_error();
    if (!client) return rl_fail(RL_ERR_INVALID, "client must not be NULL");
    if ((rc = rl_check_name("name", name)) || (rc = rl_spec_validate(spec))) return rc;
    format_rates(spec, rates, sizeof rates);
    rl_cmd_init(&cmd);
    rl_cmd_script(&cmd, RL_SCRIPT_CONFIG, 1);
    config_key(&cmd, client, name);
    rl_cmd_int(&cmd, if_absent);
    rl_cmd_cstr(&cmd, "algorithm");
    rl_cmd_cstr(&cmd, rl_algorithm_name(spec->algorithm));
    rl_cmd_cstr(&cmd, "rates");
    rl_cmd_cstr(&cmd, rates);
    rl_cmd_cstr(&cmd, "initial_tokens");
    rl_cmd_int(&cmd, spec->initial_tokens);
    rl_cmd_cstr(&cmd, "scope");
    rl_cmd_cstr(&cmd, scope_names[spec->scope]);
    rc = rl_run(client, &cmd, 1, &reply);
    rl_cmd_free(&cmd);
    if (rc) return rc;
    rc = rl_decode_integer(reply, "config set", &done);
    rl_reply_free(reply);
    if (rc) return rc;
    if (set) *set = done == 1;
    if (done == 1) cache_put(client, name, 1, spec);
    return RL_OK;
}

int rl_config_set(rl_client *client, const char *name, const rl_spec *spec)
{
    RL_IN_FLIGHT(client);
    return store(client, name, spec, 0, NULL);
}

int rl_config_set_if_absent(rl_client *client, const char *name, const rl_spec *spec, int *set)
{
    RL_IN_FLIGHT(client);
    return store(client, name, spec, 1, set);
}

int rl_config_get(rl_client *client, const char *name, rl_spec *out, int *found)
{
    RL_IN_FLIGHT(client);
    int rc;
    rl_clear_error();
    if (!client || !out || !found) return rl_fail(RL_ERR_INVALID, "client, out and found must not be NULL");
    if ((rc = rl_check_name("name", name))) return rc;
    return fetch(client, name, found, out);
}

int rl_config_delete(rl_client *client, const char *name, int *deleted)
{
    RL_IN_FLIGHT(client);
    rl_cmd cmd;
    redisReply *reply;
    int64_t n;
    int rc;

    rl_clear_error();
    if (!client) return rl_fail(RL_ERR_INVALID, "client must not be NULL");
    if ((rc = rl_check_name("name", name))) return rc;
    rl_cmd_init(&cmd);
    rl_cmd_cstr(&cmd, "DEL");
    config_key(&cmd, client, name);
    rc = rl_run(client, &cmd, 1, &reply);
    rl_cmd_free(&cmd);
    if (rc) return rc;
    rc = rl_decode_integer(reply, "config delete", &n);
    rl_reply_free(reply);
    if (rc) return rc;
    if (deleted) *deleted = n > 0;
    cache_put(client, name, 0, NULL);
    return RL_OK;
}

static int not_stored(const char *name)
{
    return rl_fail(RL_ERR_INVALID, "no configuration is stored for limiter '%s' (store one first)", name);
}

/* What is stored for name: the cached answer while fresh, else read again. */
static int lookup(rl_client *client, const char *name, int *found, rl_spec *spec)
{
    if (cache_get(client->configs, name, client->options.config_refresh_ms, found, spec)) return RL_OK;
    return fetch(client, name, found, spec);
}

/* The rule rl_config_resolve follows, in two halves so that the I/O thread
 * can read without blocking between them: the cached answer while fresh,
 * else (0) a read, whose outcome rl_config_read_done takes in. */
int rl_config_cache_lookup(rl_client *client, const char *name, rl_spec *out, int *rc)
{
    int found;
    if (!cache_get(client->configs, name, client->options.config_refresh_ms, &found, out)) return 0;
    *rc = found ? RL_OK : not_stored(name);
    return 1;
}

/* A stale spec serves while Redis cannot be read. */
int rl_config_read_done(rl_client *client, const char *name, int status, const redisReply *reply, rl_spec *out)
{
    int found = 0;
    if (!status && !(status = parse_stored(name, reply, &found, out))) cache_put(client, name, found, out);
    if (status) {
        if (rl_unreachable(status) && cache_get(client->configs, name, -1, &found, out) && found) return RL_OK;
        return status;
    }
    return found ? RL_OK : not_stored(name);
}

int rl_config_resolve(rl_client *client, const char *name, rl_spec *out)
{
    RL_IN_FLIGHT(client);
    redisReply *reply = NULL;
    rl_cmd cmd;
    int rc;
    if (rl_config_cache_lookup(client, name, out, &rc)) return rc;
    rl_config_read_command(&cmd, client, name);
    rc = rl_run(client, &cmd, 1, &reply);
    rl_cmd_free(&cmd);
    rc = rl_config_read_done(client, name, rc, reply, out);
    rl_reply_free(reply);
    return rc;
}

/* Never a round trip: the cached copy only while it is fresh (what
 * rl_submit would use without reading Redis). */
int rl_config_cached(rl_client *client, const char *name, rl_spec *out, int *fresh)
{
    RL_IN_FLIGHT(client);
    int found = 0, rc;
    rl_clear_error();
    if (!fresh) return rl_fail(RL_ERR_INVALID, "fresh must not be NULL");
    *fresh = 0;
    if (!client || !out) return rl_fail(RL_ERR_INVALID, "client and out must not be NULL");
    if ((rc = rl_check_name("name", name))) return rc;
    *fresh = cache_get(client->configs, name, client->options.config_refresh_ms, &found, out) && found;
    return RL_OK;
}

/* The same spec, however its defaults were spelled (burst 0 = limit). */
static int same_spec(const rl_spec *a, const rl_spec *b)
{
    rl_rate ra[RL_MAX_RATES], rb[RL_MAX_RATES];
    size_t na = rl_spec_rates(a, ra), nb = rl_spec_rates(b, rb);
    if (a->algorithm != b->algorithm || na != nb || a->initial_tokens != b->initial_tokens || a->scope != b->scope)
        return 0;
    for (size_t i = 0; i < na; i++) {
        int64_t burst_a = ra[i].burst ? ra[i].burst : ra[i].limit, burst_b = rb[i].burst ? rb[i].burst : rb[i].limit;
        if (ra[i].limit != rb[i].limit || ra[i].period_ms != rb[i].period_ms || burst_a != burst_b) return 0;
    }
    return 1;
}

int rl_config_check(rl_client *client, const char *name, const rl_spec *spec)
{
    RL_IN_FLIGHT(client);
    rl_spec stored;
    int found, rc;
    rl_clear_error();
    if (!client) return rl_fail(RL_ERR_INVALID, "client must not be NULL");
    if ((rc = rl_check_name("name", name)) || (spec && (rc = rl_spec_validate(spec)))) return rc;
    if ((rc = lookup(client, name, &found, &stored))) {
        /* an outage must not stop an application making its limiters */
        if (rl_unreachable(rc) && client->options.on_error != RL_ON_ERROR_RAISE) {
            rl_clear_error();
            return RL_OK;
        }
        return rc;
    }
    if (!spec) return found ? RL_OK : not_stored(name);
    if (!found || same_spec(spec, &stored)) return RL_OK;
    char have[512], asked[512];
    rl_spec_format(&stored, have, sizeof have);
    rl_spec_format(spec, asked, sizeof asked);
    return rl_fail(RL_ERR_INVALID, "limiter '%s' is configured in Redis as %s, not %s (use the stored spec, or "
                   "store the new one first)", name, have, asked);
}

int rl_spec_format(const rl_spec *spec, char *buf, size_t size)
{
    rl_rate rates[RL_MAX_RATES];
    char text[1024];
    size_t n, used;
    if (!spec || !rl_algorithm_name(spec->algorithm)) return rl_fail(RL_ERR_INVALID, "spec must name a known algorithm");
    n = rl_spec_rates(spec, rates);
    used = (size_t)snprintf(text, sizeof text, "%s", rl_algorithm_name(spec->algorithm));
    for (size_t i = 0; i < n && used < sizeof text; i++) {
        used += (size_t)snprintf(text + used, sizeof text - used, "%s", i ? ";" : " ");
        if (used < sizeof text)
            used += (size_t)rl_format_rate(text + used, sizeof text - used, rates[i].limit, rates[i].period_ms);
        if (rates[i].burst && rates[i].burst != rates[i].limit && used < sizeof text)
            used += (size_t)snprintf(text + used, sizeof text - used, " burst %lld", (long long)rates[i].burst);
    }
    if (spec->initial_tokens == RL_EMPTY && used < sizeof text)
        used += (size_t)snprintf(text + used, sizeof text - used, " initial 0");
    else if (spec->initial_tokens > 0 && used < sizeof text)
        used += (size_t)snprintf(text + used, sizeof text - used, " initial %lld", (long long)spec->initial_tokens);
    if (spec->scope == RL_SCOPE_PER_CLIENT && used < sizeof text)
        used += (size_t)snprintf(text + used, sizeof text - used, " per_client");
    return snprintf(buf, size, "%s", text);
}
