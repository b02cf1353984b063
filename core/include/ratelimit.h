/*
 * ratelimit: distributed rate limiting and concurrency control on Redis.
 *
 * Every decision is one atomic Lua script run by Redis (see lua/ and
 * docs/semantics.md). This header is the whole public C API.
 *
 * Conventions:
 *   - functions return a status (RL_OK == 0, negative on error) and write
 *     outputs through pointers; being denied is a result, never an error;
 *   - times are milliseconds (int64_t);
 *   - a message for the last error of the calling thread is rl_errmsg();
 *   - one rl_client may be shared by any number of threads.
 */
#ifndef RATELIMIT_H
#define RATELIMIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A library that embeds the core (the Python extension, the JNI library)
 * defines RL_API empty so the rl_ symbols stay hidden inside it. */
#ifndef RL_API
#if defined(__GNUC__)
#define RL_API __attribute__((visibility("default")))
#else
#define RL_API
#endif
#endif

#define RL_VERSION_MAJOR 0
#define RL_VERSION_MINOR 1
#define RL_VERSION_PATCH 0
#define RL_VERSION_NUMBER (RL_VERSION_MAJOR * 10000 + RL_VERSION_MINOR * 100 + RL_VERSION_PATCH)

/* The version of the library actually linked; bindings compare it with
 * RL_VERSION_NUMBER from the header they were built against. */
RL_API int rl_version_number(void);

/* ---- status codes ---------------------------------------------------- */

typedef enum {
    RL_OK = 0,
    RL_ERR_INVALID = -1,    /* bad argument: nothing was sent to Redis */
    RL_ERR_CONNECTION = -2, /* cannot connect, or the connection broke */
    RL_ERR_TIMEOUT = -3,    /* connect or command timeout */
    RL_ERR_PROTOCOL = -4,   /* Redis answered something we cannot decode */
    RL_ERR_REDIS = -5,      /* Redis returned an error (script error, ACL, OOM...) */
    RL_ERR_NOMEM = -6,      /* out of memory */
    RL_ERR_CLOSED = -7,     /* the client was closed */
    RL_ERR_CANCELLED = -8,  /* a blocking wait was cancelled by the caller */
    RL_ERR_BACKLOG = -9     /* the server is behind: too many requests in flight to it, nothing was sent */
} rl_status;

/* Static text for a status code; never NULL. */
RL_API const char *rl_strerror(int status);

/* The message of the last error raised on the calling thread (thread-local);
 * "" when none. Valid until the next call on this thread. */
RL_API const char *rl_errmsg(void);

/* When the last error on this thread was a number out of range, its parts,
 * so a binding can say it in its caller's names and units: param as the C
 * API names it ("limit", "permits", "burst", "period_ms"...; a name ending
 * in "_ms" is milliseconds), the value given and the accepted min..max.
 * Returns 1 and fills *out (may be NULL) then, else 0. */
typedef struct {
    const char *param;   /* valid until the next call on this thread */
    const char *context; /* what max depends on, e.g. "for this rate"; "" when nothing */
    int64_t value;
    int64_t min;
    int64_t max;
} rl_range_error;

RL_API int rl_errrange(rl_range_error *out);

/* ---- client ------------------------------------------------------------ */

typedef enum {
    RL_ON_ERROR_RAISE = 0, /* return RL_ERR_CONNECTION / RL_ERR_TIMEOUT */
    RL_ON_ERROR_ALLOW = 1, /* fail open: result.allowed = 1, result.fallback = 1 */
    RL_ON_ERROR_DENY = 2   /* fail closed: result.allowed = 0, result.fallback = 1 */
} rl_on_error;

/* Certificate checks for TLS (rediss://). */
typedef enum {
    RL_TLS_VERIFY_DEFAULT = 0,  /* the URL's ssl_cert_reqs, else REQUIRED */
    RL_TLS_VERIFY_REQUIRED = 1, /* the chain up to a trusted CA, and the host name */
    RL_TLS_VERIFY_NONE = 2      /* encrypt only: anyone in the middle can read along */
} rl_tls_verify;

/* Zero or NULL in any field means its default, so
 * `rl_options o = {0};` and RL_OPTIONS_INIT open the same client; set only
 * the fields you care about. Negative values are RL_ERR_INVALID. */
typedef struct {
    int connect_timeout_ms; /* default 1000 */
    int command_timeout_ms; /* default 1000; also the only bound on redirects and retries of one call */
    int pool_size;          /* connections per server, shared by all threads; default 8 */
    const char *key_prefix; /* default "rl"; copied by rl_client_open */
    rl_on_error on_error;   /* applies to rate-limit decisions; default RAISE */
    /* TLS, for rediss:// URLs. Each overrides the URL's option of the same
     * meaning (ssl_ca_certs, ssl_certfile, ssl_keyfile, ssl_cert_reqs). */
    const char *tls_ca_file;   /* PEM CA bundle; default: the system's trust store */
    const char *tls_cert_file; /* client certificate (PEM), for tls-auth-clients */
    const char *tls_key_file;  /* its private key (PEM); default: tls_cert_file */
    rl_tls_verify tls_verify;
    /* While Redis is unreachable, reconnects back off exponentially (with
     * jitter) up to this pause, and calls in between fail at once (or the
     * on_error policy decides). Default 1000. */
    int reconnect_max_ms;
    /* 1: keep no metrics (rl_client_stats reports no names); default 0:
     * count every decision per limiter name (see "metrics" below). */
    int metrics_off;
    /* A limiter spec stored in Redis (rl_config_set) is read again at most
     * this often per name: a change reaches every client within it. Default
     * 1000. */
    int config_refresh_ms;
    /* This client's identity for RL_SCOPE_PER_CLIENT quotas: 1..64 of
     * [A-Za-z0-9._-], e.g. a host or pod name to keep a quota across
     * restarts. Default: 32 random hex digits drawn at open. */
    const char *client_id;
    /* Requests in flight (sent or buffered, replies owed) on one connection
     * of the asynchronous core, 1..1000000; default 1000. Past it a request
     * waits, unsent, for room; while the server is behind (its oldest owed
     * reply is older than command_timeout_ms) it fails at once with
     * RL_ERR_BACKLOG, as does one still unsent at its timeout (the on_error
     * policy decides, as for a timeout). The blocking pool carries one call
     * per connection (pool_size per server): while a server is behind, a call
     * that finds every pooled connection busy fails at once the same way. */
    int max_in_flight;
    /* Plain decisions (ops acquire..refund, no lease) for one server (one
     * slot in a cluster) that are ready together go in one script call, up
     * to this many, 1..100; default 16, 1: one call each. The asynchronous
     * core batches what is queued at once and never waits for company;
     * rl_execute batches its requests. A batch costs Redis less CPU per
     * decision but holds it for its whole length (docs/reliability.md). */
    int max_batch;
} rl_options;

