/* The asynchronous engine's own types and functions, shared by async.c (the
 * I/O thread), dialer.c (the dialer thread), threads.c (starting, stopping,
 * handing them requests), requests.c (a request's completion), waits.c
 * (waits on the I/O thread), and the features it carries: submit.c
 * (rl_submit_*), acquire_wait.c (timed acquires), lease_async.c and lease.c
 * (leases); not installed. */
#ifndef RL_ASYNC_H
#define RL_ASYNC_H


#include "internal.h"

/* REQ_DECISION..REQ_READ complete their submitter's request (a caller's,
 * or REQ_READ's feature); the others are ours. */
typedef enum {
    REQ_DECISION,
    REQ_ACQUIRE,
    REQ_DONE_FLAG, /* {done} from the semaphore script */
    REQ_PUSH,
    REQ_COUNT,     /* an integer reply: DEL, ZCARD, ZREM */
    REQ_INFO,      /* semaphore info: holders, or available out of permits */
    REQ_POP,
    REQ_READ,      /* a feature's own read: its reply goes to read_done, not to a target */
    REQ_ASKING,
    REQ_SCRIPT_LOAD
} rl_req_kind;

struct rl_aconn;
struct rl_lease;

/* One wake-up channel subscribed on a server's subscriber connection. */
typedef struct rl_achannel {
    struct rl_achannel *next;
    char *name;
    int refs;       /* waits that want it */
    int unacked;    /* (un)subscribe commands sent and not yet confirmed */
    int subscribed; /* what the last command sent asked for */
} rl_achannel;

/* A semaphore / lock acquire or a queue pop: what its later tries, its
 * wake-ups and its clean-up need. */
typedef struct rl_await {
    struct rl_areq *prev, *next; /* every unfinished one, on rl_async.waits */
    const char *kind;         /* "semaphore", "lock", "delay_queue" */
    char *name;
    int64_t max, lease;       /* acquire */
    int64_t until_ms;         /* the wait ends (monotonic) */
    int linked;               /* on rl_async.waits */
    int queued;               /* tries that keep a place in the semaphore's queue were sent */
    char *channel;
    struct rl_aconn *sub;        /* holds a reference to chan on this subscriber */
    rl_achannel *chan;
    int armed;                /* the try in flight was sent while subscribed */
    int woken;                /* a wake-up came while a try was in flight */
    int sleeping;             /* on rl_async.sleepers */
    int cancelled;
    rl_messages taken;        /* a pop's messages, until completed */
    /* a timed acquire (acquire_wait.c): what each try submits (its name
     * is name, its id id); request.name NULL for the others */
    rl_request request;
    char *id;
    int stored;               /* request.spec is the stored one: each later try looks again */
    struct rl_areq *joined;   /* the next wait for the same read of it (acquire_wait.c) */
    /* its step (acquire_wait.c's): taken in, back from a try, or its sleep
     * over; NULL for the others */
    void (*timed)(struct rl_async *a, struct rl_areq *r);
    struct rl_async *async;   /* set when the I/O thread first takes it */
} rl_await;

typedef struct rl_areq {
    struct rl_areq *next;
    rl_await *wait;          /* semaphore / lock acquire and queue pop */
    int silent;           /* a clean-up of ours (leave, release, push back): nobody to complete */
    rl_req_kind kind;
    uint64_t tag;
    rl_target target;
    int64_t capacity, permits; /* for the fallback decision */
    rl_stats_mark stats;  /* a decision's metrics (stats.c) */
    char permit_id[RL_PERMIT_ID_SIZE]; /* REQ_ACQUIRE: the id asked for */
    int64_t deadline_ms;  /* command timeout from submission */
    int64_t retry_at_ms;  /* waiting after TRYAGAIN / CLUSTERDOWN / ... */
    int64_t pause_ms;
    int64_t sent_ms;      /* appended to a connection's output */
    rl_node *ask;         /* an ASK redirect: the next send goes there, after ASKING */
    int redirects;
    int abandoned;        /* completed (timed out) while its reply is still due */
    int reserved;         /* its completion has room in target.queue (rl_completions_reserve) */
    int failed;           /* failed before it could be sent: completed with this status */
    char failure[200];    /* its message; or the last redirect or retry's reply */
    struct rl_lease *lease;  /* a LEASE fetching this lease's next block (lease_async.c) */
    /* set with lease (lease_async.c's): its reply came (1: r was sent again)
     * or, reply NULL, it failed with status */
    int (*lease_ended)(rl_async *a, struct rl_areq *r, int status, const redisReply *reply);
    rl_op lease_op;
    int64_t lease_sent_ms;
    char *reset_entity;   /* a reset's "name\0id": this client's leases on it are dropped again when it is done */
    void (*reset_done)(rl_client *c, const struct rl_areq *r); /* that, set with reset_entity (lease_async.c's) */
    int group;            /* sent as the first of a batch of group decisions: one reply for them all */
    int reordered;        /* sent ahead of decisions with earlier deadlines (a cluster's batches) */
    /* REQ_READ: its reply, or (reply NULL) why there is none, as it
     * completes on the I/O thread (a timed acquire's stored spec:
     * acquire_wait.c) */
    void (*read_done)(rl_async *a, void *ctx, int status, const redisReply *reply);
    void *read_ctx;
    int decided;          /* result (and decided_status) hold its decision already */
    int decided_status;
    rl_result result;
    rl_cmd cmd;           /* last: a new request zeroes what comes before only (cmd is 2 KB) */
} rl_areq;

