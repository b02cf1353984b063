/* Arbitrary bytes through a hiredis reader (the fake connection) with the
 * core's reply layout (reply.c, as on every connection), and every
 * reply object it yields (and each of their elements) through every reply
 * decoder of the core:
 *   rl_decode_result      the six limiter scripts
 *   rl_reply_int          semaphore release / refresh / leave / info
 *   rl_decode_sem_acquire semaphore and lock acquire
 *   rl_decode_queue_pop   delay_queue pop
 *   rl_decode_integer     delay_queue push, ZCARD, ZREM
 *   rl_classify_reply     MOVED / ASK / TRYAGAIN / READONLY... in each mode
 *   rl_reply_is_noscript
 *   rl_parse_slots        CLUSTER SLOTS
 *   rl_sentinel_master_addr  SENTINEL get-master-addr-by-name
 * Each must accept exactly the replies of its shape, copy what it decodes
 * exactly, keep outputs in range and within their buffers, and leak nothing.
 * The clients come from rl_client_open (on_error=allow) on a loopback port
 * nothing listens on: they open without a connection. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "internal.h"

static rl_client *clients[3]; /* standalone, sentinel, cluster */
static int base_nodes[3];
static rl_node **slot_map;

static int closed_loopback_port(void)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    FUZZ_CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
               getsockname(fd, (struct sockaddr *)&a, &len) == 0);
    close(fd); /* bound, never listened on, now closed: connecting is refused */
    return ntohs(a.sin_port);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    static const char *const formats[3] = {"redis://127.0.0.1:%d", "redis+sentinel://127.0.0.1:%d/mymaster",
                                           "redis+cluster://127.0.0.1:%d"};
    rl_options o = RL_OPTIONS_INIT;
    (void)argc;
    (void)argv;
    o.on_error = RL_ON_ERROR_ALLOW;
    o.connect_timeout_ms = 500;
    o.command_timeout_ms = 500;
    int port = closed_loopback_port();
    for (int i = 0; i < 3; i++) {
        char url[128];
        snprintf(url, sizeof url, formats[i], port);
        int64_t start = rl_now_ms();
        int rc = rl_client_open(&clients[i], url, &o);
        int64_t took = rl_now_ms() - start;
        if (rc != RL_OK || took > 2000) {
            fprintf(stderr, "rl_client_open(%s, allow): %d (%s) in %lld ms\n", url, rc, rl_errmsg(), (long long)took);
            abort();
        }
        base_nodes[i] = clients[i]->node_count;
    }
    slot_map = calloc(RL_CLUSTER_SLOTS, sizeof *slot_map);
    FUZZ_CHECK(slot_map != NULL);
    /* callers never pass NULL to the others */
    rl_result res;
    int slot, p;
    char host[16];
    FUZZ_CHECK(rl_decode_result(NULL, &res) == RL_ERR_PROTOCOL);
    FUZZ_CHECK(rl_classify_reply(clients[2], NULL, &slot, host, sizeof host, &p) == REPLY_FINAL);
    FUZZ_CHECK(!rl_reply_is_noscript(NULL));
    return 0;
}

static int is_int(const redisReply *r, size_t i)
{
    return r->type == REDIS_REPLY_ARRAY && i < r->elements && r->element[i]->type == REDIS_REPLY_INTEGER;
}

static int is_string(const redisReply *r)
{
    return r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS;
}

static void check_limiter(const redisReply *r)
{
    rl_result res, untouched;
    memset(&res, 0x5A, sizeof res);
    untouched = res;
    int shape = r->type == REDIS_REPLY_ARRAY && r->elements == 8;
    for (size_t i = 0; shape && i < 8; i++) shape = is_int(r, i);
    shape = shape && r->element[7]->integer >= 0 && r->element[7]->integer < RL_MAX_RATES;
    int rc = rl_decode_result(r, &res);
    if (!shape) {
        FUZZ_CHECK(rc == RL_ERR_PROTOCOL && rl_errmsg()[0]);
        FUZZ_CHECK(!memcmp(&res, &untouched, sizeof res));
        return;
    }
    FUZZ_CHECK(rc == RL_OK);
    FUZZ_CHECK(res.allowed == (r->element[0]->integer != 0));
    FUZZ_CHECK(res.limit == r->element[1]->integer && res.remaining == r->element[2]->integer &&
               res.retry_after_ms == r->element[3]->integer && res.reset_after_ms == r->element[4]->integer &&
               res.wait_ms == r->element[5]->integer && res.fallback == 0 &&
               res.granted == r->element[6]->integer && res.rate_index == r->element[7]->integer);
}