#define RL_OPTIONS_INIT { 1000, 1000, 8, "rl", RL_ON_ERROR_RAISE, NULL, NULL, NULL, RL_TLS_VERIFY_DEFAULT, 1000, 0, 1000, NULL, 1000, 16 }

RL_API void rl_options_init(rl_options *options);

/* 1 when this build speaks TLS (rediss://): it was built with hiredis >= 1.0
 * and hiredis_ssl. Without it a rediss:// URL is RL_ERR_INVALID. */
RL_API int rl_tls_supported(void);

/* The OpenSSL this binary runs with, as OpenSSL_version(OPENSSL_VERSION)
 * says ("OpenSSL 3.0.20 7 Apr 2026"): whether an OpenSSL advisory concerns
 * it. The wheels (Linux x86_64, aarch64) and the jar's natives (those and
 * macOS arm64, x86_64) carry their own (docs/binaries.md); a source build
 * the system's. NULL without TLS. */
RL_API const char *rl_tls_version(void);

typedef struct rl_client rl_client;

/* url, the same strings in every binding:
 *   redis://[[user]:password@]host[:port][/db]
 *   rediss://[[user]:password@]host[:port][/db][?ssl_cert_reqs=required|none
 *            &ssl_ca_certs=/ca.pem&ssl_certfile=/c.pem&ssl_keyfile=/k.pem]
 *   unix:///path.sock[?db=N]
 *   redis+sentinel://[[user]:password@]host:port[,host:port...]/service[/db]
 *            [?sentinel_username=...&sentinel_password=...]
 *                                          (rediss+sentinel:// for TLS)
 *   redis+cluster://[[user]:password@]host:port[,host:port...]
 *                                          (rediss+cluster:// for TLS)
 * options may be NULL (defaults). A malformed URL or option is RL_ERR_INVALID
 * at once. With on_error RAISE the client connects here, so a dead server or
 * a bad password is reported now; with ALLOW or DENY opening succeeds while
 * Redis is down (an application can boot in an outage) and calls decide by
 * the policy until Redis answers. Messages show the URL with its passwords
 * masked ("redis://app:***@host/0"); a '/', '?', '#' in a password and an '@'
 * after the host must be percent-encoded.
 *
 * A client survives fork(): the child's first call connects afresh and the
 * I/O thread starts again; nothing of the parent's is used or freed there. */
RL_API int rl_client_open(rl_client **out, const char *url, const rl_options *options);

/* Closes client to new calls, as SQLite's sqlite3_close_v2: each one fails
 * at once with RL_ERR_CLOSED ("client is closed"). Calls in flight run on
 * (and the calls they make), and when the last returns (at once when none
 * is) the client gives every lease's unused permits back (bounded by the
 * command timeout), stops its I/O thread (asynchronous requests and waits
 * complete with RL_ERR_CLOSED) and closes its connections and pipes.
 * stop_waits: blocking waits in flight (rl_acquire_wait, the semaphore, lock
 * and queue waits) return RL_ERR_CLOSED within about 100 ms instead of at
 * their timeout. The memory stays valid until rl_client_close, so a binding calls
 * this for its close() while other threads may still hold the pointer.
 * Thread-safe and idempotent (a later call may still stop the waits); in a
 * completion callback, the I/O thread stops once the callback returns.
 * Returns 1 when the client is shut down on return (no call was in flight,
 * or the last has returned), else 0. NULL is a no-op (0). */
RL_API int rl_client_shutdown(rl_client *client, int stop_waits);

/* rl_client_shutdown(client, 1), then waits for the calls in flight to
 * return (each within the command timeout, the waits stopped), then frees
 * the client. Safe while other threads' calls are in flight: they return or
 * fail with RL_ERR_CLOSED, none touches freed memory; no call may start once
 * it returned. Never from a completion callback or inside a call of this
 * client (it would wait for itself): rl_client_shutdown there. A thread
 * cancelled inside a call leaves it (the core builds with -fexceptions).
 * NULL is a no-op. */
RL_API void rl_client_close(rl_client *client);

/* The key prefix in use (owned by the client; valid until rl_client_close,
 * as rl_client_id's, and usable after rl_client_shutdown, as rl_key). */
RL_API const char *rl_client_prefix(const rl_client *client);

/* This client's identity for RL_SCOPE_PER_CLIENT limiters: options.client_id,
 * else 32 random hex digits drawn when it opened; stable for its life
 * (owned by the client). */
RL_API const char *rl_client_id(const rl_client *client);

/* ---- rate limiting ------------------------------------------------------ */

typedef enum {
    RL_FIXED_WINDOW = 0,
    RL_SLIDING_LOG = 1,
    RL_SLIDING_WINDOW = 2,
    RL_TOKEN_BUCKET = 3,
    RL_LEAKY_BUCKET = 4,
    RL_GCRA = 5
} rl_algorithm;

#define RL_ALGORITHM_COUNT 6

/* "fixed_window", "sliding_log", ... ; NULL for an unknown value. */
RL_API const char *rl_algorithm_name(rl_algorithm algorithm);
RL_API int rl_algorithm_parse(const char *name, rl_algorithm *out);

/* One rate: limit permits per period_ms, with a burst (token_bucket / gcra
 * capacity; 0 = limit; must be 0 or limit for the other algorithms). */
typedef struct {
    int64_t limit;     /* permits per period (leaky_bucket: capacity) */
    int64_t period_ms; /* window length; leaky_bucket: time to drain from full */
    int64_t burst;
} rl_rate;