typedef struct {
    rl_areq *head, *tail;
} rl_areq_list;

static inline void list_push(rl_areq_list *l, rl_areq *r)
{
    r->next = NULL;
    if (l->tail) l->tail->next = r;
    else l->head = r;
    l->tail = r;
}

static inline rl_areq *list_pop(rl_areq_list *l)
{
    rl_areq *r = l->head;
    if (r) {
        l->head = r->next;
        if (!l->head) l->tail = NULL;
        r->next = NULL;
    }
    return r;
}

typedef struct rl_aconn {
    rl_node *node;
    int sub;             /* the server's subscriber connection (wake-ups), not commands */
    rl_achannel *channels;  /* sub: what it is (or should be) subscribed to */
    rl_conn *conn;       /* NULL: not connected */
    int polling_out;     /* POLLOUT wanted: the socket took less than we had */
    rl_areq_list inflight;  /* sent (or buffered), replies due in this order */
    int count;           /* how many: at most max_in_flight, but for NOSCRIPT's re-sends */
    rl_areq_list staged;    /* plain decisions ready to go (counted): one batch call when written */
    int staged_count;
    rl_areq_list room;      /* routed here, waiting (unsent) for count to drop under max_in_flight */
    int resent;          /* of those, sent again (NOSCRIPT, MOVED...) or reordered: older deadlines among newer */
    unsigned loading;    /* scripts a SCRIPT LOAD was queued for on this connection */
    int64_t last_read_ms;
    int connecting;      /* the dialer is connecting it */
    rl_areq_list pending;   /* routed here, waiting for the connection */
} rl_aconn;

/* Connecting and asking the sentinels / cluster where servers are block for
 * up to a timeout, so the I/O thread hands them to a dialer thread and goes
 * on serving the servers it is connected to. */
typedef struct rl_dial {
    struct rl_dial *next;
    rl_aconn *ac;     /* NULL: a topology discovery */
    rl_conn *conn; /* the result */
    int status;
    char error[200];
} rl_dial;

struct rl_async {
    rl_client *client;
    pthread_t thread;
    pthread_mutex_t mutex; /* guards submitted, closing, sleeping */
    rl_areq_list submitted;
    int closing;
    int joined; /* the I/O thread was joined (rl_async_stop) */
    int sleeping; /* in poll: a submit must wake it */
    int io_submitted; /* its own callbacks submitted since (set and read on the I/O thread) */
    rl_fd wake_fds[2]; /* a pipe (rl_pipe): rl_async_wake writes, the I/O thread polls */
    /* the I/O thread's own */
    int64_t now_ms; /* rl_now_ms, read once per turn of its loop and per read (sent_ms) */
    rl_aconn **conns; /* one per server, never moved */
    int nconns, cap_conns;
    struct pollfd *polls; /* cap_conns + 1: the wake pipe, then conns[i]'s socket (-1: none) */
    rl_areq_list waiting; /* to dispatch again at retry_at_ms */
    rl_areq_list sleepers; /* waits between tries: at retry_at_ms or when woken */
    rl_areq *waits;        /* every unfinished wait (rl_await.prev / next) */
    struct rl_spec_read *spec_reads; /* stored specs read for timed acquires, one per name (acquire_wait.c) */
    uint64_t *cancels;  /* tags rl_cancel asked for; guarded by mutex */
    size_t cancel_count, cancel_cap;
    int stopping;       /* the I/O thread completes everything: no clean-ups any more */
    rl_areq_list unrouted; /* waiting for a discovery */
    int discovering;    /* a discovery is with the dialer */
    int64_t discover_after_ms;
    /* the dialer; jobs and results guarded by mutex */
    pthread_t dialer;
    pthread_cond_t dial_wanted;
    rl_dial *dial_jobs, *dial_done;
};