static void check_ints(const redisReply *r)
{
    for (size_t i = 0; i < 8; i++) {
        int64_t v = -7;
        int rc = rl_reply_int(r, i, &v);
        FUZZ_CHECK(rc == (is_int(r, i) ? RL_OK : RL_ERR_PROTOCOL));
        FUZZ_CHECK(rc ? v == -7 : v == r->element[i]->integer);
    }
    int64_t v = -7;
    int rc = rl_decode_integer(r, "fuzz", &v);
    FUZZ_CHECK(rc == (r->type == REDIS_REPLY_INTEGER ? RL_OK : RL_ERR_PROTOCOL));
    FUZZ_CHECK(rc ? v == -7 && rl_errmsg()[0] : v == r->integer);
}

static void check_semaphore(const redisReply *r)
{
    int granted = -7;
    int64_t fence = -7, first_end = -7;
    int rc = rl_decode_sem_acquire(r, &granted, &fence, &first_end);
    if (!(is_int(r, 0) && is_int(r, 1) && is_int(r, 3))) {
        FUZZ_CHECK(rc == RL_ERR_PROTOCOL && rl_errmsg()[0]);
        return;
    }
    FUZZ_CHECK(rc == RL_OK);
    FUZZ_CHECK(granted == (r->element[0]->integer == 1));
    FUZZ_CHECK(fence == r->element[1]->integer && first_end == r->element[3]->integer);
}

static void check_pop(const redisReply *r)
{
    rl_messages m;
    int64_t next_in = -7;
    memset(&m, 0, sizeof m);
    int rc = rl_decode_queue_pop(r, &m, &next_in);
    if (!is_int(r, 0)) {
        FUZZ_CHECK(rc == RL_ERR_PROTOCOL && m.count == 0 && !m.items && !m.lens);
        return;
    }
    FUZZ_CHECK(next_in == r->element[0]->integer);
    FUZZ_CHECK(m.count <= r->elements - 1);
    /* what was decoded, even before an error, is exact */
    for (size_t i = 0; i < m.count; i++) {
        const redisReply *e = r->element[i + 1];
        FUZZ_CHECK(e->type == REDIS_REPLY_STRING && m.lens[i] == e->len);
        FUZZ_CHECK(!memcmp(m.items[i], e->str, e->len) && m.items[i][e->len] == '\0');
    }
    int all = 1;
    for (size_t i = 1; i < r->elements; i++) all &= r->element[i]->type == REDIS_REPLY_STRING;
    FUZZ_CHECK(rc == (all ? RL_OK : RL_ERR_PROTOCOL));
    FUZZ_CHECK(!all || m.count == r->elements - 1);
    rl_messages_free(&m);
    FUZZ_CHECK(m.count == 0 && !m.items);
}

static int starts(const redisReply *r, const char *prefix)
{
    return r->type == REDIS_REPLY_ERROR && !strncmp(r->str, prefix, strlen(prefix));
}

static void check_classify(const redisReply *r)
{
    static const size_t sizes[] = {256, 10, 1};
    for (int m = 0; m < 3; m++) {
        const rl_client *c = clients[m];
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            char *host = malloc(sizes[k]); /* exactly sized: ASan sees any overflow */
            int slot = -7, port = -7;
            FUZZ_CHECK(host != NULL);
            rl_reply_verdict kind = rl_classify_reply(c, r, &slot, host, sizes[k], &port);
            FUZZ_CHECK(kind >= REPLY_FINAL && kind <= REPLY_READONLY);
            if (r->type != REDIS_REPLY_ERROR) FUZZ_CHECK(kind == REPLY_FINAL);
            if (kind == REPLY_MOVED || kind == REPLY_ASK) {
                FUZZ_CHECK(c->url.mode == RL_MODE_CLUSTER);
                FUZZ_CHECK(starts(r, kind == REPLY_MOVED ? "MOVED " : "ASK "));
                FUZZ_CHECK(slot >= 0 && slot < RL_CLUSTER_SLOTS);
                FUZZ_CHECK(port >= 1 && port <= 65535);
                size_t len = strnlen(host, sizes[k]);
                FUZZ_CHECK(len < sizes[k]);
                /* the host is what stands between the slot and the last ':' */
                const char *colon = strrchr(r->str, ':');
                FUZZ_CHECK(colon && colon - r->str >= (long)len + 1 && colon[-(long)len - 1] == ' ' &&
                           !memcmp(colon - len, host, len));
                /* the numbers as written */
                FUZZ_CHECK(strtol(colon + 1, NULL, 10) == port);
                FUZZ_CHECK(strtol(r->str + (kind == REPLY_MOVED ? 6 : 4), NULL, 10) == slot);
            } else if (kind == REPLY_LATER) {
                FUZZ_CHECK(starts(r, "TRYAGAIN") || starts(r, "CLUSTERDOWN") || starts(r, "LOADING") ||
                           starts(r, "MASTERDOWN"));
            } else if (kind == REPLY_READONLY) {
                FUZZ_CHECK(c->url.mode == RL_MODE_SENTINEL && (starts(r, "READONLY") || starts(r, "ERR READONLY")));
            }
            free(host);
        }
    }
    FUZZ_CHECK(rl_reply_is_noscript(r) == starts(r, "NOSCRIPT"));
}