/* The most rates one limiter enforces together ("10/second;1000/hour"). */
#define RL_MAX_RATES 8

/* The documented limits, for bindings that check or say them. Every call
 * checks its own; these are the numbers it checks against. */
#define RL_MAX_EXACT ((int64_t)1 << 53) /* Lua numbers are doubles: integers exact below it */
/* a period, and rl_acquire_wait's timeout: 100 years */
#define RL_MAX_PERIOD_MS ((int64_t)100 * 365 * 24 * 3600 * 1000)
/* rl_request.lease_ms */
#define RL_LEASE_MAX_MS 3600000
/* a semaphore's or lock's lease, a wait on one, a message's delay: four of
 * them still add up exactly in the scripts' doubles */
#define RL_MAX_WAIT_MS (RL_MAX_EXACT / 1000 / 4)
/* requests in one rl_execute / rl_execute_each */
#define RL_EXECUTE_MAX 100000

typedef enum {
    RL_SCOPE_OVERALL = 0,   /* one quota per (name, id), shared by every client */
    RL_SCOPE_PER_CLIENT = 1 /* one quota per (name, id) for each client: rl_client_id() */
} rl_scope;

/* initial_tokens: a new entity starts with none. */
#define RL_EMPTY (-1)

/* A limiter. Zero in any field after burst means its default, so
 * {RL_GCRA, 10, 1000, 0} is a complete spec. */
typedef struct {
    rl_algorithm algorithm;
    int64_t limit;     /* the first rate: permits per period (leaky_bucket: capacity) */
    int64_t period_ms; /* window length; leaky_bucket: time to drain from full */
    int64_t burst;     /* token_bucket / gcra capacity; 0 = limit. Must be 0 otherwise */
    /* Further rates held together with the first, all or nothing: a call is
     * admitted only if every rate admits it, then each consumes. Each rate
     * keeps its own state (key suffix ":2", ":3"... after the algorithm). */
    size_t more_count;
    rl_rate more[RL_MAX_RATES - 1];
    /* token_bucket, gcra, leaky_bucket: the permits available to an entity
     * Redis holds no state for (new, or expired once full), as Bucket4j's
     * initial tokens; 0 = full capacity, RL_EMPTY = none. */
    int64_t initial_tokens;
    rl_scope scope;
} rl_spec;

/* "10/s", "10/second", "100/minute", "5 per 30 seconds", "1000/hour",
 * "10/day", "2/week", "3/month" (30 days), "1/year" (360 days, as the limits
 * library), "3/500ms". On error returns RL_ERR_INVALID and rl_errmsg()
 * names the problem. */
RL_API int rl_rate_parse(const char *text, int64_t *limit, int64_t *period_ms);
/* url as a log or message may show it: the password in the userinfo and the
 * values of secret-looking options (sentinel_password...) masked as "***",
 * everything after the scheme when a password's characters leave it unclear
 * (the core's own messages quote URLs so). Writes at most size bytes
 * including the NUL and returns the full length (like snprintf). */
RL_API int rl_url_redact(const char *url, char *buf, size_t size);

/* Several rates, "10/second;1000/hour" (';', ',' or '|' between them, as
 * the limits library writes them), into spec's limit, period_ms and more;
 * bursts are left 0. At most RL_MAX_RATES. */
RL_API int rl_rates_parse(const char *text, rl_spec *spec);

/* Checks a spec as every call would (RL_ERR_INVALID and rl_errmsg() say
 * what is wrong), so bindings can refuse a bad limiter when it is created. */
RL_API int rl_spec_validate(const rl_spec *spec);

typedef enum {
    RL_OP_ACQUIRE = 0, /* consume permits if allowed */
    RL_OP_PEEK = 1,    /* same answer, consumes and writes nothing */
    RL_OP_RESERVE = 2, /* token_bucket, leaky_bucket, gcra: book the next slot */
    RL_OP_ACQUIRE_UP_TO = 3, /* consume as many as available, 1..permits (redis_rate's
                              * AllowAtMost, Bucket4j's tryConsumeAsMuchAsPossible) */
    RL_OP_REFUND = 4   /* give permits back (Bucket4j's addTokens); never above full */
} rl_op;

typedef struct {
    const char *name; /* limiter name, non-empty */
    const char *id;   /* limited entity (user, IP...), non-empty */
    rl_spec spec;
    int64_t permits;  /* >= 1 */
    rl_op op;
    int64_t max_wait_ms; /* RESERVE only: do not book a slot further away */
    int64_t now_ms;      /* 0: Redis TIME (normal use); > 0: explicit clock (tests) */
    /* 1: use the spec stored in Redis for name (rl_config_set); spec is
     * ignored. The client caches it for config_refresh_ms. */
    int stored_spec;
    /* ACQUIRE and ACQUIRE_UP_TO: 0 (default) asks Redis every time; > 0
     * takes permits from Redis in blocks valid this long (ms, at most
     * 3,600,000) and decides from this client's memory until the block is
     * used or its validity ends; unused permits go back when it ends. The
     * limit stays exact whatever mix of clients shares the key
     * (docs/semantics.md, "Leases"). Other ops, and an explicit clock
     * (now_ms > 0), ask Redis as without it; out of range is RL_ERR_INVALID
     * for every op. */
    int64_t lease_ms;
} rl_request;

typedef struct {
    int allowed;            /* 1 admitted (or booked), 0 denied */
    int64_t limit;          /* the most the binding rate can hold */
    int64_t remaining;      /* permits still available right now (the least of all rates) */
    int64_t retry_after_ms; /* -1 when allowed; else when this request could pass */
    int64_t reset_after_ms; /* time until every rate is back to full */
    int64_t wait_ms;        /* RESERVE: how long to wait before acting; else 0 */
    int fallback;           /* 1: Redis unreachable, on_error policy decided */
    int64_t granted;        /* permits consumed (ACQUIRE_UP_TO: 1..permits), returned
                             * (REFUND), or that would be (PEEK); 0 when denied */
    int rate_index;         /* the rate that binds (0 = the first): when allowed the one with
                             * the least remaining; when denied the one that denied (the
                             * longest retry_after_ms) */
    int local;              /* 1: decided from this client's lease (or a denial it
                             * remembers) without a round trip; remaining and
                             * reset_after_ms are then its best knowledge */
} rl_result;

