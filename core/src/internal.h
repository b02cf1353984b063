/* Internal interfaces of the core; not installed. Its files call only their
 * own layer or lower: base, transport, policy, engines, features, api
 * (scripts/layers.py says which file sits where, and why). */
#ifndef RL_INTERNAL_H
#define RL_INTERNAL_H

#include <pthread.h>
#include <time.h>
#include <stdarg.h>
#include <sys/types.h>
#include <hiredis/hiredis.h>

#include "ratelimit.h"
#include "rl_scripts.h"
#include "platform.h"

/* Products the scripts form (limit * period, ...) stay below this. */
#define RL_MAX_PRODUCT ((int64_t)1 << 51)

/* ---- URLs (url.c) ---- */

typedef enum { RL_MODE_STANDALONE = 0, RL_MODE_SENTINEL = 1, RL_MODE_CLUSTER = 2 } rl_mode;

typedef struct {
    char *host;
    int port;
} rl_addr;

typedef struct {
    rl_mode mode;
    int tls;
    rl_addr *addrs; /* standalone: the server; sentinel: the sentinels; cluster: seeds */
    int naddrs;
    char *unix_path;
    char *user;
    char *password;
    char *service;           /* sentinel: the master's name */
    char *sentinel_user;     /* sentinel: AUTH for the sentinels themselves */
    char *sentinel_password;
    int db;
    char *tls_ca_file;
    char *tls_cert_file;
    char *tls_key_file;
    rl_tls_verify tls_verify;
} rl_url;

int rl_url_parse(const char *url, rl_url *out);
void rl_url_free(rl_url *url);

/* ---- connections (conn.c) ---- */

/* Paces reconnect attempts to something unreachable: after a failure, calls
 * fail at once until retry_at; then one caller probes while the rest keep
 * failing fast. */
typedef struct {
    int failures;
    int probing;
    int64_t retry_at_ms;
    int status;
    char message[200];
} rl_backoff;

typedef struct rl_node rl_node;

typedef struct {
    redisContext *ctx;
    rl_node *node;
    void *ssl; /* SSL *, owned by ctx; NULL on a plain connection */
} rl_conn;

/* One server (address) and its pool of idle connections. Nodes live until
 * the client closes, so pointers to them stay valid without counting. */
struct rl_node {
    char *host; /* or the unix socket path (port 0) */
    int port;
    pthread_mutex_t mutex;
    pthread_cond_t available;
    rl_conn **idle; /* pool_size slots */
    int idle_count;
    int open_count; /* idle + checked out */
    int behind;     /* a call's reply did not come in time, and none has since: one call at a time */
    rl_backoff backoff;
};

#define RL_CLUSTER_SLOTS 16384

typedef struct rl_async rl_async;

/* ---- fork safety (fork.c) ---- */

/* What a tracked object does around fork(): lock takes every lock it has
 * (before the fork), unlock releases them (in the parent), start_afresh
 * releases them and drops what the child cannot use (in the child). */
typedef struct rl_fork_hooks {
    struct rl_fork_hooks *prev, *next;
    void (*lock)(struct rl_fork_hooks *self);
    void (*unlock)(struct rl_fork_hooks *self);
    void (*start_afresh)(struct rl_fork_hooks *self);
} rl_fork_hooks;
void rl_fork_track(rl_fork_hooks *hooks);
void rl_fork_untrack(rl_fork_hooks *hooks);
void rl_fork_track_client(rl_client *client); /* client.c: its hooks */
/* In a child: what is deliberately never freed (kept reachable) */
void rl_fork_leave(void *what);

/* Blocking decisions out at once, and the callers queued behind them
 * (combine.c) */
typedef struct rl_combined rl_combined;
typedef struct {
    pthread_mutex_t mutex;
    rl_combined *head, *last; /* oldest first */
    int leaders; /* plain decisions out: alone, or leading a batch */
} rl_combining;