/* Decisions staged on one connection at most, per max_batch (a cluster's
 * interleaved slots group into several calls). */
#define RL_STAGED_PER_BATCH 4

/* async.c: the I/O thread */
void *rl_async_io_thread(void *arg);
void rl_async_wake(rl_async *a);
/* threads.c: the wake pipe closed, by the I/O thread as it ends (or a free) */
void rl_async_close_wake(rl_async *a);
/* the command connection to node, or (sub) its subscriber connection; NULL: no memory */
rl_aconn *rl_async_find_conn(rl_async *a, rl_node *node, int sub);
/* routes r and appends it to its server's output (or parks it) */
void rl_async_dispatch(rl_async *a, rl_areq *r);
/* fails what is in flight on ac (it may have run: never sent again) */
void rl_async_conn_drop(rl_async *a, rl_aconn *ac, int status);

/* dialer.c: the dialer thread */
void *rl_async_dialer(void *arg);
/* hands connecting ac (NULL: a topology discovery) to the dialer */
void rl_async_dial(rl_async *a, rl_aconn *ac);
void rl_async_want_discovery(rl_async *a);
/* dials nobody will use any more (closing) */
void rl_async_free_dials(rl_async *a);

/* requests.c: a request's life */
/* zeroed, cmd empty; NULL: no memory */
rl_areq *rl_async_req_new(rl_req_kind kind);
void rl_async_req_free(rl_areq *r);
/* tells r's caller (decoded reply, or status); r stays */
void rl_async_complete(rl_async *a, rl_areq *r, int status, const redisReply *reply);
/* r is done: completed (unless it was already) and freed */
void rl_async_finish(rl_async *a, rl_areq *r, int status, const redisReply *reply);
/* finishes everything on l with status and message */
void rl_async_fail_list(rl_async *a, rl_areq_list *l, int status, const char *message);

/* threads.c: hands r to the I/O thread (started if need be; its completion
 * room already reserved); on failure (closing) r is freed, its room kept */
int rl_async_send(rl_client *c, rl_areq *r);
/* starts the I/O thread if need be and has it look at its timers again */
void rl_async_poke(rl_client *c);

/* lease_async.c: the asynchronous side of leases (the I/O thread calls it
 * back through rl_areq's lease_ended and reset_done, and lease.c's timer
 * through the client's leases_tick) */
/* RL_OK when submitted through a lease (decided, parked or fetching), an
 * error, or RL_LEASE_NOT_TAKEN: send it as without a lease */
#define RL_LEASE_NOT_TAKEN 1
int rl_lease_submit(rl_client *c, const rl_request *req, uint64_t tag, const rl_target *target);
/* rl_decide_from_lease for a valid leased request: 1 decided (out set, counted), else 0. */
int rl_lease_try(rl_client *c, const rl_request *req, rl_result *out);
/* a reset drops this client's leases on the entity when queued, and again
 * when done: a block fetched in between may predate the delete */
int rl_lease_reset_begin(rl_client *c, rl_areq *r, const char *name, const char *id);

/* waits.c: the I/O thread's side of the waits */
void rl_wait_begin(rl_async *a, rl_areq *r);
/* a try's reply: complete, or sleep until a wake-up, a check-in or the end */
void rl_wait_reply(rl_async *a, rl_areq *r, const redisReply *reply);
/* a reply for a wait that timed out: what it got goes back */
void rl_wait_late_reply(rl_async *a, rl_areq *r, const redisReply *reply);
/* r completes with status: unlinked, unsubscribed, out of the queue */
void rl_wait_ended(rl_async *a, rl_areq *r, int status);
/* the try being sent will hear of what happens after it */
int rl_wait_armed(const rl_await *w);
void rl_wait_cancels(rl_async *a, uint64_t *tags, size_t n);
int64_t rl_wait_expire(rl_async *a, int64_t now);
void rl_wait_read(rl_async *a, rl_aconn *ac);
void rl_wait_sub_send(rl_async *a, rl_aconn *ac, rl_achannel *ch, int on);
void rl_wait_sub_lost(rl_async *a, rl_aconn *ac);

#endif
