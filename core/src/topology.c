/* Where a command goes: the one server, the master the sentinels name, or
 * the master of a cluster slot; and learning again when that changes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

/* A cluster slot map is refreshed at most this often. */
#define REFRESH_MIN_MS 100

/* ---- hash slots (Redis Cluster spec: CRC16-XMODEM of the hash tag) ------- */

/* by byte (bit by bit was a tenth of a decision's client instructions):
 * crc16_table[b] is the CRC of the byte b alone (polynomial 0x1021) */
static const uint16_t crc16_table[256] = {
    0x0000, 0x1021, 0x2042, 0x3063, 0x4084, 0x50a5, 0x60c6, 0x70e7, 0x8108, 0x9129, 0xa14a, 0xb16b,
    0xc18c, 0xd1ad, 0xe1ce, 0xf1ef, 0x1231, 0x0210, 0x3273, 0x2252, 0x52b5, 0x4294, 0x72f7, 0x62d6,
    0x9339, 0x8318, 0xb37b, 0xa35a, 0xd3bd, 0xc39c, 0xf3ff, 0xe3de, 0x2462, 0x3443, 0x0420, 0x1401,
    0x64e6, 0x74c7, 0x44a4, 0x5485, 0xa56a, 0xb54b, 0x8528, 0x9509, 0xe5ee, 0xf5cf, 0xc5ac, 0xd58d,
    0x3653, 0x2672, 0x1611, 0x0630, 0x76d7, 0x66f6, 0x5695, 0x46b4, 0xb75b, 0xa77a, 0x9719, 0x8738,
    0xf7df, 0xe7fe, 0xd79d, 0xc7bc, 0x48c4, 0x58e5, 0x6886, 0x78a7, 0x0840, 0x1861, 0x2802, 0x3823,
    0xc9cc, 0xd9ed, 0xe98e, 0xf9af, 0x8948, 0x9969, 0xa90a, 0xb92b, 0x5af5, 0x4ad4, 0x7ab7, 0x6a96,
    0x1a71, 0x0a50, 0x3a33, 0x2a12, 0xdbfd, 0xcbdc, 0xfbbf, 0xeb9e, 0x9b79, 0x8b58, 0xbb3b, 0xab1a,
    0x6ca6, 0x7c87, 0x4ce4, 0x5cc5, 0x2c22, 0x3c03, 0x0c60, 0x1c41, 0xedae, 0xfd8f, 0xcdec, 0xddcd,
    0xad2a, 0xbd0b, 0x8d68, 0x9d49, 0x7e97, 0x6eb6, 0x5ed5, 0x4ef4, 0x3e13, 0x2e32, 0x1e51, 0x0e70,
    0xff9f, 0xefbe, 0xdfdd, 0xcffc, 0xbf1b, 0xaf3a, 0x9f59, 0x8f78, 0x9188, 0x81a9, 0xb1ca, 0xa1eb,
    0xd10c, 0xc12d, 0xf14e, 0xe16f, 0x1080, 0x00a1, 0x30c2, 0x20e3, 0x5004, 0x4025, 0x7046, 0x6067,
    0x83b9, 0x9398, 0xa3fb, 0xb3da, 0xc33d, 0xd31c, 0xe37f, 0xf35e, 0x02b1, 0x1290, 0x22f3, 0x32d2,
    0x4235, 0x5214, 0x6277, 0x7256, 0xb5ea, 0xa5cb, 0x95a8, 0x8589, 0xf56e, 0xe54f, 0xd52c, 0xc50d,
    0x34e2, 0x24c3, 0x14a0, 0x0481, 0x7466, 0x6447, 0x5424, 0x4405, 0xa7db, 0xb7fa, 0x8799, 0x97b8,
    0xe75f, 0xf77e, 0xc71d, 0xd73c, 0x26d3, 0x36f2, 0x0691, 0x16b0, 0x6657, 0x7676, 0x4615, 0x5634,
    0xd94c, 0xc96d, 0xf90e, 0xe92f, 0x99c8, 0x89e9, 0xb98a, 0xa9ab, 0x5844, 0x4865, 0x7806, 0x6827,
    0x18c0, 0x08e1, 0x3882, 0x28a3, 0xcb7d, 0xdb5c, 0xeb3f, 0xfb1e, 0x8bf9, 0x9bd8, 0xabbb, 0xbb9a,
    0x4a75, 0x5a54, 0x6a37, 0x7a16, 0x0af1, 0x1ad0, 0x2ab3, 0x3a92, 0xfd2e, 0xed0f, 0xdd6c, 0xcd4d,
    0xbdaa, 0xad8b, 0x9de8, 0x8dc9, 0x7c26, 0x6c07, 0x5c64, 0x4c45, 0x3ca2, 0x2c83, 0x1ce0, 0x0cc1,
    0xef1f, 0xff3e, 0xcf5d, 0xdf7c, 0xaf9b, 0xbfba, 0x8fd9, 0x9ff8, 0x6e17, 0x7e36, 0x4e55, 0x5e74,
    0x2e93, 0x3eb2, 0x0ed1, 0x1ef0,
};