/* One decision, one round trip. */
RL_API int rl_acquire(rl_client *client, const char *name, const char *id,
                      const rl_spec *spec, int64_t permits, rl_result *out);
RL_API int rl_peek(rl_client *client, const char *name, const char *id,
                   const rl_spec *spec, int64_t permits, rl_result *out);
/* Deletes the entity's state (every rate of spec). */
RL_API int rl_reset(rl_client *client, const char *name, const char *id, const rl_spec *spec);
/* In rl_acquire, rl_peek and rl_reset, spec NULL means the spec stored in
 * Redis for name (rl_config_set). */

/* One request's outcome in a batch (rl_execute_each). */
typedef struct {
    int status;      /* RL_OK: the result holds Redis's decision, or the on_error
                      * policy's (result.fallback = 1); else this request's error */
    char error[200]; /* the error's message; with RL_OK and a fallback, why Redis
                      * could not decide; else "" */
} rl_outcome;

/* General form: any mix of requests, pipelined in one round trip per server.
 * Every request is validated first; if one is invalid nothing is sent and
 * RL_ERR_INVALID is returned (each outcome says why: its own error, or "not
 * sent"). Otherwise every request gets its own outcome: what Redis decided is
 * always reported, whatever happens to the others (a request whose key holds
 * the wrong type fails alone; a connection lost or a timeout part-way fails
 * only the requests not answered yet; in a cluster, a server that fails
 * fails only the requests bound for it). The on_error policy applies per
 * request, as to a single call: a request that failed to reach Redis or
 * timed out gets the fallback result (status RL_OK), any other error stays
 * that request's error. A server that stalls costs up to command_timeout_ms
 * of its own, so a batch spread over k servers may take k timeouts.
 * Returns RL_OK when every outcome is RL_OK, else the status of the first
 * request that failed (rl_errmsg(): "request <i>: <its error>"). results and
 * outcomes must hold n entries; a failed request's result is unspecified. */
RL_API int rl_execute_each(rl_client *client, const rl_request *requests, size_t n, rl_result *results,
                           rl_outcome *outcomes);

/* rl_execute_each without outcomes: on an error, the requests that succeeded
 * still have their results, but only rl_execute_each says which. */
RL_API int rl_execute(rl_client *client, const rl_request *requests, size_t n, rl_result *results);

/* Blocking waits. cancel (may be NULL) is polled at least every 100 ms while
 * waiting; a nonzero return stops the wait with RL_ERR_CANCELLED. */
typedef int (*rl_cancel_fn)(void *ctx);

typedef struct {
    int64_t timeout_ms; /* 0: do not wait */
    rl_cancel_fn cancel;
    void *cancel_ctx;
} rl_wait;

/* Acquire, sleeping retry_after between attempts, never past the deadline.
 * On timeout returns RL_OK with the last denied result, at once when the
 * next chance (retry_after_ms) comes past the deadline. An acquire only;
 * an explicit clock (now_ms) with a timeout is RL_ERR_INVALID. */
RL_API int rl_acquire_wait(rl_client *client, const rl_request *request,
                           const rl_wait *wait, rl_result *out);

/* Ends this client's leases on name (NULL: every name) now: their unused
 * permits go back to Redis, pipelined in one round trip per server, bounded
 * by command_timeout_ms. Later calls take new blocks. A give-back Redis does
 * not get (an outage) is dropped: its permits stay counted until the
 * block's validity ends, which is safe. Returns RL_OK but for a NULL client
 * or a bad name. A limiter's close in the bindings calls it; rl_client_close
 * does for all. */
RL_API int rl_leases_give_back(rl_client *client, const char *name);

/* ---- stored configuration ------------------------------------------------ */

/* A limiter's spec can live in Redis (Redisson's setRate / trySetRate /
 * getConfig), in one hash per name, "<prefix>:config:<name>", without TTL:
 * it lasts until deleted. A call with stored_spec (or spec NULL) uses it;
 * each client reads it at most once per config_refresh_ms per name, so a
 * change reaches every client, in every language, within that bound.
 * Entities keep their state across a change (docs/semantics.md says what
 * each algorithm keeps). */
RL_API int rl_config_set(rl_client *client, const char *name, const rl_spec *spec);
/* *set = 1 when nothing was stored and spec now is; 0: the stored one stays. */
RL_API int rl_config_set_if_absent(rl_client *client, const char *name, const rl_spec *spec, int *set);
/* Reads Redis (not the cache). *found = 0 when nothing is stored. */
RL_API int rl_config_get(rl_client *client, const char *name, rl_spec *out, int *found);
RL_API int rl_config_delete(rl_client *client, const char *name, int *deleted);
/* RL_ERR_INVALID, naming both, when a spec is stored for name and differs
 * from spec; RL_OK when they agree or nothing is stored. spec NULL (a
 * limiter that will use the stored spec): RL_ERR_INVALID when nothing is
 * stored. Uses the cache; while Redis is unreachable under ALLOW / DENY it
 * answers RL_OK (the decisions then follow the policy). Bindings call it
 * when a limiter is made, so a name never silently becomes a second limiter. */
RL_API int rl_config_check(rl_client *client, const char *name, const rl_spec *spec);
/* A spec as text, rates as users write them: "gcra 10/second burst 20;
 * 1000/hour initial 5 per_client" (a period no whole second divides:
 * "3/500ms"); writes at most size bytes including the NUL and returns the
 * full length (like snprintf). */
RL_API int rl_spec_format(const rl_spec *spec, char *buf, size_t size);

/* ---- asynchronous calls ------------------------------------------------ */