struct rl_client {
    rl_fork_hooks fork_hooks; /* first: the hooks' self is the client */
    rl_url url; /* TLS fields merged with the options */
    rl_options options;
    char *prefix;
    void *tls; /* SSL_CTX * when the URL is rediss */
    char *tls_trust; /* without ssl_ca_certs: the CA file or directory verifying servers (messages) */
    int certificate_refused; /* a server's certificate failed our checks (set, never cleared) */

    pthread_mutex_t topology; /* guards what follows */
    pthread_cond_t discovered; /* a discovery finished */
    rl_node **nodes;
    int node_count, node_cap;
    rl_node *master;        /* standalone and sentinel: where commands go; NULL = ask the sentinels */
    rl_node **slots;        /* cluster: slot -> master, RL_CLUSTER_SLOTS entries */
    rl_backoff discovery;   /* sentinel / cluster: asking where the masters are */
    int64_t refresh_due_ms; /* cluster: refresh the slot map at or after this (0 = not due) */
    int next_sentinel;      /* the sentinel that answered last is asked first */
    rl_async *async;        /* the I/O thread, started by the first rl_submit */
    rl_combining combining; /* overlapping blocking decisions share batch calls */
    struct rl_stats *stats; /* metrics (stats.c): made by the first counted decision */
    struct rl_config_cache *configs; /* stored specs (config.c) */
    struct rl_leases *leases; /* leases (lease.c); NULL: none taken (out of memory) */
    int64_t (*leases_tick)(rl_async *a, int64_t now); /* their timer on the I/O thread (rl_leases_tick) */
    char id[65];            /* rl_client_id: per-client quotas */
    int64_t calls;          /* calls in flight and the closing state (calls.c; atomic) */
    void (*closing_work)(rl_client *c); /* after the last call (closing.c's; set by rl_client_open) */
    int stop_waits;         /* rl_client_shutdown's: blocking waits return RL_ERR_CLOSED (atomic) */
    int shut_down;          /* the work after the last call is done (atomic) */
};

/* ---- calls in flight (calls.c) ---- */

/* The rest of the scope is a call in flight on client (rl_client_close
 * waits for it); after rl_client_shutdown the function returns
 * RL_ERR_CLOSED instead. At the top of every public function that takes a
 * client, but the accessors (prefix, id, keys). The core builds with
 * -fexceptions, so a thread cancelled inside a call leaves it too (glibc;
 * elsewhere cancellation waits until the call returns, calls.c). */
#define RL_IN_FLIGHT(client) RL_IN_FLIGHT_ELSE(client, (void)0)
/* the same, with what to do before returning RL_ERR_CLOSED */
#define RL_IN_FLIGHT_ELSE(client, ...)                                                                    \
    rl_client *rl_in_flight_ __attribute__((cleanup(rl_call_scope_end))) = (rl_client *)(client);        \
    if (rl_in_flight_ && rl_call_begin(rl_in_flight_)) {                                                  \
        rl_in_flight_ = NULL;                                                                             \
        __VA_ARGS__;                                                                                      \
        return RL_ERR_CLOSED;                                                                             \
    }
int rl_call_begin(rl_client *client);
void rl_call_end(rl_client *client);
void rl_call_scope_end(rl_client **client);
/* rl_client_shutdown refuses new calls: 1 when this thread is to do the
 * closing work; rl_client_close waits until every call left and it is done. */
int rl_calls_refuse(rl_client *client, int stop_waits);
void rl_calls_wait_out(rl_client *client);
/* In a forked child: the parent's calls in flight did not come along. */
void rl_calls_start_afresh(rl_client *client);
/* Blocking waits poll this: RL_ERR_CLOSED once rl_client_shutdown stopped
 * them; rl_client_sleep is rl_sleep that stops so too. */
int rl_waits_stopped(const rl_client *client);
int rl_client_sleep(rl_client *client, int64_t ms, const rl_wait *wait);

/* ---- closing (closing.c) ---- */

/* After the last call: gives the leases back, stops the I/O thread, closes
 * the pooled connections (the client's closing_work). */
void rl_closing_work(rl_client *client);
/* Frees what rl_client_open made (client.c). threads.c: rl_async_stop
 * completes what is in flight with RL_ERR_CLOSED and stops the I/O thread;
 * rl_async_free joins it (if it stopped itself: called on it) and frees. */