static uint16_t crc16(const char *buf, size_t len)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) crc = (uint16_t)(crc << 8) ^ crc16_table[(crc >> 8) ^ (unsigned char)buf[i]];
    return crc;
}

int rl_key_slot(const char *key, size_t len)
{
    const char *open = memchr(key, '{', len);
    if (open) {
        const char *start = open + 1;
        const char *close = memchr(start, '}', len - (size_t)(start - key));
        if (close && close > start) return crc16(start, (size_t)(close - start)) & (RL_CLUSTER_SLOTS - 1);
    }
    return crc16(key, len) & (RL_CLUSTER_SLOTS - 1);
}

/* ---- sentinel ------------------------------------------------------------- */

static int reply_is_string(const redisReply *r)
{
    return r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS);
}

/* SENTINEL get-master-addr-by-name: [host, port] gives *host (malloc'd) and
 * *port; RL_ERR_PROTOCOL (no message set) when the reply names no master. */
int rl_sentinel_master_addr(const redisReply *r, char **host, int *port)
{
    char *end;
    long p;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || !reply_is_string(r->element[0]) ||
        !reply_is_string(r->element[1]) || !r->element[0]->str[0])
        return RL_ERR_PROTOCOL;
    /* port 0 would name a unix socket (rl_node) */
    p = strtol(r->element[1]->str, &end, 10);
    if (end == r->element[1]->str || *end || p <= 0 || p > 65535) return RL_ERR_PROTOCOL;
    *port = (int)p;
    *host = strdup(r->element[0]->str);
    return *host ? RL_OK : rl_fail(RL_ERR_NOMEM, "out of memory");
}

/* Asks one sentinel where the master is: *host (malloc'd) and *port. */
static int ask_sentinel(rl_client *c, rl_node *sentinel, char **host, int *port)
{
    const char *argv[3] = {"SENTINEL", "get-master-addr-by-name", c->url.service};
    rl_conn *conn;
    redisReply *r;
    int rc;
    /* a sentinel has no databases and its own user and password */
    if ((rc = rl_conn_open(c, sentinel, c->url.sentinel_password, c->url.sentinel_user, 0, &conn))) return rc;
    r = rl_command(conn, 3, argv, NULL);
    if (!r) {
        rc = rl_conn_error(conn, "ask the sentinel");
    } else if ((rc = rl_sentinel_master_addr(r, host, port)) == RL_ERR_PROTOCOL) {
        rc = rl_fail(RL_ERR_CONNECTION, "sentinel %s:%d does not know master '%s'%s%s", sentinel->host,
                     sentinel->port, c->url.service, r->type == REDIS_REPLY_ERROR ? ": " : "",
                     r->type == REDIS_REPLY_ERROR ? r->str : "");
    }
    if (r) rl_reply_free(r);
    rl_conn_close(conn);
    return rc;
}

/* The sentinels may name a master a moment before it is one (or after it
 * stopped being one): ROLE says what it is now. */
static int check_master(rl_client *c, rl_node *node)
{
    const char *argv[1] = {"ROLE"};
    rl_conn *conn;
    redisReply *r;
    int rc;
    if ((rc = rl_conn_get(c, node, &conn))) return rc;
    r = rl_command(conn, 1, argv, NULL);
    if (!r) rc = rl_conn_error(conn, "ROLE");
    else if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 || !reply_is_string(r->element[0]) ||
             strcmp(r->element[0]->str, "master") != 0)
        rc = rl_fail(RL_ERR_CONNECTION, "%s:%d, named master of '%s' by the sentinels, is not a master (yet)",
                     node->host, node->port, c->url.service);
    if (r) rl_reply_free(r);
    rl_conn_put(c, conn);
    return rc;
}