/* rl_submit sends a decision without waiting for it. The client runs one I/O
 * thread (started by the first submit) that owns one connection per server:
 * requests submitted while a write is in flight go out together in the next
 * write (automatic pipelining), so many concurrent callers cost Redis few
 * syscalls. Per request, everything holds as in rl_execute: validation before
 * anything is sent, NOSCRIPT loading, cluster redirects, the command timeout,
 * never sending twice what may have run, and the on_error policy. Connecting
 * and asking sentinels or the cluster where servers are happen on a second
 * thread, so a dead server delays only the requests bound for it.
 *
 * A completion goes to exactly one target:
 *   - a callback, called on the I/O thread (it must not block nor call
 *     rl_client_close; the JNI layer attaches that thread to the JVM once);
 *     a decision taken from a lease (lease_ms) completes at once, inside
 *     rl_submit, on the submitting thread, or on the thread whose fetch of
 *     a block it waited for; or
 *   - an rl_completions queue, whose file descriptor becomes readable when
 *     completions wait: an event loop (asyncio add_reader, libuv, libevent,
 *     epoll) watches it and drains the queue with rl_completions_take, one
 *     wake-up for many completions.
 * Closing the client completes every request still in flight with
 * RL_ERR_CLOSED. A queue outlives the clients that post to it. */
#define RL_PERMIT_ID_SIZE 48

typedef struct {
    size_t count;
    char **items;   /* each NUL-terminated; lengths in lens (messages may hold NUL) */
    size_t *lens;
} rl_messages;

RL_API void rl_messages_free(rl_messages *messages);

typedef struct {
    uint64_t tag;      /* the caller's, from rl_submit */
    int status;        /* RL_OK, or what failed (message in error) */
    char error[200];
    int64_t value;     /* release / refresh / extend / push: 1 done, 0 not */
    int acquired;      /* semaphore / lock acquire: 1 granted */
    int64_t fencing_token;
    char permit_id[RL_PERMIT_ID_SIZE]; /* granted: the permit / owner token */
    /* rl_submit_queue_pop: what was taken, owned by the receiver from here
     * on (rl_messages_free); count 0 when the wait timed out */
    rl_messages messages;
    /* rl_submit: the decision (fallback = 1: by policy). Last, so that an
     * rl_result that grows moves no other field ("structs that grow"). */
    rl_result result;
} rl_completion;

typedef void (*rl_complete_fn)(void *ctx, const rl_completion *completion);

typedef struct rl_completions rl_completions;

typedef struct {
    rl_complete_fn fn; /* either fn (with ctx) ... */
    void *ctx;
    rl_completions *queue; /* ... or a queue */
} rl_target;

RL_API int rl_completions_open(rl_completions **out);
/* Readable while completions wait (a pipe's read end); never read it yourself. */
RL_API int rl_completions_fd(const rl_completions *queue);
/* Moves up to max waiting completions into out; returns how many (0: none).
 * Never blocks. */
RL_API size_t rl_completions_take(rl_completions *queue, rl_completion *out, size_t max);
/* No client may still post to it. NULL is a no-op. */
RL_API void rl_completions_close(rl_completions *queue);

/* Queues one decision (acquire, peek or reserve; the request's strings are
 * copied). Returns RL_ERR_INVALID (nothing queued) for a bad request or
 * target, RL_ERR_CLOSED while the client closes; else RL_OK and the
 * completion follows exactly once. Thread-safe. */
RL_API int rl_submit(rl_client *client, const rl_request *request, uint64_t tag, const rl_target *target);

/* The decision rl_submit would complete at once from a lease, with no target
 * and no queue: *decided = 1 and out set when the request (an acquire or
 * acquire up to n with lease_ms) is decided from the block in hand or a
 * remembered denial, counted in the metrics as rl_submit counts it (local);
 * else *decided = 0 and nothing is done (no fetch started, nothing sent,
 * never a wait on a fetch in flight): submit it as usual. A request with a
 * stored spec is never decided here. Returns RL_ERR_INVALID (decided 0) for
 * a bad request, as rl_submit would. Thread-safe; an event loop calls it
 * first to skip the completion queue's round trip. */
RL_API int rl_decide_from_lease(rl_client *client, const rl_request *request, rl_result *out, int *decided);

/* The primitives, with the blocking calls' semantics; strings are copied.
 *
 * Acquire and pop with timeout_ms > 0 wait without holding any thread: the
 * I/O thread subscribes to the waiter's wake-up channel (one subscriber
 * connection per server, shared by every wait), tries again when a release
 * or push is published, and checks in with Redis at least every second so
 * the semaphore's queue keeps the waiter (FIFO, as the blocking call). While
 * the subscription is down (a failover) waits poll once a second. Each try
 * is one command under the command timeout; the wait ends at timeout_ms
 * (acquired = 0, or no messages) or with the first error.
 *
 * rl_cancel ends waits early: each wait with that tag completes with
 * RL_ERR_CANCELLED and holds nothing (a permit granted meanwhile is
 * released; messages taken meanwhile are pushed back, due at once). Tags
 * name waits per client, whatever their targets: give each wait you may
 * cancel a tag of its own. Decisions and the other calls are one round trip
 * each and not cancelled. On a client shut down rl_cancel is a no-op: its
 * waits complete with RL_ERR_CLOSED. */
RL_API int rl_submit_semaphore_acquire(rl_client *client, const char *name, int64_t permits_max, int64_t lease_ms,
                                       int64_t timeout_ms, uint64_t tag, const rl_target *target);
/* rl_acquire_wait without blocking (same rules, results and refusals): each
 * try is one rl_submit (leases, metrics, the on_error policy), the pause
 * between tries a timer of the I/O thread. A stored spec is, at each try, the
 * one the client's cache has then, as in rl_acquire_wait: the first try's is
 * read here when not cached, a later one's on the I/O thread (not blocking
 * it) once older than config_refresh_ms. rl_cancel ends it with RL_ERR_CANCELLED, but a try in flight stands: a
 * decision is not undone, so one that admits completes admitted. */
RL_API int rl_submit_acquire_wait(rl_client *client, const rl_request *request, int64_t timeout_ms, uint64_t tag,
                                  const rl_target *target);
RL_API int rl_submit_semaphore_release(rl_client *client, const char *name, const char *permit_id, uint64_t tag,
                                       const rl_target *target);
RL_API int rl_submit_semaphore_refresh(rl_client *client, const char *name, const char *permit_id, int64_t lease_ms,
                                       uint64_t tag, const rl_target *target);