void rl_client_free(rl_client *client);
void rl_async_stop(rl_client *client);
void rl_async_free(rl_client *client);

/* ---- stored specs (config.c) ---- */

typedef struct rl_config_cache rl_config_cache;
rl_config_cache *rl_config_cache_new(void);
void rl_config_cache_free(rl_config_cache *cache);
void rl_config_cache_lock(rl_config_cache *cache);
void rl_config_cache_unlock(rl_config_cache *cache);
/* The spec stored for name (cached for config_refresh_ms); RL_ERR_INVALID
 * when none is stored. */
int rl_config_resolve(rl_client *client, const char *name, rl_spec *out);

/* ---- metrics (stats.c): counted where a decision's result is final ---- */

typedef struct rl_stats rl_stats;
typedef struct rl_stats_entry rl_stats_entry;
/* A decision under way on the asynchronous path: its name's counters (NULL:
 * not counted) and when it was submitted. */
typedef struct {
    rl_stats_entry *entry;
    int64_t start_us;
} rl_stats_mark;

/* The blocking path: the clock at the start of rl_execute (0 with metrics
 * off), then every request counted by its outcome once final. */
int64_t rl_stats_start(const rl_client *client);
void rl_stats_execute(rl_client *client, const rl_request *requests, size_t n, const rl_result *results,
                      const rl_outcome *outcomes, int64_t start_us);
/* The asynchronous path: rl_submit marks, the completion counts. */
void rl_stats_begin(rl_client *client, const char *name, rl_stats_mark *mark);
void rl_stats_end(const rl_stats_mark *mark, int status, const rl_result *result);
void rl_stats_free(rl_stats *stats);
/* a LEASE or GIVE_BACK script call for name */
void rl_stats_lease_call(rl_client *client, const char *name);


/* Redis cannot be reached, did not answer in time, or is behind: the
 * on_error policy decides a rate limit. */
static inline int rl_unreachable(int status)
{
    return status == RL_ERR_CONNECTION || status == RL_ERR_TIMEOUT || status == RL_ERR_BACKLOG;
}

/* errors: set the thread's message and return the status */
int rl_fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* RL_ERR_INVALID for param (its C name; "_ms": milliseconds) out of
 * min..max, with the parts kept for rl_errrange; context (or NULL) says
 * what the bound depends on, e.g. "for this rate" */
int rl_fail_range(const char *param, const char *context, int64_t value, int64_t min, int64_t max);
void rl_clear_error(void);

/* nodes and pools */
rl_node *rl_node_for(rl_client *client, const char *host, int port); /* find or add; NULL: no memory */
int rl_conn_get(rl_client *client, rl_node *node, rl_conn **out);
void rl_conn_put(rl_client *client, rl_conn *conn);
/* A call on node got its replies in time (or timed out waiting: behind). */
void rl_node_answered(rl_node *node, int in_time);
/* A connection of its own (SUBSCRIBE, sentinels); close with rl_conn_close. */
int rl_conn_open(rl_client *client, rl_node *node, const char *password, const char *user, int db, rl_conn **out);
void rl_conn_close(rl_conn *conn);
/* A connection for commands: the URL's credentials and database. */
int rl_conn_open_data(rl_client *client, rl_node *node, rl_conn **out);
/* One command, sent without ever raising SIGPIPE; NULL on a broken connection. */
redisReply *rl_command(rl_conn *conn, int argc, const char **argv, const size_t *lens);
/* Writes the output buffer / reads one reply, never raising SIGPIPE. */
int rl_conn_flush(rl_conn *conn);
int rl_conn_read(rl_conn *conn, void **reply);
/* The same, the whole reply by read_by_ms (rl_now_ms), timeout_ms
 * being the socket's own (command_timeout_ms): the socket's timeout bounds
 * each read, so a reply trickling in would otherwise never time out. */
