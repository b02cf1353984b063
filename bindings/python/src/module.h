/* What the files of ratelimit._ratelimit share: the module state, the
 * Client object (limiter.c and sync.c call through it), errors, argument
 * conversion and the types' specs. Names here are hidden in the shared
 * object (-fvisibility=hidden and the version script export only
 * PyInit__ratelimit). */
#ifndef RL_PY_MODULE_H
#define RL_PY_MODULE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ratelimit.h"

/* ---- free-threaded builds (Py_GIL_DISABLED) ---------------------------------- */

/* Without a GIL the few fields written after an object is shared are
 * guarded here; in a GIL build every guard compiles to nothing, so a call
 * costs what it did. What needs none: the module state (set at import),
 * a Limiter and a Client once __init__ returned (their fields never change;
 * a second __init__ is refused under the object's lock), a Result, and the
 * core (thread-safe; rl_errmsg() is per thread). */
#ifdef Py_GIL_DISABLED
/* every completion queue's counters, buffer, tag table and core queue, and
 * every client's list of queues (aio.c). Never held while Python code may
 * run (a re-entry would deadlock): arguments are converted before it is
 * taken; under it only this module's objects, exceptions and the queue's
 * own dict and lists are made or changed. */
extern PyMutex aio_mutex;
#define AIO_LOCK() PyMutex_Lock(&aio_mutex)
#define AIO_UNLOCK() PyMutex_Unlock(&aio_mutex)
/* ClientObject.closing: set once by close(), read by any thread */
#define CLOSING_LOAD(c) __atomic_load_n(&(c)->closing, __ATOMIC_ACQUIRE)
#define CLOSING_SET(c) __atomic_exchange_n(&(c)->closing, 1, __ATOMIC_ACQ_REL)
#else
#define AIO_LOCK() ((void)0)
#define AIO_UNLOCK() ((void)0)
#define CLOSING_LOAD(c) ((c)->closing)
#define CLOSING_SET(c) (((c)->closing) ? 1 : ((c)->closing = 1, 0))
#endif
/* Py_BEGIN_CRITICAL_SECTION is 3.13+ (and nothing without Py_GIL_DISABLED) */
#ifndef Py_BEGIN_CRITICAL_SECTION
#define Py_BEGIN_CRITICAL_SECTION(op) {
#define Py_END_CRITICAL_SECTION() }
#endif

/* ---- module state (module.c) ------------------------------------------------ */

typedef struct {
    PyObject *RateLimitError;
    PyObject *InvalidArgument;
    PyObject *ConnectionError;
    PyObject *Timeout;
    PyObject *ProtocolError;
    PyObject *RedisError;
    PyObject *Cancelled;
    PyObject *ClientClosed;
    PyObject *Backlog;
    PyObject *RateLimitExceeded;
    PyTypeObject *ClientType;
    PyTypeObject *LimiterType;
    PyTypeObject *ResultType;
    PyTypeObject *CompletionsType;
} rl_state;

static inline rl_state *get_state(PyObject *module)
{
    return (rl_state *)PyModule_GetState(module);
}

/* The state of the module that defined tp or one of its bases (Python
 * subclasses of our types have no module of their own). */
rl_state *state_of_type(PyTypeObject *tp);

#define STATE(obj) state_of_type(Py_TYPE(obj))

/* PyModule_AddObject with a new reference of the caller's (AddObjectRef is 3.10+). */
int add_ref(PyObject *module, const char *name, PyObject *obj);

/* ---- errors (errors.c) --------------------------------------------------------- */

#define ERRBUF 600

/* rl_errmsg() is thread-local and the cancel callback may run Python code
 * (signal handlers) that calls the core again: copy it while still in the
 * released region, right after the call. */
void save_errmsg(char *buf, int rc);

/* stmt with the GIL released, for a Redis round trip: it touches no Python
 * object (another thread may run Python meanwhile) */
#define WITHOUT_GIL(stmt)          \
    do {                           \
        Py_BEGIN_ALLOW_THREADS     \
        stmt;                      \
        Py_END_ALLOW_THREADS       \
    } while (0)
/* rc = call without the GIL; a failure's message kept in err for raise_code
 * (rl_errmsg() is per thread: read it before the GIL is taken back) */
#define CALL_WITHOUT_GIL(rc, err, call) WITHOUT_GIL((rc) = (call); if ((rc) < 0) save_errmsg((err), (rc)))
/* the same for a wait that cancel_cb polls: it takes the GIL back through cc
 * (a cancel_ctx) to check signals and the cancel callable */
#define CALL_CANCELLABLE(cc, rc, err, call)                \
    do {                                                   \
        (cc).ts = PyEval_SaveThread();                     \
        (rc) = (call);                                     \
        if ((rc) < 0) save_errmsg((err), (rc));            \
        PyEval_RestoreThread((cc).ts);                     \
    } while (0)

/* Raise the exception class for rc with message msg and .code = rc; NULL. */
PyObject *raise_code(rl_state *st, int rc, const char *msg);
/* The exception raise_code would raise, as a new instance (not raised). */
PyObject *make_exception(rl_state *st, int rc, const char *msg);
PyObject *raise_fmt(rl_state *st, int rc, const char *fmt, ...);

int errors_init(PyObject *module, rl_state *st);

/* ---- argument conversion and cancellation (util.c) ------------------------------- */

