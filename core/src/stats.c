/* Metrics: per limiter name, counters of outcomes and a latency histogram,
 * kept without locks (see "metrics" in ratelimit.h).
 *
 * Names live in an open-addressing table of 2 x RL_STATS_MAX_NAMES slots:
 * an entry is published once with a compare-and-swap on an empty slot and
 * never moves nor leaves until the client closes, so a lookup is a hash, a
 * few acquire loads and a string compare, and counting is three relaxed
 * atomic additions. The table itself is made by the first counted decision
 * (a client with metrics off never has one). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

enum { OUT_ALLOWED, OUT_DENIED, OUT_FALLBACK, OUT_ERROR, OUTCOMES };

#define SLOTS (2 * RL_STATS_MAX_NAMES) /* a power of two: at most half full */

struct rl_stats_entry {
    uint64_t outcomes[OUTCOMES];
    uint64_t local_allowed, local_denied, lease_calls;
    uint64_t latency_sum_us;
    uint64_t buckets[RL_STATS_BUCKETS];
    uint64_t hash;
    const char *name; /* "" for the overflow entry; else stored after the entry */
};

struct rl_stats {
    rl_stats_entry *slots[SLOTS];
    unsigned names; /* entries made or being made; at most RL_STATS_MAX_NAMES */
    rl_stats_entry other; /* every name past RL_STATS_MAX_NAMES */
};

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static uint64_t hash_name(const char *s, size_t len)
{
    uint64_t h = 14695981039346656037ULL; /* FNV-1a */
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
    return h;
}