RL_API int rl_submit_lock_acquire(rl_client *client, const char *name, int64_t lease_ms, int64_t timeout_ms,
                                  uint64_t tag, const rl_target *target);
RL_API int rl_submit_lock_release(rl_client *client, const char *name, const char *token, uint64_t tag,
                                  const rl_target *target);
RL_API int rl_submit_lock_extend(rl_client *client, const char *name, const char *token, int64_t lease_ms,
                                 uint64_t tag, const rl_target *target);
RL_API int rl_submit_queue_push(rl_client *client, const char *queue, const char *message, size_t message_len,
                                int64_t delay_ms, uint64_t tag, const rl_target *target);
/* Takes up to max due messages; timeout_ms 0 is rl_queue_pop_ready. */
RL_API int rl_submit_queue_pop(rl_client *client, const char *queue, size_t max, int64_t timeout_ms, uint64_t tag,
                               const rl_target *target);
/* The rest of the API as one round trip each; the completion's value is
 * the keys deleted (reset: spec NULL = the stored one), the live holders
 * (permits_max 0) or the permits available out of permits_max, the queue's
 * size, or 1 when the message was removed. */
RL_API int rl_submit_reset(rl_client *client, const char *name, const char *id, const rl_spec *spec, uint64_t tag,
                           const rl_target *target);
RL_API int rl_submit_semaphore_info(rl_client *client, const char *name, int64_t permits_max, uint64_t tag,
                                    const rl_target *target);
RL_API int rl_submit_queue_size(rl_client *client, const char *queue, uint64_t tag, const rl_target *target);
RL_API int rl_submit_queue_remove(rl_client *client, const char *queue, const char *message, size_t message_len,
                                  uint64_t tag, const rl_target *target);
/* Asks every wait submitted with tag to stop (see above); RL_OK also when
 * none is waiting (it completed already). Thread-safe; never blocks. */
RL_API int rl_cancel(rl_client *client, uint64_t tag);

/* ---- semaphore and lock ---------------------------------------------- */

typedef struct {
    int acquired;                 /* 0: not acquired within the timeout */
    char id[RL_PERMIT_ID_SIZE];   /* unique permit / owner token, NUL-terminated */
    int64_t fencing_token;        /* strictly increasing per name */
    int64_t lease_ms;
} rl_permit;

/* A fair (FIFO) counting semaphore whose permits expire after lease_ms
 * unless refreshed. permits_max may change between calls. */
RL_API int rl_semaphore_acquire(rl_client *client, const char *name, int64_t permits_max,
                                int64_t lease_ms, const rl_wait *wait, rl_permit *out);
/* *released = 0 when the permit is unknown or already expired. */
RL_API int rl_semaphore_release(rl_client *client, const char *name, const char *permit_id,
                                int *released);
RL_API int rl_semaphore_refresh(rl_client *client, const char *name, const char *permit_id,
                                int64_t lease_ms, int *refreshed);
RL_API int rl_semaphore_available(rl_client *client, const char *name, int64_t permits_max,
                                  int64_t *available);
RL_API int rl_semaphore_holders(rl_client *client, const char *name, int64_t *holders);

/* A mutual-exclusion lock with owner tokens and fencing tokens. */
RL_API int rl_lock_acquire(rl_client *client, const char *name, int64_t lease_ms,
                           const rl_wait *wait, rl_permit *out);
RL_API int rl_lock_release(rl_client *client, const char *name, const char *token, int *released);
RL_API int rl_lock_extend(rl_client *client, const char *name, const char *token,
                          int64_t lease_ms, int *extended);

/* ---- delay queue --------------------------------------------------------- */

/* Schedules message for delivery after delay_ms. A message already queued is
 * left as it is (*added = 0): producers may retry safely. */
RL_API int rl_queue_push(rl_client *client, const char *queue, const char *message,
                         size_t message_len, int64_t delay_ms, int *added);
/* Atomically takes up to max due messages; no two consumers get the same one. */
RL_API int rl_queue_pop_ready(rl_client *client, const char *queue, size_t max, rl_messages *out);
/* Like pop_ready, but waits (blocking in Redis, no polling) until a message is
 * due or the wait times out (then out->count == 0). */
RL_API int rl_queue_pop_wait(rl_client *client, const char *queue, size_t max,
                             const rl_wait *wait, rl_messages *out);
RL_API int rl_queue_size(rl_client *client, const char *queue, int64_t *size);
RL_API int rl_queue_remove(rl_client *client, const char *queue, const char *message,
                           size_t message_len, int *removed);

/* ---- introspection ----------------------------------------------------- */

/* The embedded scripts: name ("gcra", "semaphore_acquire"...) and SHA1 hex. */
RL_API size_t rl_script_count(void);
RL_API int rl_script_info(size_t index, const char **name, const char **sha1);

/* Builds the Redis key holding an entity's state for an algorithm, as the
 * library names it; writes at most size bytes including the NUL and returns
 * the full length (like snprintf), or a negative status. */
RL_API int rl_key(const rl_client *client, const char *name, const char *id,
                  rl_algorithm algorithm, char *buf, size_t size);
/* The same for any key an entity's state has: rate (0 = the first, below
 * RL_MAX_RATES) of a limiter with that algorithm and scope (a per-client
 * quota's key names rl_client_id). rl_key is rate 0, RL_SCOPE_OVERALL. */
RL_API int rl_key_build(const rl_client *client, const char *name, const char *id, rl_algorithm algorithm,
                        rl_scope scope, int rate, char *buf, size_t size);

/* What a key of the library holds (the command line tool reads keys back). */
typedef enum {
    RL_KEY_STATE = 0,  /* an entity's state: name, id, algorithm, rate (client_id when per client) */
    RL_KEY_CONFIG = 1, /* a stored spec: name */
    RL_KEY_OTHER = 2   /* a semaphore's, lock's, queue's...: name, and what in suffix */
} rl_key_kind;

typedef struct {
    rl_key_kind kind;
    char *name;       /* unescaped (the bytes the caller named it with) */
    char *id;         /* unescaped; a long id hashed into the key stays "%H" and its SHA-256; else NULL */
    char *client_id;  /* RL_SCOPE_PER_CLIENT: the quota's client; else NULL */
    rl_algorithm algorithm;
    int rate;         /* 0 = the first */
    char *suffix;     /* RL_KEY_OTHER: what follows the tag ("semaphore", "lock:owner"...); else NULL */
} rl_key_parts;

