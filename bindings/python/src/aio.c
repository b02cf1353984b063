/* ratelimit._ratelimit.Completions: an rl_completions queue for an event
 * loop (ratelimit.aio keeps one per loop and client).
 *
 * submit() queues a decision with rl_submit (non-blocking: it builds the
 * command and hands it to the client's I/O thread) under an integer tag,
 * submit_wait a timed acquire (rl_submit_acquire_wait), submit_acquire /
 * _held / _push / _pop a semaphore, lock or queue call
 * (rl_submit_semaphore_acquire...: these acquires and pops wait in the
 * core, cancel() stops them); the queue's fd (fileno(), a pipe) becomes readable
 * when completions wait; take() turns them into (tag, status, value)
 * tuples, value being what the blocking call returns or raises, one
 * wake-up of the loop for many completions. Everything here runs with the
 * GIL held: each call is a few microseconds and never waits. Without a GIL
 * (Py_GIL_DISABLED) aio_mutex takes its place for the bookkeeping: a queue's
 * counters, buffer, tag table and core queue, and the clients' lists of
 * queues, which a client closed on another thread, or used from two event
 * loops' threads, touches too.
 *
 * Lifetime: the core's queue must outlive every client that may still post
 * to it. A client that submits into a queue keeps a reference to it (in
 * ClientObject.queues) until the object goes, or until nothing is pending
 * in that queue any more. close() frees the core's queue at once when no
 * client holds it or nothing is pending in it, else when the last
 * completion due is taken (a client shut down completes every request in
 * flight, with RL_ERR_CLOSED if need be) or the last holder lets go. */
#include "module.h"

#ifdef Py_GIL_DISABLED
PyMutex aio_mutex; /* zeroed: unlocked */
#endif

typedef struct {
    PyObject_HEAD
    rl_completions *q;
    Py_ssize_t pending; /* submitted and not yet taken: completions still due */
    Py_ssize_t holders; /* clients whose queues list holds this queue */
    int closed;
    rl_completion *buf; /* take()'s scratch space */
    size_t bufcap;
    /* primitives in flight, {tag: (kind, lease seconds or None)}: take()
     * turns their completions into what the blocking call returns; a tag
     * not here is a decision. NULL until the first primitive. */
    PyObject *kinds;
} CompletionsObject;

static void queue_free(CompletionsObject *self)
{
    if (self->q) {
        rl_completions_close(self->q);
        self->q = NULL;
    }
    PyMem_Free(self->buf);
    self->buf = NULL;
    self->bufcap = 0;
    Py_CLEAR(self->kinds);
}

/* One client lets go of the queue. */
static void queue_unhold(CompletionsObject *self)
{
    if (--self->holders == 0 && self->closed) queue_free(self);
}

/* Keeps queue alive for c's requests; drops the queues nothing is pending in.
 * With aio_mutex held, as take_raw, taken_list and queue_free. */
static int client_hold_queue(ClientObject *c, CompletionsObject *queue)
{
    PyObject *list = c->queues;
    if (list && PyList_GET_SIZE(list) > 0 && PyList_GET_ITEM(list, 0) == (PyObject *)queue) return 0;
    if (!list) {
        if (!(list = c->queues = PyList_New(0))) return -1;
    }
    int found = 0;
    for (Py_ssize_t i = PyList_GET_SIZE(list) - 1; i >= 0; i--) {
        CompletionsObject *q = (CompletionsObject *)PyList_GET_ITEM(list, i);
        if (q == queue) {
            found = 1;
        } else if (q->pending == 0) {
            /* nothing of anyone's is due there: no client posts to it now */
            Py_INCREF(q);
            if (PySequence_DelItem(list, i) < 0) {
                Py_DECREF(q);
                return -1;
            }
            queue_unhold(q);
            Py_DECREF(q);
        }
    }
    if (!found) {
        if (PyList_Insert(list, 0, (PyObject *)queue) < 0) return -1;
        queue->holders++;
    }
    return 0;
}

void client_release_queues(ClientObject *c)
{
    AIO_LOCK();
    PyObject *list = c->queues;
    c->queues = NULL;
    for (Py_ssize_t i = 0; list && i < PyList_GET_SIZE(list); i++)
        queue_unhold((CompletionsObject *)PyList_GET_ITEM(list, i));
    AIO_UNLOCK();
    Py_XDECREF(list); /* may free queues: outside the lock */
}

/* ---- the type --------------------------------------------------------------------- */

static PyObject *completions_new(PyTypeObject *tp, PyObject *args, PyObject *kw)
{
    rl_state *st = state_of_type(tp);
    if (!st) return NULL;
    if (PyTuple_GET_SIZE(args) || (kw && PyDict_GET_SIZE(kw))) {
        PyErr_SetString(PyExc_TypeError, "Completions() takes no arguments");
        return NULL;
    }
    CompletionsObject *self = (CompletionsObject *)tp->tp_alloc(tp, 0);
    if (!self) return NULL;
    int rc = rl_completions_open(&self->q);
    if (rc) {
        char err[ERRBUF];
        save_errmsg(err, rc);
        Py_DECREF(self);
        return raise_code(st, rc, err);
    }
    return (PyObject *)self;
}