int rl_conn_read_by(rl_conn *conn, void **reply, int64_t read_by_ms, int timeout_ms);
/* Non-blocking connections (the I/O thread): write what fits now; read what came. */
int rl_conn_flush_some(rl_conn *conn);
int rl_conn_buffer_read(rl_conn *conn);
/* Maps a failed connection to RL_ERR_TIMEOUT / RL_ERR_CONNECTION with a message. */
int rl_conn_error(rl_conn *conn, const char *what);
int rl_tls_setup(rl_client *client);
void rl_tls_free(rl_client *client);
void rl_node_free(rl_node *node);
/* In a forked child: what the parent's threads left (fork.c; threads.c) */
void rl_conn_abandon(rl_conn *conn);
void rl_async_abandon(rl_client *client);

/* ---- topology (topology.c): where a command goes ---- */

/* The node serving slot (-1: any) right now: the standalone server, the
 * master the sentinels name, or the cluster slot's master. */
int rl_route(rl_client *client, int slot, rl_node **out);
/* The same without ever asking the network (the I/O thread): *due says a
 * discovery should run; RL_ERR_CONNECTION when no server is known yet. */
int rl_route_cached(rl_client *client, int slot, rl_node **out, int *due);
/* One slot of each cluster master (its lowest), to run a command on every
 * master (SCAN); outside a cluster one -1 ("the server"). Returns how many
 * there are (write at most max), or a negative status. */
int rl_master_slots(rl_client *client, int *out, int max);
/* node failed us (broken connection, READONLY, cannot connect): look again. */
void rl_topology_suspect(rl_client *client, rl_node *node);
/* a MOVED reply: slot now lives at host:port */
void rl_cluster_moved(rl_client *client, int slot, const char *host, int port);
/* Eager first contact (rl_client_open with the raise policy). */
int rl_topology_connect(rl_client *client);
int rl_key_slot(const char *key, size_t len);
int rl_backoff_check(rl_backoff *b, int64_t now);
void rl_backoff_failed(rl_backoff *b, int status, int64_t now, int max_ms);
void rl_backoff_ok(rl_backoff *b);
/* a connect attempt's outcome: failed (connection / timeout) or ok */
void rl_backoff_record(rl_backoff *b, int status, int max_ms);

/* ---- commands (command.c) ---- */
/* A command under construction: argv with owned storage. */
/* EVALSHA sha nkeys, a key and 3 numbers per rate, 6 more numbers, and
 * (GIVE_BACK) a lease's handle per rate */
#define RL_CMD_MAX_ARGS (3 + 5 * RL_MAX_RATES + 6)
typedef struct {
    int argc;
    const char *argv[RL_CMD_MAX_ARGS];
    size_t lens[RL_CMD_MAX_ARGS];
    char *owned[RL_CMD_MAX_ARGS];
    char ints[RL_CMD_MAX_ARGS][24]; /* integer args live here: no malloc */
    char text[512];                 /* and keys, while they fit */
    size_t text_used;
    int script; /* RL_SCRIPT_* for EVALSHA, else -1 */
    int slot;   /* cluster slot of the first key, -1 without keys */
    int failed; /* out of memory while building */
    int batchable; /* a plain decision (limit.lua, ops 0..4): may share a batch call (command.c) */
    int short_form; /* limit.lua's short form: its numbers in packed (rl_cmd_short_form) */
    unsigned char packed[5 * 8];
} rl_cmd;

/* decisions in one batch call at most (rl_options.max_batch) */
#define RL_MAX_BATCH 100

void rl_cmd_init(rl_cmd *cmd);
void rl_cmd_free(rl_cmd *cmd);
/* cmd moved to to, which owns what it owned (from is left to drop, not to free) */
void rl_cmd_move(rl_cmd *to, const rl_cmd *from);
void rl_cmd_str(rl_cmd *cmd, const char *s, size_t len);
void rl_cmd_cstr(rl_cmd *cmd, const char *s);
/* a copy owned by cmd (for commands that outlive the caller's strings) */
void rl_cmd_copy(rl_cmd *cmd, const char *s, size_t len);
void rl_cmd_int(rl_cmd *cmd, int64_t value);
void rl_cmd_short_form(rl_cmd *cmd, const int64_t numbers[5]);
/* The one key format: prefix ":{" tag "}:" suffix, the tag being the
 * entity's (keys.c); id NULL for entities with a name only. snprintf
 * semantics; negative when out of memory. */
