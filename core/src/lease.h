/* Leases: the policy (lease_policy.c: the table and its decisions, no
 * client, connection or thread) and what carries it (lease.c: commands,
 * the blocking path, ending leases, the timer; lease_async.c: submissions
 * parked on a fetch); not installed. */
#ifndef RL_LEASE_H
#define RL_LEASE_H

#include "internal.h"

#define OP_LEASE 5
#define OP_GIVE_BACK 6
#define LEASE_BUCKETS 4096
/* past it, new keys are decided by Redis as without a lease (hostile ids
 * cannot grow memory) */
#define LEASE_MAX_ENTRIES 100000
#define LEASE_MAX_BLOCK ((int64_t)1 << 20)
#define LEASE_HANDLE_MAX 120
/* an entry with nothing in hand and unused this long is freed */
#define LEASE_IDLE_FREE_MS 10000

/* A submission waiting for the fetch in progress. */
typedef struct rl_parked {
    struct rl_parked *next;
    uint64_t tag;
    rl_target target; /* room in target.queue reserved */
    int64_t permits, capacity;
    rl_op op;
    rl_stats_mark stats;
} rl_parked;

/* What Redis's clock can be ahead of ours (rl_now_ms), at most, as of
 * at_ms (0: not known yet): a grant read at server_ms between our s and r
 * says the offset lies in [server_ms - r, server_ms - s]. */
typedef struct {
    int64_t ahead_ms, at_ms;
} rl_server_clock;

typedef struct rl_lease {
    struct rl_lease *next;
    uint64_t hash;
    char *name, *id;
    rl_spec spec;
    int64_t lease_ms;
    int64_t last_used_ms;
    int users; /* blocking callers waiting on it: not freed meanwhile */
    /* the block: left of block permits, decided on until valid_until_ms
     * (monotonic, from before the LEASE was sent) */
    int64_t block, left, taken_at_ms, valid_until_ms;
    rl_result grant; /* the LEASE reply: limit, remaining for others, reset_after, rate_index */
    int64_t granted_server_ms; /* Redis's clock at the grant */
    int slot; /* its keys' cluster slot (0 off a cluster) */
    /* the block a blocking fetcher ended: its GIVE_BACK goes just before the
     * next LEASE, in the same pipeline (after it, it would not be on top) */
    int pending;
    int64_t pending_left;
    int nhandles;
    char handles[RL_MAX_RATES][LEASE_HANDLE_MAX + 1];
    int64_t size; /* the next block asked for */
    /* a grant of 0 ms (a window's last ms; a spec with tau < 2 ms) is a
     * retry-later: plain until plain_until_ms, the wait doubling while
     * they come (up to lease_ms), so a spec that can never lease costs one
     * LEASE per lease_ms */
    int64_t plain_until_ms, plain_for_ms;
    /* single flight */
    int fetching;
    const void *fetcher;        /* the blocking batch fetching; NULL: a submission */
    unsigned fetches;           /* fetches ended so far */
    int fetch_status;           /* how the last one ended */
    char fetch_error[200];
    /* ending the leases (a reset, a refund, a spec change, a server clock
     * step) drops what an older fetch brings, but for its fetcher's result */
    unsigned generation, fetch_generation;
    rl_parked *parked;
    /* a denial remembered: calls needing >= denied_permits are denied until denied_until_ms */
    int64_t denied_permits, denied_at_ms, denied_until_ms;
    rl_result denial;
} rl_lease;

struct rl_leases {
    pthread_mutex_t mutex;
    pthread_cond_t fetched;
    size_t count;
    int64_t next_due_ms; /* the timer's next look (0: nothing to watch); written locked, read atomically */
    rl_lease *buckets[LEASE_BUCKETS];
    /* per cluster slot (one off a cluster: every key on one server); made
     * at the first grant; NULL: not watched (memory out) */
    rl_server_clock *clocks;
};

typedef enum {
    STEP_LOCAL, /* decided: out holds it */
    STEP_FETCH, /* this caller fetches the next block (want) */
    STEP_BUSY,  /* another fetch is in progress */
    STEP_PLAIN  /* ask Redis as without a lease */
} rl_lease_step;