static int sentinel_discover(rl_client *c, rl_node **out)
{
    int rc = RL_ERR_CONNECTION, n = c->url.naddrs;
    char first_error[200] = "";
    for (int k = 0; k < n; k++) {
        int i = (c->next_sentinel + k) % n;
        rl_node *sentinel = rl_node_for(c, c->url.addrs[i].host, c->url.addrs[i].port);
        rl_node *master;
        char *host = NULL;
        int port = 0;
        if (!sentinel) return RL_ERR_NOMEM;
        if ((rc = ask_sentinel(c, sentinel, &host, &port)) == RL_OK) {
            master = rl_node_for(c, host, port);
            free(host);
            if (!master) return RL_ERR_NOMEM;
            if ((rc = check_master(c, master)) == RL_OK) {
                c->next_sentinel = i;
                *out = master;
                return RL_OK;
            }
        }
        if (!first_error[0]) snprintf(first_error, sizeof first_error, "%s", rl_errmsg());
        if (rc == RL_ERR_INVALID || rc == RL_ERR_NOMEM) return rc;
    }
    return rl_fail(rc == RL_ERR_TIMEOUT ? RL_ERR_TIMEOUT : RL_ERR_CONNECTION,
                   "no sentinel could name a reachable master for '%s' (%s)", c->url.service, first_error);
}

/* ---- cluster slot map ------------------------------------------------------- */

/* CLUSTER SLOTS: [[start, end, [host, port, id...], replicas...], ...] */
int rl_parse_slots(rl_client *c, const redisReply *r, const char *asked_host, rl_node **map)
{
    int covered = 0; /* a flag: overlapping ranges could overflow a count */
    if (r->type != REDIS_REPLY_ARRAY) return rl_fail(RL_ERR_PROTOCOL, "CLUSTER SLOTS: unexpected reply");
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *range = r->element[i];
        if (range->type != REDIS_REPLY_ARRAY || range->elements < 3 ||
            range->element[0]->type != REDIS_REPLY_INTEGER || range->element[1]->type != REDIS_REPLY_INTEGER ||
            range->element[2]->type != REDIS_REPLY_ARRAY || range->element[2]->elements < 2 ||
            range->element[2]->element[1]->type != REDIS_REPLY_INTEGER)
            return rl_fail(RL_ERR_PROTOCOL, "CLUSTER SLOTS: unexpected reply");
        long long start = range->element[0]->integer, end = range->element[1]->integer;
        const redisReply *where = range->element[2]->element[0];
        /* an empty or unknown endpoint means "the node you asked" */
        long long port = range->element[2]->element[1]->integer;
        const char *host = where->type == REDIS_REPLY_STRING && where->str[0] && strcmp(where->str, "?") != 0
                               ? where->str
                               : asked_host;
        if (start < 0 || end >= RL_CLUSTER_SLOTS || start > end)
            return rl_fail(RL_ERR_PROTOCOL, "CLUSTER SLOTS: bad slot range");
        /* port 0 would name a unix socket (rl_node) */
        if (port <= 0 || port > 65535) return rl_fail(RL_ERR_PROTOCOL, "CLUSTER SLOTS: bad port %lld", port);
        rl_node *node = rl_node_for(c, host, (int)port);
        if (!node) return RL_ERR_NOMEM;
        for (long long s = start; s <= end; s++) map[s] = node;
        covered = 1;
    }
    return covered > 0 ? RL_OK : rl_fail(RL_ERR_CONNECTION, "the cluster serves no slots yet");
}

static int fetch_slots(rl_client *c, rl_node *node, rl_node **map)
{
    const char *argv[2] = {"CLUSTER", "SLOTS"};
    rl_conn *conn;
    redisReply *r;
    int rc;
    if ((rc = rl_conn_get(c, node, &conn))) return rc;
    r = rl_command(conn, 2, argv, NULL);
    if (!r) rc = rl_conn_error(conn, "CLUSTER SLOTS");
    else if (r->type == REDIS_REPLY_ERROR) rc = rl_fail(RL_ERR_REDIS, "CLUSTER SLOTS on %s:%d: %s", node->host, node->port, r->str);
    else rc = rl_parse_slots(c, r, node->host, map);
    if (r) rl_reply_free(r);
    rl_conn_put(c, conn);
    return rc;
}