/* The table, made on first use; NULL with metrics off or out of memory. */
static rl_stats *table(rl_client *c)
{
    rl_stats *s = __atomic_load_n(&c->stats, __ATOMIC_ACQUIRE), *expected = NULL;
    if (s || c->options.metrics_off) return s;
    if (!(s = calloc(1, sizeof *s))) return NULL;
    s->other.name = "";
    if (!__atomic_compare_exchange_n(&c->stats, &expected, s, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        free(s); /* another thread made it first */
        return expected;
    }
    return s;
}

/* A new entry for name, or NULL when the table is full or memory is out. */
static rl_stats_entry *new_entry(rl_stats *s, const char *name, size_t len, uint64_t h)
{
    unsigned n = __atomic_load_n(&s->names, __ATOMIC_RELAXED);
    do {
        if (n >= RL_STATS_MAX_NAMES) return NULL;
    } while (!__atomic_compare_exchange_n(&s->names, &n, n + 1, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    rl_stats_entry *e = calloc(1, sizeof *e + len + 1);
    if (!e) {
        __atomic_fetch_sub(&s->names, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    memcpy(e + 1, name, len + 1);
    e->name = (const char *)(e + 1);
    e->hash = h;
    return e;
}

/* The entry counting name: found, else published in the first empty slot of
 * its probe sequence (entries never leave, so an empty slot proves the name
 * is not in the table); the overflow entry when there is no room. */
static rl_stats_entry *entry_for(rl_stats *s, const char *name)
{
    size_t len = strlen(name);
    uint64_t h = hash_name(name, len);
    for (size_t i = h & (SLOTS - 1);; i = (i + 1) & (SLOTS - 1)) {
        rl_stats_entry *e = __atomic_load_n(&s->slots[i], __ATOMIC_ACQUIRE), *mine;
        if (!e) {
            if (!(mine = new_entry(s, name, len, h))) return &s->other;
            if (__atomic_compare_exchange_n(&s->slots[i], &e, mine, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
                return mine;
            /* another thread filled the slot first: maybe with this name */
            free(mine);
            __atomic_fetch_sub(&s->names, 1, __ATOMIC_RELAXED);
        }
        if (e->hash == h && !strcmp(e->name, name)) return e;
    }
}

/* Bucket i holds latencies in (8 << (i - 1), 8 << i] microseconds. */
static int bucket_of(int64_t us)
{
    if (us <= RL_STATS_BUCKET_US(0)) return 0;
    int b = 64 - __builtin_clzll((uint64_t)(us - 1)) - 3;
    return b < RL_STATS_BUCKETS - 1 ? b : RL_STATS_BUCKETS - 1;
}

static void count(rl_stats_entry *e, int status, const rl_result *result, int64_t us)
{
    int outcome = status != RL_OK    ? OUT_ERROR
                  : result->fallback ? OUT_FALLBACK
                  : result->allowed  ? OUT_ALLOWED
                                     : OUT_DENIED;
    if (us < 0) us = 0;
    __atomic_fetch_add(&e->outcomes[outcome], 1, __ATOMIC_RELAXED);
    if (outcome <= OUT_DENIED && result->local)
        __atomic_fetch_add(result->allowed ? &e->local_allowed : &e->local_denied, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&e->latency_sum_us, (uint64_t)us, __ATOMIC_RELAXED);
    __atomic_fetch_add(&e->buckets[bucket_of(us)], 1, __ATOMIC_RELAXED);
}

int64_t rl_stats_start(const rl_client *client)
{
    return client->options.metrics_off ? 0 : now_us();
}

void rl_stats_execute(rl_client *client, const rl_request *requests, size_t n, const rl_result *results,
                      const rl_outcome *outcomes, int64_t start_us)
{
    rl_stats *s;
    if (!(s = table(client))) return;
    int64_t us = now_us() - start_us;
    /* invalid requests never reach Redis: not decisions */
    for (size_t i = 0; i < n; i++)
        if (outcomes[i].status != RL_ERR_INVALID)
            count(entry_for(s, requests[i].name), outcomes[i].status, &results[i], us);
}

void rl_stats_begin(rl_client *client, const char *name, rl_stats_mark *mark)
{
    rl_stats *s = table(client);
    mark->entry = s ? entry_for(s, name) : NULL;
    mark->start_us = s ? now_us() : 0;
}

void rl_stats_end(const rl_stats_mark *mark, int status, const rl_result *result)
{
    if (mark->entry && status != RL_ERR_INVALID) count(mark->entry, status, result, now_us() - mark->start_us);
}

void rl_stats_lease_call(rl_client *client, const char *name)
{
    rl_stats *s = table(client);
    if (s) __atomic_fetch_add(&entry_for(s, name)->lease_calls, 1, __ATOMIC_RELAXED);
}

void rl_stats_free(rl_stats *s)
{
    if (!s) return;
    for (size_t i = 0; i < SLOTS; i++) free(s->slots[i]);
    free(s);
}

static void copy_entry(const rl_stats_entry *e, rl_limiter_stats *out)
{
    out->name = e->name;
    out->allowed = __atomic_load_n(&e->outcomes[OUT_ALLOWED], __ATOMIC_RELAXED);
    out->denied = __atomic_load_n(&e->outcomes[OUT_DENIED], __ATOMIC_RELAXED);
    out->fallback = __atomic_load_n(&e->outcomes[OUT_FALLBACK], __ATOMIC_RELAXED);
    out->errors = __atomic_load_n(&e->outcomes[OUT_ERROR], __ATOMIC_RELAXED);
    out->local_allowed = __atomic_load_n(&e->local_allowed, __ATOMIC_RELAXED);
    out->local_denied = __atomic_load_n(&e->local_denied, __ATOMIC_RELAXED);
    out->lease_calls = __atomic_load_n(&e->lease_calls, __ATOMIC_RELAXED);
    out->latency_sum_us = __atomic_load_n(&e->latency_sum_us, __ATOMIC_RELAXED);
    for (int b = 0; b < RL_STATS_BUCKETS; b++) out->latency_buckets[b] = __atomic_load_n(&e->buckets[b], __ATOMIC_RELAXED);
}

int rl_client_stats(const rl_client *client, rl_limiter_stats *out, size_t max, size_t *count)
{
    RL_IN_FLIGHT(client);
    rl_clear_error();
    if (!client || !count) return rl_fail(RL_ERR_INVALID, "client and count must not be NULL");
    if (max && !out) return rl_fail(RL_ERR_INVALID, "out must not be NULL when max > 0");
    const rl_stats *s = __atomic_load_n(&client->stats, __ATOMIC_ACQUIRE);
    size_t n = 0;
    for (size_t i = 0; s && i < SLOTS; i++) {
        const rl_stats_entry *e = __atomic_load_n(&s->slots[i], __ATOMIC_ACQUIRE);
        if (!e) continue;
        if (n < max) copy_entry(e, &out[n]);
        n++;
    }
    /* the overflow entry shows once something was counted there */
    uint64_t other = 0;
    for (int o = 0; s && o < OUTCOMES; o++) other += __atomic_load_n(&s->other.outcomes[o], __ATOMIC_RELAXED);
    if (other) {
        if (n < max) copy_entry(&s->other, &out[n]);
        n++;
    }
    *count = n;
    return RL_OK;
}