int conv_text(rl_state *st, PyObject *o, const char *param, int allow_nul, PyObject **keep, const char **data,
              Py_ssize_t *len);
int conv_int64(rl_state *st, PyObject *o, const char *param, int64_t *out);
int conv_seconds(rl_state *st, PyObject *o, const char *param, int64_t *out_ms);
PyObject *ms_to_seconds(int64_t ms);

/* The rl_wait.cancel of every blocking call: ts is the thread state saved
 * when the GIL was released, cancel the caller's callable or NULL. */
typedef struct {
    PyThreadState *ts;
    PyObject *cancel;
} cancel_ctx;

int cancel_cb(void *p);

/* ---- Client (client.c) ------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    rl_client *rl; /* freed with the object: the core shuts it down at close() */
    int closing;
    PyObject *weakrefs;
    /* the completion queues (aio.c) that requests of this client may still
     * complete into: kept alive until it shut down. A list, or NULL; not
     * traversed (a queue holds no Python object: no cycle). */
    PyObject *queues;
} ClientObject;

/* The rl_client, or NULL with ClientClosed raised when it never opened.
 * After close() the core refuses each call (RL_ERR_CLOSED): calls in flight
 * are the core's to count (rl_client_shutdown). */
rl_client *client_handle(rl_state *st, ClientObject *c);

/* rl_leases_give_back(c, name) with the GIL released; never raises (a
 * closed client has nothing left to give back). */
void client_give_back(rl_state *st, ClientObject *c, const char *name);

/* ---- Client methods for the primitives (sync.c) ------------------------------------ */

PyObject *client_semaphore_acquire(ClientObject *self, PyObject *args, PyObject *kw);
PyObject *client_semaphore_release(ClientObject *self, PyObject *args);
PyObject *client_semaphore_refresh(ClientObject *self, PyObject *args);
PyObject *client_semaphore_available(ClientObject *self, PyObject *args);
PyObject *client_semaphore_holders(ClientObject *self, PyObject *args);
PyObject *client_lock_acquire(ClientObject *self, PyObject *args, PyObject *kw);
PyObject *client_lock_release(ClientObject *self, PyObject *args);
PyObject *client_lock_extend(ClientObject *self, PyObject *args);
PyObject *client_queue_push(ClientObject *self, PyObject *args);
PyObject *client_queue_pop_ready(ClientObject *self, PyObject *args, PyObject *kw);
PyObject *client_queue_pop_wait(ClientObject *self, PyObject *args, PyObject *kw);
PyObject *client_queue_size(ClientObject *self, PyObject *args);
PyObject *client_queue_remove(ClientObject *self, PyObject *args);

/* ---- Limiter (limiter.c), Result (result.c), specs (spec.c), for aio.c too ------------- */

PyObject *result_new(rl_state *st, const rl_result *r);
/* One decision's outcome, blocking (a batch's request) or asyncio (a
 * completion): its Result, or its error as an exception instance (not raised). */
PyObject *outcome_new(rl_state *st, int status, const char *error, const rl_result *r);
/* Client.limiter's lease: None -> 0, seconds -> 1..3,600,000 ms (the range
 * of rl_request.lease_ms), else a TypeError or InvalidArgument. */
int conv_lease(rl_state *st, PyObject *o, int64_t *out_ms);
/* Python's spelling of a limiter (Client.limiter's rate, algorithm, burst,
 * initial_tokens, per_client; NULL or None: the default) -> a validated spec. */
int conv_spec(rl_state *st, PyObject *rate, PyObject *algorithm, PyObject *burst, PyObject *initial_tokens,
              PyObject *per_client, rl_spec *spec);
/* spec -> (algorithm, [(limit, period_seconds)...], [burst or None...],
 * initial_tokens (None: full, 0: empty, n), per_client, rl_spec_format text). */
PyObject *spec_to_python(const rl_spec *spec);
/* What a batch returns: the list of its outcomes (a Result or the request's
 * exception each), or NULL with the first failure raised (err: its message,
 * rc: its status) carrying that list as .results. return_exceptions: the list
 * whatever failed, except an invalid batch (nothing sent), which raises. */
PyObject *batch_outcomes(rl_state *st, int rc, const char *err, const rl_result *results, const rl_outcome *outcomes,
                         Py_ssize_t n, int return_exceptions);
/* The request limiter.acquire / peek / _reserve would run, and its client
 * (borrowed); *keep owns the id's bytes. */
int limiter_request(rl_state *st, PyObject *limiter, PyObject *id, PyObject *permits, PyObject *now,
                    PyObject *max_wait, rl_op op, rl_request *req, PyObject **keep, ClientObject **client);
/* The requests limiter.acquire_many(items, now=now) would run (*reqs from
 * PyMem, *keeps owns their bytes; *n == 0: none, both NULL). */
int limiter_batch(rl_state *st, PyObject *limiter, PyObject *items, PyObject *now, rl_request **reqs,
                  PyObject **keeps, Py_ssize_t *n, ClientObject **client);

/* ---- completion queues (aio.c) ------------------------------------------------------- */

/* After c->rl shut down: nothing posts to c's queues now. */
void client_release_queues(ClientObject *c);

/* ---- the types ------------------------------------------------------------------------ */

extern PyType_Spec client_spec;  /* client.c */
extern PyType_Spec limiter_spec; /* limiter.c */
extern PyType_Spec result_spec;  /* result.c */
extern PyType_Spec completions_spec; /* aio.c */

#endif