/* Asks the known masters, then the seeds, for the slot map. */
static int cluster_discover(rl_client *c)
{
    rl_node **map = calloc(RL_CLUSTER_SLOTS, sizeof *map);
    rl_node **candidates;
    int count = 0, rc = RL_ERR_CONNECTION;
    char first_error[200] = "";
    if (!map) return rl_fail(RL_ERR_NOMEM, "out of memory");
    pthread_mutex_lock(&c->topology);
    candidates = calloc((size_t)c->node_count + (size_t)c->url.naddrs, sizeof *candidates);
    for (int i = 0; candidates && i < c->node_count; i++) candidates[count++] = c->nodes[i];
    pthread_mutex_unlock(&c->topology);
    if (!candidates) {
        free(map);
        return rl_fail(RL_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < c->url.naddrs; i++) {
        rl_node *seed = rl_node_for(c, c->url.addrs[i].host, c->url.addrs[i].port);
        int known = 0;
        for (int k = 0; seed && k < count; k++) known |= candidates[k] == seed;
        if (seed && !known) candidates[count++] = seed;
    }
    for (int i = 0; i < count; i++) {
        memset(map, 0, RL_CLUSTER_SLOTS * sizeof *map);
        if ((rc = fetch_slots(c, candidates[i], map)) == RL_OK) break;
        if (!first_error[0]) snprintf(first_error, sizeof first_error, "%s", rl_errmsg());
    }
    free(candidates);
    if (rc) {
        free(map);
        return rl_fail(rc == RL_ERR_TIMEOUT ? RL_ERR_TIMEOUT : RL_ERR_CONNECTION,
                       "no cluster node answered CLUSTER SLOTS (%s)", first_error);
    }
    pthread_mutex_lock(&c->topology);
    rl_node **old = c->slots;
    c->slots = map;
    c->refresh_due_ms = 0;
    pthread_mutex_unlock(&c->topology);
    free(old); /* read only under the topology lock */
    return RL_OK;
}

/* Runs discovery with the client's backoff: while every sentinel or seed is
 * down, calls fail at once instead of each paying the connect timeout. With
 * wait, a caller that has no route at all waits for a discovery under way. */
static int discover(rl_client *c, int wait)
{
    rl_node *master = NULL;
    int rc;
    pthread_mutex_lock(&c->topology);
    if (c->discovery.probing && !wait) {
        pthread_mutex_unlock(&c->topology);
        return rl_fail(RL_ERR_CONNECTION, "refreshing the topology");
    }
    if (c->discovery.failures == 0 && c->discovery.probing) {
        /* someone is asking already and nobody failed yet: wait for the answer */
        struct timespec until = rl_realtime_after(c->options.command_timeout_ms);
        while (c->discovery.probing &&
               pthread_cond_timedwait(&c->discovered, &c->topology, &until) != ETIMEDOUT) {
        }
        rc = c->discovery.probing ? rl_fail(RL_ERR_TIMEOUT, "still looking for the Redis servers")
             : c->discovery.failures ? rl_fail(c->discovery.status, "%s", c->discovery.message)
                                     : RL_OK;
        pthread_mutex_unlock(&c->topology);
        return rc;
    }
    rc = rl_backoff_check(&c->discovery, rl_now_ms());
    if (rc == RL_OK) c->discovery.probing = 1;
    pthread_mutex_unlock(&c->topology);
    if (rc) return rc;
    rc = c->url.mode == RL_MODE_SENTINEL ? sentinel_discover(c, &master) : cluster_discover(c);
    pthread_mutex_lock(&c->topology);
    if (rc == RL_OK) {
        rl_backoff_ok(&c->discovery);
        if (master) c->master = master;
    } else {
        rl_backoff_failed(&c->discovery, rc == RL_ERR_TIMEOUT ? RL_ERR_TIMEOUT : RL_ERR_CONNECTION,
                          rl_now_ms(), c->options.reconnect_max_ms);
    }
    pthread_cond_broadcast(&c->discovered);
    pthread_mutex_unlock(&c->topology);
    return rc;
}

int rl_route_cached(rl_client *c, int slot, rl_node **out, int *due)
{
    rl_node *node = NULL;
    pthread_mutex_lock(&c->topology);
    if (c->url.mode == RL_MODE_CLUSTER) {
        if (c->slots) node = c->slots[slot >= 0 ? slot : 0];
        if (slot < 0 && !node)
            for (int s = 0; s < RL_CLUSTER_SLOTS && c->slots && !node; s++) node = c->slots[s];
        *due = !c->slots || (c->refresh_due_ms && rl_now_ms() >= c->refresh_due_ms);
    } else {
        node = c->master;
        *due = !node;
    }
    pthread_mutex_unlock(&c->topology);
    *out = node;
    return node ? RL_OK : rl_fail(RL_ERR_CONNECTION, "no known server for slot %d yet", slot);
}

int rl_route(rl_client *c, int slot, rl_node **out)
{
    rl_node *node = NULL;
    int due;
    rl_route_cached(c, slot, &node, &due);
    if (due) {
        int rc = discover(c, !node);
        if (rc && !node) return rc; /* with a stale map, go on: MOVED will correct it */
        if (rc == RL_OK) rl_route_cached(c, slot, &node, &due);
    }
    if (!node) return rl_fail(RL_ERR_CONNECTION, "no cluster node serves slot %d", slot);
    *out = node;
    return RL_OK;
}

void rl_topology_suspect(rl_client *c, rl_node *node)
{
    pthread_mutex_lock(&c->topology);
    if (c->url.mode == RL_MODE_SENTINEL && c->master == node) {
        c->master = NULL;
    } else if (c->url.mode == RL_MODE_CLUSTER) {
        int64_t at = rl_now_ms() + REFRESH_MIN_MS;
        if (!c->refresh_due_ms || c->refresh_due_ms > at) c->refresh_due_ms = at;
    }
    pthread_mutex_unlock(&c->topology);
}

void rl_cluster_moved(rl_client *c, int slot, const char *host, int port)
{
    rl_node *node = rl_node_for(c, host, port);
    pthread_mutex_lock(&c->topology);
    if (node && c->slots && slot >= 0 && slot < RL_CLUSTER_SLOTS) c->slots[slot] = node;
    /* one slot moved: others may have moved with it */
    int64_t at = rl_now_ms() + REFRESH_MIN_MS;
    if (!c->refresh_due_ms || c->refresh_due_ms > at) c->refresh_due_ms = at;
    pthread_mutex_unlock(&c->topology);
}

int rl_topology_connect(rl_client *c)
{
    rl_node *node = NULL;
    rl_conn *conn;
    int rc;
    if (c->url.mode != RL_MODE_STANDALONE && (rc = discover(c, 1))) return rc;
    if ((rc = rl_route(c, -1, &node)) || (rc = rl_conn_get(c, node, &conn))) return rc;
    /* a round trip: TLS 1.3 reports a refused client certificate only here */
    const char *argv[1] = {"PING"};
    redisReply *r = rl_command(conn, 1, argv, NULL);
    if (!r) rc = rl_conn_error(conn, "PING");
    else if (r->type == REDIS_REPLY_ERROR) rc = rl_fail(RL_ERR_REDIS, "PING: %s", r->str);
    if (r) rl_reply_free(r);
    rl_conn_put(c, conn);
    return rc;
}

int rl_master_slots(rl_client *c, int *out, int max)
{
    rl_node *node, *seen[1024]; /* a cluster has at most ~1000 masters */
    int n = 0, rc;
    if (c->url.mode != RL_MODE_CLUSTER) {
        if (max > 0) out[0] = -1;
        return 1;
    }
    if ((rc = rl_route(c, 0, &node))) return rc; /* learns the slot map first */
    pthread_mutex_lock(&c->topology);
    for (int s = 0; s < RL_CLUSTER_SLOTS && c->slots && n < (int)(sizeof seen / sizeof *seen); s++) {
        int known = 0;
        if (!c->slots[s]) continue;
        for (int i = 0; i < n && !known; i++) known = seen[i] == c->slots[s];
        if (known) continue;
        seen[n] = c->slots[s];
        if (n < max) out[n] = s;
        n++;
    }
    pthread_mutex_unlock(&c->topology);
    return n;
}