static void completions_dealloc(CompletionsObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    /* holders keep a reference: none is left, so no client posts here */
    queue_free(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

#define QUEUE_CLOSED "the completion queue is closed"

/* a cheap early check: submissions check again under the lock */
static int queue_open(rl_state *st, CompletionsObject *self)
{
    AIO_LOCK();
    int closed = self->closed || !self->q;
    AIO_UNLOCK();
    if (closed) {
        raise_code(st, RL_ERR_CLOSED, QUEUE_CLOSED);
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(completions_fileno_doc,
"fileno()\n--\n\n"
"The queue's file descriptor (a pipe's read end): readable while completions wait.\n"
"Watch it (loop.add_reader) and call take(); never read it yourself.");

static PyObject *completions_fileno(CompletionsObject *self, PyObject *unused)
{
    rl_state *st = STATE(self);
    if (!st) return NULL;
    AIO_LOCK();
    int fd = self->closed || !self->q ? -1 : rl_completions_fd(self->q);
    AIO_UNLOCK();
    if (fd < 0) return raise_code(st, RL_ERR_CLOSED, QUEUE_CLOSED);
    return PyLong_FromLong(fd);
}

/* rl_submit of req (its id owned by keep) into self, or with timeout_ms >=
 * 0 rl_submit_acquire_wait: RL_OK or raised. */
static int submit_one(rl_state *st, CompletionsObject *self, ClientObject *client, rl_request *req, uint64_t tag,
                      int64_t timeout_ms, char *err)
{
    rl_client *rl = client_handle(st, client);
    if (!rl) return -1;
    AIO_LOCK();
    rl_target target = {NULL, NULL, self->q};
    int rc = self->closed || !self->q            ? RL_ERR_CLOSED
             : client_hold_queue(client, self) < 0 ? RL_ERR_NOMEM
             : timeout_ms < 0                    ? rl_submit(rl, req, tag, &target)
                                                 : rl_submit_acquire_wait(rl, req, timeout_ms, tag, &target);
    if (rc == RL_ERR_CLOSED && (self->closed || !self->q)) snprintf(err, ERRBUF, QUEUE_CLOSED);
    else if (rc) save_errmsg(err, rc);
    if (!rc) self->pending++; /* before another thread's take() can see it complete */
    AIO_UNLOCK();
    if (rc) {
        if (PyErr_Occurred()) return -1;
        raise_code(st, rc, err);
        return -1;
    }
    return 0;
}

/* What submit and submit_many check first: the argument count, an open
 * queue, and the tag (args[0], an int in 0..2**64-1). */
static int submit_prologue(rl_state *st, CompletionsObject *self, const char *what, PyObject *const *args,
                           Py_ssize_t nargs, Py_ssize_t want, uint64_t *tag)
{
    if (nargs != want) {
        PyErr_Format(PyExc_TypeError, "%s() takes %zd arguments (%zd given)", what, want, nargs);
        return -1;
    }
    if (queue_open(st, self) < 0) return -1;
    unsigned long long v = PyLong_AsUnsignedLongLong(args[0]);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    *tag = (uint64_t)v;
    return 0;
}

PyDoc_STRVAR(completions_submit_doc,
"submit(tag, limiter, id, permits, op, max_wait, now)\n--\n\n"
"Queue one decision of limiter (a ratelimit.Limiter) without waiting: op\n"
"0 acquire, 1 peek, 2 reserve (max_wait seconds, reserve only; None: 0),\n"
"3 acquire_at_most, 4 refund;\n"
"permits and now as Limiter.acquire takes them (None: 1, Redis time). Its\n"
"completion comes out of take() under tag (an int >= 0) exactly once.\n"
"Raises at once (nothing queued) for a bad argument or a closed client.");

static Py_ssize_t take_raw(CompletionsObject *self, Py_ssize_t max);
static PyObject *taken_list(rl_state *st, CompletionsObject *self, Py_ssize_t n);

/* rl_decide_from_lease of req: 1 decided (*out), 0 not, -1 raised. */
static int decide_from_lease(rl_state *st, ClientObject *client, const rl_request *req, rl_result *out)
{
    char err[ERRBUF];
    int decided = 0;
    rl_client *rl = client_handle(st, client);
    if (!rl) return -1;
    int rc = rl_decide_from_lease(rl, req, out, &decided);
    if (rc) save_errmsg(err, rc);
    if (!rc) return decided;
    raise_code(st, rc, err);
    return -1;
}

/* submit; then, for submit_now (now_take), the completions already due. A
 * decision from the lease in hand never touches the queue. */
static PyObject *submit_decision(CompletionsObject *self, PyObject *const *args, Py_ssize_t nargs, int now_take)
{
    rl_state *st = STATE(self);
    PyObject *keep = NULL;
    ClientObject *client;
    rl_request req;
    uint64_t tag;
    long op;
    char err[ERRBUF];

    if (!st || submit_prologue(st, self, now_take ? "submit_now" : "submit", args, nargs, 7, &tag) < 0) return NULL;
    op = PyLong_AsLong(args[4]);
    if (op == -1 && PyErr_Occurred()) return NULL;
    if (op < RL_OP_ACQUIRE || op > RL_OP_REFUND) return raise_fmt(st, RL_ERR_INVALID, "unknown operation %ld", op);
    if (limiter_request(st, args[1], args[2], args[3], args[6], args[5], (rl_op)op, &req, &keep, &client) < 0)
        return NULL;
    rl_result local;
    int decided = now_take ? decide_from_lease(st, client, &req, &local) : 0;
    int rc = decided ? 0 : submit_one(st, self, client, &req, tag, -1, err);
    Py_DECREF(keep); /* rl_submit copied the strings */
    if (decided < 0 || rc < 0) return NULL;
    if (decided) return result_new(st, &local);
    if (!now_take) Py_RETURN_NONE;
    PyObject *out = NULL;
    AIO_LOCK();
    Py_ssize_t n = take_raw(self, 1024);
    if (n == 1 && self->buf[0].tag == tag) { /* decided inside rl_submit, and nothing else came: the common case */
        rl_completion *c = &self->buf[0];
        if (c->status == RL_OK) out = result_new(st, &c->result);
        else raise_code(st, c->status, c->error[0] ? c->error : rl_strerror(c->status));
    } else if (n >= 0) {
        out = taken_list(st, self, n);
    }
    AIO_UNLOCK();
    return out;
}

static PyObject *completions_submit(CompletionsObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return submit_decision(self, args, nargs, 0);
}

PyDoc_STRVAR(completions_submit_now_doc,
"submit_now(tag, limiter, id, permits, op, max_wait, now)\n--\n\n"
"The decision from the lease in hand (its Result, nothing queued), else\n"
"submit(), then take() of what is already due. Returns its Result (or\n"
"raises its exception) when it alone came out, else take()'s list (its\n"
"own completion in it or still to come).");

static PyObject *completions_submit_now(CompletionsObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return submit_decision(self, args, nargs, 1);
}

PyDoc_STRVAR(completions_submit_many_doc,
"submit_many(tag, limiter, requests, now)\n--\n\n"
"Queue limiter.acquire_many(requests, now=now): request i completes under\n"
"tag + i. Returns how many were queued. As acquire_many, every request is\n"
"validated first: if one is invalid InvalidArgument is raised and nothing\n"
"is queued. (Should the check here and the core's ever disagree, the batch\n"
"runs as acquire_many(return_exceptions=True) does and its list is\n"
"returned instead.)");

static PyObject *completions_submit_many(CompletionsObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    rl_state *st = STATE(self);
    PyObject *keeps = NULL, *out = NULL;
    ClientObject *client;
    rl_request *reqs = NULL;
    Py_ssize_t n = 0, i;
    uint64_t tag;
    char err[ERRBUF];

    if (!st || submit_prologue(st, self, "submit_many", args, nargs, 4, &tag) < 0) return NULL;
    if (limiter_batch(st, args[1], args[2], args[3], &reqs, &keeps, &n, &client) < 0) return NULL;
    if (n == 0) return PyLong_FromLong(0);
    rl_client *rl = client_handle(st, client);
    if (!rl) goto done;
    if (rl_requests_validate(reqs, (size_t)n) != RL_OK) {
        /* nothing of a bad batch is submitted; rl_execute's refusal is the
         * exact error acquire_many raises */
        rl_result *results = PyMem_Calloc((size_t)n, sizeof *results);
        rl_outcome *outcomes = PyMem_Calloc((size_t)n, sizeof *outcomes);
        int rc;
        if (!results || !outcomes) {
            PyMem_Free(results);
            PyMem_Free(outcomes);
            PyErr_NoMemory();
            goto done;
        }
        CALL_WITHOUT_GIL(rc, err, rl_execute_each(rl, reqs, (size_t)n, results, outcomes));
        out = batch_outcomes(st, rc, err, results, outcomes, n, 1);
        PyMem_Free(results);
        PyMem_Free(outcomes);
        goto done;
    }
    for (i = 0; i < n; i++) {
        if (submit_one(st, self, client, &reqs[i], tag + (uint64_t)i, -1, err) < 0) {
            if (i == 0 && n > 1 && PyErr_ExceptionMatches(st->InvalidArgument)) {
                /* as rl_execute words it */
                PyErr_Clear();
                raise_fmt(st, RL_ERR_INVALID, "request 0: %s", err);
            }
            /* i > 0: out of memory or the like; what was queued completes
             * unseen, as a cancelled request does */
            goto done;
        }
    }
    out = PyLong_FromSsize_t(n);
done:
    Py_XDECREF(keeps);
    PyMem_Free(reqs);
    return out;
}

PyDoc_STRVAR(completions_submit_wait_doc,
"submit_wait(tag, client, limiter, id, permits, timeout, now)\n--\n\n"
"Queue limiter.acquire(id, permits, timeout=timeout, now=now) (client: the\n"
"limiter's), waiting in the core between its decisions, holding no thread.\n"
"Its completion comes out of take() as a Result. cancel(client, tag) stops\n"
"the wait (a decision already made stands).");

static PyObject *completions_submit_wait(CompletionsObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    rl_state *st = STATE(self);
    uint64_t tag;
    int64_t timeout_ms;
    rl_request req;
    PyObject *keep = NULL;
    ClientObject *client;
    char err[ERRBUF];

    if (!st || submit_prologue(st, self, "submit_wait", args, nargs, 7, &tag) < 0) return NULL;
    if (conv_seconds(st, args[5], "timeout", &timeout_ms) < 0) return NULL;
    if (limiter_request(st, args[2], args[3], args[4], args[6], NULL, RL_OP_ACQUIRE, &req, &keep, &client) < 0)
        return NULL;
    int rc = -1;
    if ((PyObject *)client != args[1]) raise_fmt(st, RL_ERR_INVALID, "the limiter belongs to another client");
    else rc = submit_one(st, self, client, &req, tag, timeout_ms, err);
    Py_DECREF(keep); /* the core copied the strings */
    if (rc < 0) return NULL;
    Py_RETURN_NONE;
}

/* ---- the primitives ------------------------------------------------------------------ */

/* What a primitive's completion becomes in take() (a decision's is a Result). */
enum { KIND_ACQUIRE = 1, KIND_DONE_FLAG, KIND_POP, KIND_COUNT, KIND_NONE };

/* One call of rl_submit_semaphore_* / _lock_* / _queue_*: the strings are
 * borrowed from the keep objects of the caller. */
typedef enum { P_SEM_ACQUIRE, P_LOCK_ACQUIRE, P_SEM_RELEASE, P_SEM_REFRESH, P_LOCK_RELEASE, P_LOCK_EXTEND, P_PUSH,
               P_POP, P_SEM_INFO, P_QUEUE_SIZE, P_QUEUE_REMOVE, P_RESET } prim_op;

typedef struct {
    prim_op op;
    const char *name, *id; /* id: permit id, owner token or message */
    Py_ssize_t id_len;
    int64_t permits, ms, timeout_ms; /* ms: lease or delay */
    const rl_spec *spec;             /* P_RESET: NULL = the stored one */
} prim_call;

static int prim_submit(rl_client *rl, const prim_call *p, uint64_t tag, const rl_target *t)
{
    switch (p->op) {
    case P_SEM_ACQUIRE:
        return rl_submit_semaphore_acquire(rl, p->name, p->permits, p->ms, p->timeout_ms, tag, t);
    case P_LOCK_ACQUIRE: return rl_submit_lock_acquire(rl, p->name, p->ms, p->timeout_ms, tag, t);
    case P_SEM_RELEASE: return rl_submit_semaphore_release(rl, p->name, p->id, tag, t);
    case P_SEM_REFRESH: return rl_submit_semaphore_refresh(rl, p->name, p->id, p->ms, tag, t);
    case P_LOCK_RELEASE: return rl_submit_lock_release(rl, p->name, p->id, tag, t);
    case P_LOCK_EXTEND: return rl_submit_lock_extend(rl, p->name, p->id, p->ms, tag, t);
    case P_PUSH: return rl_submit_queue_push(rl, p->name, p->id, (size_t)p->id_len, p->ms, tag, t);
    case P_POP: return rl_submit_queue_pop(rl, p->name, (size_t)p->permits, p->timeout_ms, tag, t);
    case P_SEM_INFO: return rl_submit_semaphore_info(rl, p->name, p->permits, tag, t);
    case P_QUEUE_SIZE: return rl_submit_queue_size(rl, p->name, tag, t);
    case P_QUEUE_REMOVE: return rl_submit_queue_remove(rl, p->name, p->id, (size_t)p->id_len, tag, t);
    case P_RESET: return rl_submit_reset(rl, p->name, p->id, p->spec, tag, t);
    }
    return RL_ERR_INVALID;
}

/* Queues p under tag for client; its completion comes out of take() as
 * kind (a permit with lease_ms). None, or NULL with an exception. */
static PyObject *submit_primitive(rl_state *st, CompletionsObject *self, PyObject *client, const prim_call *p,
                                  uint64_t tag, int kind, int64_t lease_ms)
{
    PyObject *key, *entry, *type, *value, *tb;
    char err[ERRBUF];
    int rc;
    if (!PyObject_TypeCheck(client, st->ClientType)) {
        PyErr_Format(PyExc_TypeError, "client must be a ratelimit.Client, not %.100s", Py_TYPE(client)->tp_name);
        return NULL;
    }
    ClientObject *c = (ClientObject *)client;
    rl_client *rl = client_handle(st, c);
    if (!rl) return NULL;
    if (!(key = PyLong_FromUnsignedLongLong(tag))) return NULL;
    if (kind == KIND_ACQUIRE) entry = Py_BuildValue("(iN)", kind, ms_to_seconds(lease_ms));
    else entry = Py_BuildValue("(iO)", kind, Py_None);
    if (!entry) {
        Py_DECREF(key);
        return NULL;
    }
    AIO_LOCK();
    int closed = self->closed || !self->q, known = 0;
    rc = closed ? RL_ERR_CLOSED : 0;
    if (!rc && !self->kinds && !(self->kinds = PyDict_New())) rc = RL_ERR_NOMEM;
    /* known before the completion can be taken */
    if (!rc && !(known = PyDict_SetItem(self->kinds, key, entry) == 0)) rc = RL_ERR_NOMEM;
    if (!rc) {
        rl_target target = {NULL, NULL, self->q};
        rc = client_hold_queue(c, self) < 0 ? RL_ERR_NOMEM : prim_submit(rl, p, tag, &target);
        if (rc && !PyErr_Occurred()) save_errmsg(err, rc);
    }
    if (rc && known) { /* nothing was queued */
        PyErr_Fetch(&type, &value, &tb);
        if (PyDict_DelItem(self->kinds, key) < 0) PyErr_Clear();
        PyErr_Restore(type, value, tb);
    }
    if (!rc) self->pending++;
    AIO_UNLOCK();
    Py_DECREF(entry);
    Py_DECREF(key);
    if (!rc) Py_RETURN_NONE;
    if (!PyErr_Occurred()) raise_code(st, rc, closed ? QUEUE_CLOSED : err);
    return NULL;
}

PyDoc_STRVAR(completions_submit_acquire_doc,
"submit_acquire(tag, client, name, permits, lease, timeout)\n--\n\n"
"Queue Client._semaphore_acquire(name, permits, lease, timeout), or with\n"
"permits None Client._lock_acquire(name, lease, timeout), waiting (up to\n"
"timeout seconds) in the core, holding no thread. Its completion comes out\n"
"of take() as (id, fencing_token, lease) or None, as the blocking call\n"
"returns. cancel(client, tag) stops the wait.");

static PyObject *completions_submit_acquire(CompletionsObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    rl_state *st = STATE(self);
    prim_call p = {P_SEM_ACQUIRE, NULL, NULL, 0, 1, 0, 0};
    PyObject *keep = NULL, *out;
    uint64_t tag;

    if (!st || submit_prologue(st, self, "submit_acquire", args, nargs, 6, &tag) < 0) return NULL;
    /* converted in the blocking call's order, so the same argument is blamed */
    if (args[3] == Py_None) p.op = P_LOCK_ACQUIRE;
    else if (conv_int64(st, args[3], "permits", &p.permits) < 0) return NULL;
    if (conv_seconds(st, args[4], "lease", &p.ms) < 0) return NULL;
    if (args[5] != Py_None && conv_seconds(st, args[5], "timeout", &p.timeout_ms) < 0) return NULL;
    if (conv_text(st, args[2], "name", 0, &keep, &p.name, NULL) < 0) return NULL;
    out = submit_primitive(st, self, args[1], &p, tag, KIND_ACQUIRE, p.ms);
    Py_DECREF(keep);
    return out;
}

PyDoc_STRVAR(completions_submit_held_doc,
"submit_held(tag, client, op, name, id, lease)\n--\n\n"
"Queue, for a held permit or lock, op 0: Client._semaphore_release(name,\n"
"id), 1: _semaphore_refresh(name, id, lease), 2: _lock_release(name, id),\n"
"3: _lock_extend(name, id, lease) (lease None for a release). Its completion\n"
"comes out of take() as the blocking call's bool.");

static PyObject *completions_submit_held(CompletionsObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    static const prim_op ops[] = {P_SEM_RELEASE, P_SEM_REFRESH, P_LOCK_RELEASE, P_LOCK_EXTEND};
    rl_state *st = STATE(self);
    prim_call p = {P_SEM_RELEASE, NULL, NULL, 0, 1, 0, 0};
    PyObject *keep_name = NULL, *keep_id = NULL, *out;
    uint64_t tag;
    long op;

    if (!st || submit_prologue(st, self, "submit_held", args, nargs, 6, &tag) < 0) return NULL;
    if ((op = PyLong_AsLong(args[2])) == -1 && PyErr_Occurred()) return NULL;
    if (op < 0 || op > 3) return raise_fmt(st, RL_ERR_INVALID, "unknown operation %ld", op);
    p.op = ops[op];
    int lock = p.op == P_LOCK_RELEASE || p.op == P_LOCK_EXTEND;
    if ((op & 1) && conv_seconds(st, args[5], "lease", &p.ms) < 0) return NULL;
    if (conv_text(st, args[3], "name", 0, &keep_name, &p.name, NULL) < 0) return NULL;
    if (conv_text(st, args[4], lock ? "token" : "permit id", 0, &keep_id, &p.id, NULL) < 0) {
        Py_DECREF(keep_name);
        return NULL;
    }
    out = submit_primitive(st, self, args[1], &p, tag, KIND_DONE_FLAG, 0);
    Py_DECREF(keep_name);
    Py_DECREF(keep_id);
    return out;
}

PyDoc_STRVAR(completions_submit_push_doc,
"submit_push(tag, client, queue, message, delay)\n--\n\n"
"Queue Client._queue_push(queue, message, delay); its completion comes out\n"
"of take() as the blocking call's bool.");

static PyObject *completions_submit_push(CompletionsObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    rl_state *st = STATE(self);
    prim_call p = {P_PUSH, NULL, NULL, 0, 1, 0, 0};
    PyObject *keep_q = NULL, *keep_m = NULL, *out;
    uint64_t tag;

    if (!st || submit_prologue(st, self, "submit_push", args, nargs, 5, &tag) < 0) return NULL;
    if (conv_seconds(st, args[4], "delay", &p.ms) < 0) return NULL;
    if (conv_text(st, args[2], "queue", 0, &keep_q, &p.name, NULL) < 0) return NULL;
    if (conv_text(st, args[3], "message", 1, &keep_m, &p.id, &p.id_len) < 0) {
        Py_DECREF(keep_q);
        return NULL;
    }
    out = submit_primitive(st, self, args[1], &p, tag, KIND_DONE_FLAG, 0);
    Py_DECREF(keep_q);
    Py_DECREF(keep_m);
    return out;
}

PyDoc_STRVAR(completions_submit_count_doc,
"submit_count(tag, client, op, name, arg)\n--\n\n"
"Queue op 0: Client._semaphore_holders(name), 1: _semaphore_available(name,\n"
"arg), 2: _queue_size(name), 3: _queue_remove(name, arg). Its completion\n"
"comes out of take() as the blocking call's int (remove: bool).");

static PyObject *completions_submit_count(CompletionsObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    static const prim_op ops[] = {P_SEM_INFO, P_SEM_INFO, P_QUEUE_SIZE, P_QUEUE_REMOVE};
    rl_state *st = STATE(self);
    prim_call p = {P_SEM_INFO, NULL, NULL, 0, 0, 0, 0, NULL};
    PyObject *keep_name = NULL, *keep_arg = NULL, *out;
    uint64_t tag;
    long op;

    if (!st || submit_prologue(st, self, "submit_count", args, nargs, 5, &tag) < 0) return NULL;
    if ((op = PyLong_AsLong(args[2])) == -1 && PyErr_Occurred()) return NULL;
    if (op < 0 || op > 3) return raise_fmt(st, RL_ERR_INVALID, "unknown operation %ld", op);
    p.op = ops[op];
    if (op == 1 && conv_int64(st, args[4], "permits", &p.permits) < 0) return NULL;
    if (op == 1 && p.permits == 0) return raise_fmt(st, RL_ERR_INVALID, "permits must be at least 1");
    if (conv_text(st, args[3], op >= 2 ? "queue" : "name", 0, &keep_name, &p.name, NULL) < 0) return NULL;
    if (op == 3 && conv_text(st, args[4], "message", 1, &keep_arg, &p.id, &p.id_len) < 0) {
        Py_DECREF(keep_name);
        return NULL;
    }
    out = submit_primitive(st, self, args[1], &p, tag, op == 3 ? KIND_DONE_FLAG : KIND_COUNT, 0);
    Py_DECREF(keep_name);
    Py_XDECREF(keep_arg);
    return out;
}

PyDoc_STRVAR(completions_submit_reset_doc,
"submit_reset(tag, client, limiter, id)\n--\n\n"
"Queue limiter.reset(id) (client: the limiter's, as for the other submit_*\n"
"calls); its completion comes out of take() as None.");

static PyObject *completions_submit_reset(CompletionsObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    rl_state *st = STATE(self);
    prim_call p = {P_RESET, NULL, NULL, 0, 0, 0, 0, NULL};
    rl_request req;
    ClientObject *client;
    PyObject *keep = NULL, *out;
    uint64_t tag;

    if (!st || submit_prologue(st, self, "submit_reset", args, nargs, 4, &tag) < 0) return NULL;
    if (limiter_request(st, args[2], args[3], NULL, NULL, NULL, RL_OP_ACQUIRE, &req, &keep, &client) < 0)
        return NULL;
    if ((PyObject *)client != args[1]) {
        Py_XDECREF(keep);
        return raise_fmt(st, RL_ERR_INVALID, "the limiter belongs to another client");
    }
    p.name = req.name;
    p.id = req.id;
    p.spec = req.stored_spec ? NULL : &req.spec;
    out = submit_primitive(st, self, (PyObject *)client, &p, tag, KIND_NONE, 0);
    Py_XDECREF(keep);
    return out;
}

PyDoc_STRVAR(completions_submit_pop_doc,
"submit_pop(tag, client, queue, max, timeout)\n--\n\n"
"Queue Client._queue_pop_wait(queue, max, timeout) (timeout None:\n"
"_queue_pop_ready), waiting in the core, holding no thread. Its completion\n"
"comes out of take() as a list of bytes ([] when the wait timed out);\n"
"messages taken before an error are handed over, as the blocking call does.\n"
"cancel(client, tag) stops the wait (messages taken meanwhile go back).");

static PyObject *completions_submit_pop(CompletionsObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    rl_state *st = STATE(self);
    prim_call p = {P_POP, NULL, NULL, 0, 1, 0, 0};
    PyObject *keep = NULL, *out;
    uint64_t tag;

    if (!st || submit_prologue(st, self, "submit_pop", args, nargs, 5, &tag) < 0) return NULL;
    if (conv_int64(st, args[3], "max", &p.permits) < 0) return NULL;
    if (p.permits < 0) p.permits = 0; /* size_t in the core: let it say "max must be in 1.." */
    if (args[4] != Py_None && conv_seconds(st, args[4], "timeout", &p.timeout_ms) < 0) return NULL;
    if (conv_text(st, args[2], "queue", 0, &keep, &p.name, NULL) < 0) return NULL;
    out = submit_primitive(st, self, args[1], &p, tag, KIND_POP, 0);
    Py_DECREF(keep);
    return out;
}

PyDoc_STRVAR(completions_cancel_doc,
"cancel(client, tag)\n--\n\n"
"Stop client's wait submitted under tag (submit_acquire, submit_pop): its\n"
"completion then has status ERR_CANCELLED, and what the core got for it\n"
"meanwhile goes back (a permit is released, messages are pushed back). A\n"
"wait that completed already (its completion not yet taken) is not undone.\n"
"Never blocks; a no-op on a closed client (closing completes every wait).");

static PyObject *completions_cancel(CompletionsObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    rl_state *st = STATE(self);
    if (!st) return NULL;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "cancel() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    if (!PyObject_TypeCheck(args[0], st->ClientType)) {
        PyErr_Format(PyExc_TypeError, "client must be a ratelimit.Client, not %.100s", Py_TYPE(args[0])->tp_name);
        return NULL;
    }
    unsigned long long tag = PyLong_AsUnsignedLongLong(args[1]);
    if (tag == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    /* a client shut down completes every wait itself: rl_cancel is a no-op */
    rl_client *rl = ((ClientObject *)args[0])->rl;
    int rc = rl ? rl_cancel(rl, (uint64_t)tag) : RL_OK;
    if (rc) return raise_code(st, rc, rl_errmsg());
    Py_RETURN_NONE;
}

/* ---- taking completions ------------------------------------------------------------------ */

/* A primitive's completion as the blocking call returns it; *status 0 for
 * a pop that got messages before failing (they are handed over). */
static PyObject *primitive_value(rl_state *st, int kind, PyObject *lease, rl_completion *c, int *status)
{
    if (kind == KIND_POP && c->messages.count) *status = RL_OK;
    if (*status != RL_OK) return make_exception(st, *status, c->error[0] ? c->error : rl_strerror(*status));
    switch (kind) {
    case KIND_ACQUIRE:
        if (!c->acquired) Py_RETURN_NONE;
        return Py_BuildValue("(sLO)", c->permit_id, (long long)c->fencing_token, lease);
    case KIND_DONE_FLAG: return PyBool_FromLong(c->value == 1);
    case KIND_COUNT: return PyLong_FromLongLong((long long)c->value);
    case KIND_NONE: Py_RETURN_NONE;
    default: {
        rl_messages *m = &c->messages;
        PyObject *list = PyList_New((Py_ssize_t)m->count);
        for (size_t i = 0; list && i < m->count; i++) {
            PyObject *b = PyBytes_FromStringAndSize(m->items[i], (Py_ssize_t)m->lens[i]);
            if (!b) Py_CLEAR(list);
            else PyList_SET_ITEM(list, (Py_ssize_t)i, b);
        }
        return list;
    }
    }
}

/* (tag, status, value) for c, its kind looked up (and forgotten) in kinds. */
static PyObject *completion_item(rl_state *st, CompletionsObject *self, rl_completion *c)
{
    PyObject *entry = NULL, *value;
    int status = c->status;
    if (self->kinds && PyDict_GET_SIZE(self->kinds)) {
        PyObject *key = PyLong_FromUnsignedLongLong(c->tag);
        if (!key) return NULL;
#if PY_VERSION_HEX >= 0x030D0000
        /* a strong reference, taken out at once (no borrowed one without a GIL) */
        if (PyDict_Pop(self->kinds, key, &entry) < 0) entry = NULL;
#else
        entry = PyDict_GetItemWithError(self->kinds, key);
        Py_XINCREF(entry);
        if (entry && PyDict_DelItem(self->kinds, key) < 0) Py_CLEAR(entry);
#endif
        Py_DECREF(key);
        if (!entry && PyErr_Occurred()) return NULL;
    }
    if (entry) {
        value = primitive_value(st, (int)PyLong_AsLong(PyTuple_GET_ITEM(entry, 0)), PyTuple_GET_ITEM(entry, 1), c,
                                &status);
        Py_DECREF(entry);
    } else {
        value = outcome_new(st, status, c->error, &c->result);
    }
    return value ? Py_BuildValue("(KiN)", (unsigned long long)c->tag, status, value) : NULL;
}

PyDoc_STRVAR(completions_take_doc,
"take(max=1024)\n--\n\n"
"Up to max completions that wait, as a list of (tag, status, value):\n"
"status 0 and what the blocking call returns (a Result for a decision), or\n"
"the status (ERR_*) and the exception the blocking call would raise. Never\n"
"blocks; [] when none waits.");

/* Moves up to max completions into self->buf: how many (0 when closed and
 * freed); -1 on MemoryError. */
static Py_ssize_t take_raw(CompletionsObject *self, Py_ssize_t max)
{
    if (!self->q) return 0; /* closed and freed */
    if ((size_t)max > self->bufcap) {
        rl_completion *grown = PyMem_Realloc(self->buf, (size_t)max * sizeof *grown);
        if (!grown) {
            PyErr_NoMemory();
            return -1;
        }
        self->buf = grown;
        self->bufcap = (size_t)max;
    }
    size_t n = rl_completions_take(self->q, self->buf, (size_t)max);
    self->pending -= (Py_ssize_t)n;
    return (Py_ssize_t)n;
}

/* The n completions take_raw moved, as take() returns them. */
static PyObject *taken_list(rl_state *st, CompletionsObject *self, Py_ssize_t n)
{
    /* on a MemoryError the rest is lost: their futures would hang, but so does everything after one */
    PyObject *out = PyList_New(n);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = out ? completion_item(st, self, &self->buf[i]) : NULL;
        rl_messages_free(&self->buf[i].messages); /* ours since taken */
        if (!item) Py_CLEAR(out);
        else PyList_SET_ITEM(out, i, item);
    }
    return out;
}

static PyObject *completions_take(CompletionsObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    rl_state *st = STATE(self);
    Py_ssize_t max = 1024, n;
    if (!st) return NULL;
    if (nargs > 1) {
        PyErr_Format(PyExc_TypeError, "take() takes at most 1 argument (%zd given)", nargs);
        return NULL;
    }
    if (nargs == 1) {
        max = PyLong_AsSsize_t(args[0]);
        if (max == -1 && PyErr_Occurred()) return NULL;
        if (max < 1) return raise_fmt(st, RL_ERR_INVALID, "max must be at least 1 (got %zd)", max);
        if (max > 65536) max = 65536;
    }
    PyObject *out = NULL;
    AIO_LOCK();
    if ((n = take_raw(self, max)) >= 0) {
        out = taken_list(st, self, n);
        if (self->closed && self->pending == 0) queue_free(self); /* no completion is due any more */
    }
    AIO_UNLOCK();
    return out;
}

PyDoc_STRVAR(completions_close_doc,
"close()\n--\n\n"
"No more submissions. The queue (and its file descriptor) is freed now, or\n"
"once the last client that may still complete into it is closed (or has\n"
"nothing pending here). Closing twice is a no-op.");

static PyObject *completions_close(CompletionsObject *self, PyObject *unused)
{
    AIO_LOCK();
    if (!self->closed) {
        self->closed = 1;
        if (self->holders == 0 || self->pending == 0) queue_free(self);
    }
    AIO_UNLOCK();
    Py_RETURN_NONE;
}

static PyObject *completions_get_pending(CompletionsObject *self, void *c)
{
    AIO_LOCK();
    Py_ssize_t pending = self->pending;
    AIO_UNLOCK();
    return PyLong_FromSsize_t(pending);
}

static PyObject *completions_get_closed(CompletionsObject *self, void *c)
{
    AIO_LOCK();
    int closed = self->closed;
    AIO_UNLOCK();
    return PyBool_FromLong(closed);
}

static PyObject *completions_get_freed(CompletionsObject *self, void *c)
{
    AIO_LOCK();
    int freed = self->q == NULL;
    AIO_UNLOCK();
    return PyBool_FromLong(freed);
}

static PyMethodDef completions_methods[] = {
    {"fileno", (PyCFunction)completions_fileno, METH_NOARGS, completions_fileno_doc},
    {"submit", (PyCFunction)(void (*)(void))completions_submit, METH_FASTCALL, completions_submit_doc},
    {"submit_now", (PyCFunction)(void (*)(void))completions_submit_now, METH_FASTCALL, completions_submit_now_doc},
    {"submit_many", (PyCFunction)(void (*)(void))completions_submit_many, METH_FASTCALL, completions_submit_many_doc},
    {"submit_wait", (PyCFunction)(void (*)(void))completions_submit_wait, METH_FASTCALL, completions_submit_wait_doc},
    {"submit_acquire", (PyCFunction)(void (*)(void))completions_submit_acquire, METH_FASTCALL,
     completions_submit_acquire_doc},
    {"submit_held", (PyCFunction)(void (*)(void))completions_submit_held, METH_FASTCALL, completions_submit_held_doc},
    {"submit_push", (PyCFunction)(void (*)(void))completions_submit_push, METH_FASTCALL, completions_submit_push_doc},
    {"submit_count", (PyCFunction)(void (*)(void))completions_submit_count, METH_FASTCALL, completions_submit_count_doc},
    {"submit_reset", (PyCFunction)(void (*)(void))completions_submit_reset, METH_FASTCALL, completions_submit_reset_doc},
    {"submit_pop", (PyCFunction)(void (*)(void))completions_submit_pop, METH_FASTCALL, completions_submit_pop_doc},
    {"cancel", (PyCFunction)(void (*)(void))completions_cancel, METH_FASTCALL, completions_cancel_doc},
    {"take", (PyCFunction)(void (*)(void))completions_take, METH_FASTCALL, completions_take_doc},
    {"close", (PyCFunction)completions_close, METH_NOARGS, completions_close_doc},
    {NULL}};

static PyGetSetDef completions_getset[] = {
    {"pending", (getter)completions_get_pending, NULL,
     "Submitted and not yet taken: completions still due (cancelled ones too).", NULL},
    {"closed", (getter)completions_get_closed, NULL, "True once close() was called.", NULL},
    {"freed", (getter)completions_get_freed, NULL,
     "True once the core's queue and its file descriptor are gone.", NULL},
    {NULL}};

PyDoc_STRVAR(completions_doc,
"Completions()\n--\n\n"
"A completion queue for asynchronous calls (used by ratelimit.aio, one per\n"
"event loop and client): submit() queues a decision, submit_acquire(),\n"
"submit_held(), submit_push() and submit_pop() a primitive, fileno()\n"
"becomes readable while completions wait, take() returns them.");

static PyType_Slot completions_slots[] = {
    {Py_tp_new, completions_new},
    {Py_tp_dealloc, completions_dealloc},
    {Py_tp_methods, completions_methods},
    {Py_tp_getset, completions_getset},
    {Py_tp_doc, (void *)completions_doc},
    {0, NULL}};

PyType_Spec completions_spec = {
    .name = "ratelimit._ratelimit.Completions",
    .basicsize = sizeof(CompletionsObject),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = completions_slots,
};