int rl_format_key(char *buf, size_t size, const rl_client *client, const char *name, const char *id,
                  const char *suffix);
/* the same key, appended to cmd and owned by it */
void rl_cmd_key(rl_cmd *cmd, const rl_client *client, const char *name, const char *id, const char *suffix);
/* the same for a per-client quota: owner is the client's id (NULL: overall) */
void rl_cmd_entity_key(rl_cmd *cmd, const rl_client *client, const char *name, const char *id, const char *owner,
                       const char *suffix);
/* keys.c: the escaped hash tag of an entity (malloc'd; owner as above), and
 * SHA-256 in hex */
char *rl_entity_tag(const char *name, const char *id, const char *owner);
/* the same tag written at out (no NUL), or out NULL: its length only */
size_t rl_entity_tag_write(const char *name, const char *id, const char *owner, char *out);
void rl_sha256_hex(const void *data, size_t len, char *hex);
/* Ids may be long (they are hashed into the key past 256 bytes). */
#define RL_ID_MAX (1024 * 1024)
/* The publish / subscribe commands the scripts and waiters use: sharded in a
 * cluster so a wake-up reaches only the entity's shard. */
const char *rl_publish_command(const rl_client *client);
/* EVALSHA script nkeys: the caller appends keys and args after this */
void rl_cmd_script(rl_cmd *cmd, int script, int nkeys);
/* redisAppendCommandArgv without its formatting cost */
int rl_append_command(redisContext *ctx, int argc, const char **argv, const size_t *lens);
/* writes a RESP header ("*3\r\n", "$5\r\n") at p; returns its end */
char *rl_resp_header(char *p, char kind, size_t n);

/* ---- batches (command.c): several plain decisions in one call of limit.lua ---- */

/* n >= 2 batchable commands (rl_cmd.batchable, one slot in a cluster) as
 * one EVALSHA of limit.lua's batch form */
int rl_append_batch(redisContext *ctx, const rl_cmd *const *cmds, size_t n);
/* reply answers a batch of n: its n elements are the decisions' own replies */
int rl_batch_reply_ok(const redisReply *reply, size_t n);

/* ---- the blocking engine (run.c) ---- */

/* Sends n commands pipelined on one connection and reads the n replies.
 * Script calls answered NOSCRIPT are loaded and re-sent once (they did not
 * run). Never re-sends anything else. replies[i] must be freed by the caller
 * with rl_reply_free on RL_OK; on error all are NULL. */
int rl_run(rl_client *client, rl_cmd *cmds, size_t n, redisReply **replies);
/* The same, each command with its own outcome: replies[i] is set (to free)
 * exactly when outcomes[i].status is RL_OK; an error reply is its command's
 * RL_ERR_REDIS. A failure (a server unreachable, a timeout, a lost
 * connection) fails only the commands it left without a reply. Returns the
 * first command's failure (its message in rl_errmsg()), else RL_OK. */
int rl_run_each(rl_client *client, rl_cmd *cmds, size_t n, redisReply **replies, rl_outcome *outcomes);

/* ---- the request protocol (protocol.c): one policy for both engines ---- */

/* Sends of one command after replies that prove it did not run and are
 * cured at once (NOSCRIPT), and a blocking call's reroutes around a server
 * it cannot connect; redirects and "not now" end at the command timeout. */
#define RL_MAX_RESENDS 16
/* Plans cmds[0..m) as calls: runs of batchable ones (not alone[k]: after
 * ASKING) as batch calls of up to max_batch, in a cluster one slot's each
 * (nothing overtakes what is not batched). ord: positions in sending order,
 * len: each call's length, placed[k]: 2 if k went ahead of an earlier one. */
size_t rl_plan_calls(const rl_client *c, const rl_cmd *const *cmds, const char *alone, size_t m, size_t *ord,
                     size_t *len, char *placed);