/* the node of the last range in r that covers each slot, by hand */
static void check_slots(const redisReply *r)
{
    rl_client *c = clients[2];
    rl_clear_error();
    int rc = rl_parse_slots(c, r, "127.0.0.1", slot_map);
    if (rc == RL_OK) {
        int covered = 0;
        FUZZ_CHECK(r->type == REDIS_REPLY_ARRAY);
        for (int s = 0; s < RL_CLUSTER_SLOTS; s++) {
            rl_node *node = slot_map[s];
            if (!node) continue;
            covered = 1;
            int known = 0;
            for (int i = 0; i < c->node_count; i++) known |= c->nodes[i] == node;
            FUZZ_CHECK(known);
            FUZZ_CHECK(node->host && node->host[0]);
            FUZZ_CHECK(node->port >= 1 && node->port <= 65535);
        }
        FUZZ_CHECK(covered);
        for (size_t i = 0; i < r->elements; i++) {
            const redisReply *range = r->element[i], *where = range->element[2]->element[0];
            long long start = range->element[0]->integer, end = range->element[1]->integer;
            FUZZ_CHECK(start >= 0 && start <= end && end < RL_CLUSTER_SLOTS);
            int named = where->type == REDIS_REPLY_STRING && where->str[0] && strcmp(where->str, "?");
            const char *host = named ? where->str : "127.0.0.1";
            /* a later range may take slots over, never leave one empty */
            for (long long s = start; s <= end; s++) FUZZ_CHECK(slot_map[s] != NULL);
            int last = 1;
            for (size_t j = i + 1; j < r->elements; j++) {
                const redisReply *later = r->element[j];
                if (later->element[0]->integer <= end && later->element[1]->integer >= start) last = 0;
            }
            if (last) {
                FUZZ_CHECK(!strcmp(slot_map[start]->host, host));
                FUZZ_CHECK(slot_map[start]->port == range->element[2]->element[1]->integer);
            }
        }
    } else {
        FUZZ_CHECK(rc == RL_ERR_PROTOCOL || rc == RL_ERR_CONNECTION || rc == RL_ERR_NOMEM);
        FUZZ_CHECK(rl_errmsg()[0]);
    }
    /* back to the client as it opened (only an array may have filled the map) */
    if (r->type == REDIS_REPLY_ARRAY && r->elements) memset(slot_map, 0, RL_CLUSTER_SLOTS * sizeof *slot_map);
    for (int i = base_nodes[2]; i < c->node_count; i++) rl_node_free(c->nodes[i]);
    c->node_count = base_nodes[2];
}

static void check_sentinel(const redisReply *r)
{
    char *host = NULL;
    int port = -7;
    int rc = rl_sentinel_master_addr(r, &host, &port);
    if (rc != RL_OK) {
        FUZZ_CHECK(rc == RL_ERR_PROTOCOL && host == NULL);
        return;
    }
    FUZZ_CHECK(r->type == REDIS_REPLY_ARRAY && r->elements == 2 && is_string(r->element[0]) &&
               is_string(r->element[1]));
    FUZZ_CHECK(host && host[0] && !strcmp(host, r->element[0]->str));
    FUZZ_CHECK(port >= 1 && port <= 65535);
    free(host);
}

static void check_reply(const redisReply *r, int depth)
{
    check_limiter(r);
    check_ints(r);
    check_semaphore(r);
    check_pop(r);
    check_classify(r);
    check_slots(r);
    check_sentinel(r);
    /* the elements too: a short input reaches every decoder with many shapes */
    int nested = r->type == REDIS_REPLY_ARRAY;
#ifdef REDIS_REPLY_MAP /* hiredis >= 1.0 reads RESP3 */
    nested |= r->type == REDIS_REPLY_MAP || r->type == REDIS_REPLY_SET || r->type == REDIS_REPLY_PUSH;
#endif
    if (depth < 2 && nested)
        for (size_t i = 0; i < r->elements && i < 16; i++) check_reply(r->element[i], depth + 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    redisReader *reader = redisReaderCreate();
    FUZZ_CHECK(reader != NULL);
    rl_reply_use(reader);
    /* hiredis's own limit is 2^32 - 1 elements: a header alone would make it
     * calloc gigabytes, which libFuzzer reports; the decoders are under test */
#if HIREDIS_MAJOR >= 1
    reader->maxelements = 1 << 16;
#endif
    if (redisReaderFeed(reader, (const char *)data, size) == REDIS_OK) {
        for (int n = 0; n < 32; n++) {
            void *reply = NULL;
            if (rl_reader_get_reply(reader, &reply) != REDIS_OK || !reply) break;
            check_reply(reply, 0);
            rl_reply_free(reply);
        }
    }
    redisReaderFree(reader);
    return 0;
}