/* Reads key (len bytes) back into out: 1 when it is one of the library's
 * under prefix, 0 when not (out zeroed), or a negative status. Free the
 * parts with rl_key_parts_free (also after 0). */
RL_API int rl_key_parse(const char *prefix, const char *key, size_t len, rl_key_parts *out);
RL_API void rl_key_parts_free(rl_key_parts *parts);

/* The Redis Cluster slot of a key (its hash tag's), 0..16383. */
RL_API int rl_key_slot(const char *key, size_t len);

/* ---- for bindings and tools ---------------------------------------------- */

/* Checks requests as rl_execute does before sending anything (at most
 * RL_EXECUTE_MAX; a request with stored_spec: its name, id and permits, the
 * spec being known only when it is resolved): RL_ERR_INVALID and rl_errmsg()
 * ("request <i>: ...") for the first bad one, so an asynchronous batch can
 * be refused whole before any of it is submitted. */
RL_API int rl_requests_validate(const rl_request *requests, size_t n);

/* The spec a limiter stored in Redis under name uses now: the client's
 * cached copy, read again at most every config_refresh_ms. RL_ERR_INVALID
 * when none is stored. */
RL_API int rl_config_resolve(rl_client *client, const char *name, rl_spec *out);

/* rl_config_resolve without I/O, for callers that must never block (a
 * Java virtual thread, which would hold its carrier): *fresh = 1 and out
 * set when the client's cached copy of name's stored spec was read within
 * config_refresh_ms, so a request made with it decides exactly as one with
 * stored_spec would; else *fresh = 0 (nothing cached, stale, or nothing
 * stored: rl_submit would read Redis). Thread-safe; never blocks. */
RL_API int rl_config_cached(rl_client *client, const char *name, rl_spec *out, int *fresh);

/* spec's rates, the first first (burst 0 where it is the limit); returns
 * how many (1..RL_MAX_RATES). */
RL_API size_t rl_spec_rates(const rl_spec *spec, rl_rate *out);

/* One raw Redis command, for tools (the command line tool's SCAN, TYPE,
 * PTTL...): argv[0..argc) with their lengths, at most RL_COMMAND_MAX_ARGS,
 * sent to the server of cluster slot (rl_key_slot of a key the command
 * reads; -1: any server) under the command timeout, redirects followed.
 * *out (RL_OK only) is the reply, to free with rl_reply_free; an error
 * reply is RL_ERR_REDIS, its text in rl_errmsg() (an array's elements may
 * still be errors: RL_REPLY_ERROR). */
#define RL_COMMAND_MAX_ARGS 48

typedef struct rl_reply rl_reply;

typedef enum {
    RL_REPLY_STRING = 1, /* also RESP3's verbatim strings */
    RL_REPLY_ARRAY = 2,  /* also sets, maps (keys and values in turn) and pushes */
    RL_REPLY_INTEGER = 3,
    RL_REPLY_NIL = 4,
    RL_REPLY_STATUS = 5,
    RL_REPLY_ERROR = 6,
    RL_REPLY_DOUBLE = 7,
    RL_REPLY_BOOL = 8
} rl_reply_type;

RL_API int rl_command_run(rl_client *client, int slot, int argc, const char **argv, const size_t *lens,
                          rl_reply **out);
RL_API rl_reply_type rl_reply_kind(const rl_reply *reply);
/* STRING, STATUS, ERROR: the bytes (*len set); else NULL */
RL_API const char *rl_reply_str(const rl_reply *reply, size_t *len);
/* INTEGER, BOOL (0 / 1) */
RL_API int64_t rl_reply_integer(const rl_reply *reply);
RL_API double rl_reply_double(const rl_reply *reply);
/* ARRAY: its length and elements (owned by the reply); else 0 */
RL_API size_t rl_reply_count(const rl_reply *reply);
RL_API const rl_reply *rl_reply_at(const rl_reply *reply, size_t index);
/* A reply of rl_command_run and everything in it; NULL is a no-op. */
RL_API void rl_reply_free(void *reply);

/* One slot of each master of a cluster (its lowest), to run a command on
 * every master (SCAN); outside a cluster one -1 ("the server"). Returns how
 * many there are (at most max written), or a negative status. */
RL_API int rl_client_masters(rl_client *client, int *slots, int max);

/* ---- metrics ------------------------------------------------------------ */

/* Every decision (rl_acquire, rl_peek, rl_execute, each attempt of
 * rl_acquire_wait, rl_submit) is counted under its limiter name with one
 * outcome, and its latency goes into a histogram:
 *   - allowed / denied: Redis decided;
 *   - fallback: Redis could not be reached and the on_error policy decided
 *     (result.fallback = 1, allowed or not);
 *   - errors: the call (or completion) returned an error status other than
 *     RL_ERR_INVALID, which never reaches Redis and is not counted; in a
 *     batch each request counts its own outcome.
 * Latency is measured from the call (or rl_submit) to the result (or the
 * completion), in microseconds; a batch's requests each count its latency.
 * Counting takes no lock: relaxed atomic additions on counters found in a
 * lock-free table of names. At most RL_STATS_MAX_NAMES names are counted
 * separately per client; decisions for names beyond those go to one shared
 * entry named "" (no limiter has an empty name), so hostile names cannot
 * grow memory without bound. rl_options.metrics_off = 1 turns all of it off. */

#define RL_STATS_MAX_NAMES 1024

/* Latency buckets: bucket i < RL_STATS_BUCKETS - 1 counts decisions that
 * took more than RL_STATS_BUCKET_US(i - 1) and at most RL_STATS_BUCKET_US(i)
 * microseconds (8 us, 16 us, ... 8.4 s: powers of two); the last bucket
 * counts the slower ones. Not cumulative: add them up for Prometheus' "le". */
#define RL_STATS_BUCKETS 22
#define RL_STATS_BUCKET_US(i) ((int64_t)8 << (i))