int rl_append_call(redisContext *ctx, const rl_cmd *const *cmds, size_t n); /* n >= 2: a batch call */
/* Decision i's part of a batch call's reply (ok: rl_batch_reply_ok): its
 * element, an error for the whole call, else an empty array (a protocol
 * error when decoded). */
const redisReply *rl_batch_part(const redisReply *reply, int ok, size_t i);
/* Replies that prove a command did not run (it may be sent again). */
typedef enum { REPLY_FINAL, REPLY_MOVED, REPLY_ASK, REPLY_LATER, REPLY_READONLY } rl_reply_verdict;
rl_reply_verdict rl_classify_reply(const rl_client *c, const redisReply *r, int *slot, char *host, size_t host_size,
                             int *port);
/* classified and acted on (MOVED: the slot map, READONLY: suspect from);
 * ASK sets *ask, the node to send to next (NULL: out of memory) */
rl_reply_verdict rl_follow_reply(rl_client *c, const redisReply *r, rl_node *from, rl_node **ask);
int rl_reply_is_noscript(const redisReply *r);
/* NOSCRIPT for cmd, sent again tries times: load its script, send it again */
int rl_reload_wanted(const rl_cmd *cmd, const redisReply *r, int tries);
void rl_script_load_command(int script, const char *argv[3], size_t lens[3]);
/* The pause before sending again a command redirected (MOVED, ASK) or told
 * "not now" (later: TRYAGAIN, CLUSTERDOWN, LOADING...) for the tries-th time,
 * previous_ms being the last pause: redirects are followed at once
 * RL_FREE_REDIRECTS times (a slot moved), then both pause 5 ms, doubling up
 * to 100 ms, until the command timeout runs out (the last step of a
 * migration, where two masters redirect to each other; a failover). */
#define RL_FREE_REDIRECTS 3
int64_t rl_retry_pause_ms(int64_t previous_ms, int tries, int later);
/* Redis unreachable, the on_error policy decides (capacity: rl_spec_capacity) */
void rl_fallback_result(const rl_client *client, int64_t capacity, int64_t permits, rl_result *out);

/* decisions, shared by rl_execute, rl_submit and leases (decision_commands.c;
 * rl_resolve_stored, rl_build_reset: limiter.c) */
int rl_validate_request(const rl_request *req);
int rl_resolve_stored(rl_client *client, const rl_request *req, rl_request *out);
/* config.c: rl_config_resolve's two halves, for the I/O thread, which never
 * waits for Redis: 1 when the cache answers (*rc: RL_OK, out set, or why
 * not), 0 when name must be read (the command: rl_config_read_command);
 * the read's status and reply taken in: cached, and rl_config_resolve's answer */
int rl_config_cache_lookup(rl_client *client, const char *name, rl_spec *out, int *rc);
void rl_config_read_command(rl_cmd *cmd, const rl_client *client, const char *name);
int rl_config_read_done(rl_client *client, const char *name, int status, const redisReply *reply, rl_spec *out);
void rl_build_decision(rl_cmd *cmd, const rl_client *client, const rl_request *req);
/* protocol.c: limit.lua's reply to one decision */
int rl_decode_result(const redisReply *r, rl_result *out);
/* combine.c: a valid plain decision of rl_execute's. ALONE: fewer than
 * pool_size are out: send it directly, then rl_combine_done; QUEUE: build
 * its command for rl_combine_decide, which takes it over and returns
 * DECIDED (it went in a batch call: *outcome, and *result, say how) or
 * UNCOUNTED (no memory: send it directly). */
enum { RL_COMBINE_ALONE, RL_COMBINE_QUEUE, RL_COMBINE_DECIDED, RL_COMBINE_UNCOUNTED };
int rl_combine_enter(rl_client *c);
int rl_combine_decide(rl_client *c, rl_cmd *cmd, rl_result *result, rl_outcome *outcome);
void rl_combine_done(rl_client *c);
void rl_combine_pass(rl_combining *q); /* rl_combine_done with q->mutex held */
void rl_combining_init(rl_combining *q);
void rl_combining_destroy(rl_combining *q);
void rl_combining_start_afresh(rl_combining *q);
/* DEL of every key of (name, id) under spec (NULL: the stored one, read
 * now if not cached); decision_commands.c: under spec, after its checks */