/* How the fetcher's own request came out of its fetch. */
typedef enum { GOT_RESULT, GOT_ERROR, GOT_PLAIN } rl_lease_got;

/* ---- the policy (lease_policy.c); the caller holds the table's lock ---- */

/* What the policy wants sent, handed to whoever carries it: a GIVE_BACK
 * of unused permits of e's block (its handles still in e). */
typedef struct {
    void (*give_back)(void *ctx, const rl_lease *e, int64_t unused);
    void *ctx;
} rl_lease_carrier;

/* The entry for req, made if new (create); NULL when the table is full or
 * memory out. */
rl_lease *rl_lease_entry(rl_leases *t, const rl_request *req, int64_t now, int create);
/* the bucket of an entity's entries (every spec of it) */
int rl_lease_bucket(const char *name, const char *id);
/* A write of ours that can free permits on e's entity (a give-back, a
 * refund, a reset, a rate change): Redis may admit what its denials said no to. */
void rl_lease_forget_denials(rl_leases *t, const rl_lease *e);
int rl_lease_worth_giving_back(const rl_lease *e, int64_t now);
/* Ends the block in hand (the next size adapts); carry (NULL: none) gets
 * its GIVE_BACK if one is worth it. */
void rl_lease_end_block(rl_lease *e, int64_t now, const rl_lease_carrier *carry);
/* A decision from the block in hand or a remembered denial: 1 with out set,
 * else 0 and e untouched. */
int rl_lease_decide_local(rl_lease *e, rl_op op, int64_t permits, int64_t now, rl_result *out);
/* One decision: a submission passes fetcher NULL; a blocking batch its own
 * token (a second request of the batch for a key it fetches goes PLAIN, and
 * the block it ends is given back just before its LEASE: e->pending). */
rl_lease_step rl_lease_decide(rl_lease *e, rl_op op, int64_t permits, int64_t now, const void *fetcher, rl_result *out,
                     int64_t *want, const rl_lease_carrier *carry);
/* The fetch of e (sent at sent_ms) ended at now with status, and on RL_OK
 * its reply: sets the fetcher's result (op, permits) or says it needs a
 * plain acquire; *wake_timer: the timer must look sooner; *stepped: Redis's
 * clock for e->slot stepped forward (t->clocks; the other leases on that
 * server must end). */
rl_lease_got rl_lease_granted(rl_leases *t, rl_lease *e, int status, const redisReply *reply, int64_t sent_ms, int64_t now,
                     rl_op op, int64_t permits, rl_result *out, int *wake_timer, int *stepped);
/* The timer: blocks past their validity end (carry gets their give-backs),
 * idle entries are freed; returns the next time to look (0: none). */
int64_t rl_leases_sweep(rl_leases *t, int64_t now, const rl_lease_carrier *carry);

/* ---- carrying it (lease.c, lease_async.c) ---- */

struct rl_areq;
/* The GIVE_BACKs a policy call asks for, as silent requests (rl_lease_send_all). */
typedef struct {
    rl_lease_carrier carrier;
    rl_client *client;
    struct rl_areq *list;
} rl_give_backs;
void rl_give_backs_init(rl_give_backs *g, rl_client *c);
/* rl_lease_granted for the fetch of e, read now: wakes the blocking waiters,
 * ends the leases on a server whose clock stepped. */
rl_lease_got rl_lease_fetched_locked(rl_client *c, rl_lease *e, int status, const redisReply *reply, int64_t sent_ms,
                            rl_op op, int64_t permits, rl_result *out, int *wake_timer);
void rl_lease_request(const rl_lease *e, rl_request *req, rl_op op, int64_t permits, int64_t max_wait);
void rl_lease_build(rl_cmd *cmd, rl_client *c, const rl_lease *e, int64_t want);

/* Without the lock: */
/* queues silent requests (GIVE_BACK) on the I/O thread, fire and forget */
void rl_lease_send_all(rl_client *c, struct rl_areq *list);
/* after a fetch of e ended: the submissions parked on it */
void rl_lease_serve_parked(rl_client *c, rl_lease *e, int wake_timer);
/* the fetch of e ended with status before a reply */
void rl_lease_fetch_failed(rl_client *c, rl_lease *e, int status);

#endif