typedef struct {
    const char *name; /* owned by the client, valid until rl_client_close; "" = the overflow entry */
    uint64_t allowed;
    uint64_t denied;
    uint64_t fallback;
    uint64_t errors;
    uint64_t local_allowed;                 /* of allowed / denied: decided from a lease */
    uint64_t local_denied;                  /* (or a remembered denial), no round trip */
    uint64_t lease_calls;                   /* script calls that took or gave back a block */
    uint64_t latency_sum_us;                /* over all four outcomes */
    uint64_t latency_buckets[RL_STATS_BUCKETS];
} rl_limiter_stats;

/* Copies the counters of up to max limiter names into out (in no particular
 * order) and sets *count to the number of names counted so far, which may be
 * more than max: call with max = 0 to size the array (names are never
 * removed, so a second call sees at least as many). Each number is exact;
 * read while decisions run, the numbers of one name may be a few decisions
 * apart. Cheap: no lock, no allocation. Thread-safe. */
RL_API int rl_client_stats(const rl_client *client, rl_limiter_stats *out, size_t max, size_t *count);

/* ---- structs that grow ------------------------------------------------- */

/* rl_options, rl_request and rl_result may gain fields at their ends in a
 * later version (an rl_completion then grows with its rl_result, its last
 * field); zero in a new field will mean what the library did before it
 * (the rule rl_options states). So that a program built against one header
 * runs with the library of another, the calls that take these structs are
 * macros passing the caller's sizeof to a *_sized function: the library
 * zero-extends a shorter struct, takes a longer one (a newer header) only
 * when the fields it does not know are zero (else RL_ERR_INVALID), writes
 * back no more than the caller's size, and steps through arrays by it.
 * The functions of the plain names stay exported with these first sizes:
 * binaries built before the macros call them, as does a pointer taken to
 * one. rl_spec (inside rl_request), rl_outcome, rl_wait, rl_permit and the
 * other structs keep their layout. Size arguments come last. The library's
 * own sources (those that include its internal.h) call the plain functions,
 * as does a caller that defines RL_NO_SIZED_CALLS. */
RL_API int rl_client_open_sized(rl_client **out, const char *url, const rl_options *options, size_t options_size);
RL_API int rl_acquire_sized(rl_client *client, const char *name, const char *id, const rl_spec *spec,
                            int64_t permits, rl_result *out, size_t result_size);
RL_API int rl_peek_sized(rl_client *client, const char *name, const char *id, const rl_spec *spec,
                         int64_t permits, rl_result *out, size_t result_size);
/* outcomes NULL: rl_execute */
RL_API int rl_execute_each_sized(rl_client *client, const rl_request *requests, size_t n, rl_result *results,
                                 rl_outcome *outcomes, size_t request_size, size_t result_size);
RL_API int rl_acquire_wait_sized(rl_client *client, const rl_request *request, const rl_wait *wait,
                                 rl_result *out, size_t request_size, size_t result_size);
RL_API int rl_submit_sized(rl_client *client, const rl_request *request, uint64_t tag, const rl_target *target,
                           size_t request_size);
RL_API int rl_submit_acquire_wait_sized(rl_client *client, const rl_request *request, int64_t timeout_ms, uint64_t tag,
                                        const rl_target *target, size_t request_size);
RL_API int rl_decide_from_lease_sized(rl_client *client, const rl_request *request, rl_result *out, int *decided,
                                      size_t request_size, size_t result_size);
RL_API int rl_requests_validate_sized(const rl_request *requests, size_t n, size_t request_size);
RL_API size_t rl_completions_take_sized(rl_completions *queue, rl_completion *out, size_t max,
                                        size_t completion_size);

#if !defined(RL_NO_SIZED_CALLS) && !defined(RL_INTERNAL_H)
#define rl_client_open(out, url, options) rl_client_open_sized(out, url, options, sizeof(rl_options))
#define rl_acquire(client, name, id, spec, permits, out) \
    rl_acquire_sized(client, name, id, spec, permits, out, sizeof(rl_result))
#define rl_peek(client, name, id, spec, permits, out) \
    rl_peek_sized(client, name, id, spec, permits, out, sizeof(rl_result))
#define rl_execute_each(client, requests, n, results, outcomes) \
    rl_execute_each_sized(client, requests, n, results, outcomes, sizeof(rl_request), sizeof(rl_result))
#define rl_execute(client, requests, n, results) \
    rl_execute_each_sized(client, requests, n, results, NULL, sizeof(rl_request), sizeof(rl_result))
#define rl_acquire_wait(client, request, wait, out) \
    rl_acquire_wait_sized(client, request, wait, out, sizeof(rl_request), sizeof(rl_result))
#define rl_submit(client, request, tag, target) rl_submit_sized(client, request, tag, target, sizeof(rl_request))
#define rl_submit_acquire_wait(client, request, timeout_ms, tag, target) \
    rl_submit_acquire_wait_sized(client, request, timeout_ms, tag, target, sizeof(rl_request))
#define rl_decide_from_lease(client, request, out, decided) \
    rl_decide_from_lease_sized(client, request, out, decided, sizeof(rl_request), sizeof(rl_result))
#define rl_requests_validate(requests, n) rl_requests_validate_sized(requests, n, sizeof(rl_request))
#define rl_completions_take(queue, out, max) rl_completions_take_sized(queue, out, max, sizeof(rl_completion))
#endif

/* ---- old names ------------------------------------------------------------ */

/* Every other function is named noun first (rl_algorithm_parse,
 * rl_spec_validate); these three were not. The old names still build (with
 * a deprecation warning) and stay exported for binaries built against them. */
#if defined(__GNUC__)
#define RL_DEPRECATED(use) __attribute__((deprecated("use " use)))
#else
#define RL_DEPRECATED(use)
#endif
RL_API RL_DEPRECATED("rl_rate_parse") int rl_parse_rate(const char *text, int64_t *limit, int64_t *period_ms);
RL_API RL_DEPRECATED("rl_rates_parse") int rl_parse_rates(const char *text, rl_spec *spec);
RL_API RL_DEPRECATED("rl_tls_supported") int rl_has_tls(void);

#ifdef __cplusplus
}
#endif

#endif