int rl_build_reset(rl_cmd *cmd, rl_client *client, const char *name, const char *id, const rl_spec *spec);
int rl_build_delete(rl_cmd *cmd, const rl_client *client, const char *name, const char *id, const rl_spec *spec);
int64_t rl_spec_capacity(const rl_spec *spec);
/* rate.c: a spec's rates, the first one first */
size_t rl_spec_rates(const rl_spec *spec, rl_rate *out);
/* rate.c: "4/minute", "5/30 seconds", "3/500ms" (snprintf's return) */
int rl_format_rate(char *buf, size_t size, int64_t limit, int64_t period_ms);

/* ---- leases (lease.c; the table and its decisions: lease_policy.c) ---- */

typedef struct rl_leases rl_leases;
rl_leases *rl_leases_new(void);
/* the I/O thread's timer (the client's leases_tick): gives back expired
 * blocks; returns the next time to look, or -1 */
int64_t rl_leases_tick(rl_async *a, int64_t now);
void rl_leases_free(rl_leases *leases);
/* in a forked child: the parent's leases are the parent's */
void rl_leases_abandon(rl_client *client);
/* req is decided through this client's leases (lease_ms, acquire or up to,
 * Redis time) */
int rl_lease_applies(const rl_client *client, const rl_request *req);
/* What a batch does with each request (rl_leases_plan). */
enum { RL_PLAN_PLAIN = 0, RL_PLAN_FETCH = 1, RL_PLAN_DONE = 2 };
/* A batch's leased requests: decided from memory (DONE, result or outcome
 * set), or fetching their block (FETCH, wants[i] permits), or PLAIN. */
void rl_leases_plan(rl_client *client, const rl_request *requests, size_t n, rl_result *results,
                    rl_outcome *outcomes, char *plan, int64_t *wants);
void rl_lease_build_fetch(rl_cmd *cmd, rl_client *client, const rl_request *req, int64_t want);
/* A blocking fetch ended (sent at sent_ms, monotonic): RL_OK with req's
 * result, RL_LEASE_AGAIN (ask again without the lease), or an error. */
#define RL_LEASE_AGAIN 1
int rl_lease_fetched(rl_client *client, const rl_request *req, int status, const redisReply *reply,
                     int64_t sent_ms, rl_result *out);
/* A blocking fetcher's GIVE_BACK of the block it ended, to send just before
 * its LEASE; 0 when none is owed. */
int rl_lease_build_give_back(rl_cmd *cmd, rl_client *client, const rl_request *req);
/* Ends this client's leases of name (NULL: all) and id (NULL: all). */
enum {
    RL_LEASES_DROP,          /* a reset: nothing given back, a fetch under way drops its block */
    RL_LEASES_GIVE_BACK,     /* their GIVE_BACKs queued on the I/O thread */
    RL_LEASES_GIVE_BACK_NOW  /* sent now, one round trip per server (command timeout) */
};
void rl_leases_end(rl_client *client, const char *name, const char *id, int how);

/* primitive_commands.c: the semaphore / lock / queue checks and commands,
 * shared by the blocking calls (sync.c) and rl_submit_* (every argument
 * copied into cmd) */
int rl_build_sem_call(rl_cmd *cmd, rl_client *client, const char *kind, const char *name, const char *op,
                      const char *id, int64_t max, int64_t lease, int enqueue);
int rl_build_queue_push(rl_cmd *cmd, rl_client *client, const char *queue, const char *message, size_t len,
                        int64_t delay_ms);
int rl_check_sem_acquire(rl_client *client, const char *name, int64_t max, int64_t lease);
int rl_check_permit_call(rl_client *client, const char *name, const char *id);
int rl_check_queue_push(rl_client *client, const char *queue, const char *message, size_t len, int64_t delay_ms);
int rl_build_queue_pop(rl_cmd *cmd, rl_client *client, const char *queue, size_t max);
/* ZCARD / ZREM on a queue (message NULL for ZCARD), after its checks */
int rl_build_queue_call(rl_cmd *cmd, rl_client *client, const char *queue, const char *message, size_t len);
int rl_check_semaphore_info(rl_client *client, const char *name, int64_t permits_max);
int rl_check_queue_pop(rl_client *client, const char *queue, size_t max, int64_t timeout_ms);
int rl_new_permit_id(char *out);
/* A waiter's (or, id NULL, a queue's) wake-up channel; malloc'd, NULL: no
 * memory. kind: "semaphore", "lock", "delay_queue". */
char *rl_wake_channel(const rl_client *client, const char *name, const char *kind, const char *id);
/* A waiter checks in at least every RL_WAITER_TTL_MS / 3; one that stops
 * (crashed) leaves the queue after RL_WAITER_TTL_MS so it cannot block those
 * behind it. */
#define RL_WAITER_TTL_MS 3000
#define RL_QUEUE_POP_MAX 10000
#define RL_MAX_PERMITS 1000000

/* completions.c: room for one completion, made when its request is
 * submitted (RL_ERR_NOMEM fails that request), taken back if it is not
 * queued after all; posting it (the I/O thread) then never allocates. */
int rl_completions_reserve(rl_completions *q);
void rl_completions_unreserve(rl_completions *q);
void rl_completions_push(rl_completions *q, const rl_completion *c);

/* protocol.c: element index of a script's reply, an integer */
int rl_reply_int(const redisReply *r, size_t index, int64_t *out);
/* reply.c: a reader that puts each reply in one block (rl_conn_open sets it
 * up on every connection); such a reply is freed with rl_reply_free, the
 * root only: its elements go with it */
void rl_reply_use(redisReader *reader);
void rl_reply_free(void *reply);
/* r (a reply or one of its elements) as a reply of its own; NULL: no memory */
redisReply *rl_reply_copy(const redisReply *r);
/* redisReaderGetReply, a limiter's reply (integers) read without it */
int rl_reader_get_reply(redisReader *reader, void **reply);
/* hiredis's freeReplyObject on one of them frees memory it never allocated
 * (RL_HIREDIS_REPLIES: a test that also reads replies of its own hiredis) */
#ifndef RL_HIREDIS_REPLIES
#pragma GCC poison freeReplyObject
#endif

/* error.c: validation helpers: name non-empty, value in range */
int rl_check_name(const char *what, const char *value);
int rl_check_id(const char *id); /* non-empty, at most RL_ID_MAX bytes */
int rl_check_range(const char *what, int64_t value, int64_t min, int64_t max);
/* rate.c: the algorithms' names, by rl_algorithm (valid ones only) */
extern const char *const rl_algorithm_names[RL_ALGORITHM_COUNT];

/* CLOCK_REALTIME + ms, for pthread_cond_timedwait */
struct timespec rl_realtime_after(int ms);
/* calls.c: sleeps up to ms, in slices, polling cancel; RL_ERR_CANCELLED if it fired. */
int rl_sleep(int64_t ms, const rl_wait *wait);

/* Reply decoders, reachable from the fuzz targets (fuzz/). */
/* CLUSTER SLOTS into map (RL_CLUSTER_SLOTS entries); nodes come from rl_node_for */
int rl_parse_slots(rl_client *client, const redisReply *r, const char *asked_host, rl_node **map);
/* SENTINEL get-master-addr-by-name; RL_ERR_PROTOCOL (no message) when it names no master */
int rl_sentinel_master_addr(const redisReply *r, char **host, int *port);
/* primitive_commands.c: semaphore.lua acquire; delay_queue.lua pop (out owns
 * what it holds, even on error) */
int rl_decode_sem_acquire(const redisReply *r, int *granted, int64_t *fence, int64_t *first_lease_end);
int rl_decode_queue_pop(const redisReply *r, rl_messages *out, int64_t *next_in);
/* an integer reply (delay_queue push, ZCARD, ZREM); what names it in the error */
int rl_decode_integer(const redisReply *r, const char *what, int64_t *out);

#endif
