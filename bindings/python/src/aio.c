/* ratelimit._ratelimit.Completions: an rl_completions queue for an event
 * loop (ratelimit.aio keeps one per loop and client).
 *
 * submit() queues a decision with rl_submit (non-blocking: it builds the
 * command and hands it to the client's I/O thread) under an integer tag;
 * the queue's eventfd (fileno()) becomes readable when completions wait;
 * take() turns them into (tag, status, Result or exception) tuples, one
 * wake-up of the loop for many completions. Everything here runs with the
 * GIL held: each call is a few microseconds and never waits.
 *
 * Lifetime: the core's queue must outlive every client that may still post
 * to it. A client that submits into a queue keeps a reference to it (in
 * ClientObject.queues) until its rl_client_close has returned (every
 * request in flight is then completed, with RL_ERR_CLOSED if need be), or
 * until nothing is pending in that queue any more. close() frees the core's
 * queue at once when no client holds it, else when the last one lets go. */
#include "module.h"
#include "internal.h" /* rl_validate_request: a batch is checked as the core checks it */

typedef struct {
    PyObject_HEAD
    rl_completions *q;
    Py_ssize_t pending; /* submitted and not yet taken: completions still due */
    Py_ssize_t holders; /* clients whose queues list holds this queue */
    int closed;
    rl_completion *buf; /* take()'s scratch space */
    size_t bufcap;
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
}

/* One client lets go of the queue. */
static void queue_unhold(CompletionsObject *self)
{
    if (--self->holders == 0 && self->closed) queue_free(self);
}

/* Keeps queue alive for c's requests; drops the queues nothing is pending in. */
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
    PyObject *list = c->queues;
    if (!list) return;
    c->queues = NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) queue_unhold((CompletionsObject *)PyList_GET_ITEM(list, i));
    Py_DECREF(list);
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

static int queue_open(rl_state *st, CompletionsObject *self)
{
    if (self->closed || !self->q) {
        raise_code(st, RL_ERR_CLOSED, "the completion queue is closed");
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(completions_fileno_doc,
"fileno()\n--\n\n"
"The queue's file descriptor (an eventfd): readable while completions wait.\n"
"Watch it (loop.add_reader) and call take(); never read it yourself.");

static PyObject *completions_fileno(CompletionsObject *self, PyObject *unused)
{
    rl_state *st = STATE(self);
    if (!st || queue_open(st, self) < 0) return NULL;
    return PyLong_FromLong(rl_completions_fd(self->q));
}

/* rl_submit of req (its id owned by keep) into self: RL_OK or raised. */
static int submit_one(rl_state *st, CompletionsObject *self, ClientObject *client, rl_request *req, uint64_t tag,
                      char *err)
{
    rl_target target = {NULL, NULL, self->q};
    rl_client *rl = client_enter(st, client);
    if (!rl) return -1;
    int rc = client_hold_queue(client, self) < 0 ? RL_ERR_NOMEM : rl_submit(rl, req, tag, &target);
    if (rc) save_errmsg(err, rc);
    client_leave(client);
    if (rc) {
        if (PyErr_Occurred()) return -1;
        raise_code(st, rc, err);
        return -1;
    }
    self->pending++;
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

static PyObject *completions_submit(CompletionsObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    rl_state *st = STATE(self);
    PyObject *keep = NULL;
    ClientObject *client;
    rl_request req;
    uint64_t tag;
    long op;
    char err[ERRBUF];

    if (!st || submit_prologue(st, self, "submit", args, nargs, 7, &tag) < 0) return NULL;
    op = PyLong_AsLong(args[4]);
    if (op == -1 && PyErr_Occurred()) return NULL;
    if (op < RL_OP_ACQUIRE || op > RL_OP_REFUND) return raise_fmt(st, RL_ERR_INVALID, "unknown operation %ld", op);
    if (limiter_request(st, args[1], args[2], args[3], args[6], args[5], (rl_op)op, &req, &keep, &client) < 0)
        return NULL;
    int rc = submit_one(st, self, client, &req, tag, err);
    Py_DECREF(keep); /* rl_submit copied the strings */
    if (rc < 0) return NULL;
    Py_RETURN_NONE;
}

/* What rl_execute would refuse in a batch of acquires, so that nothing of a
 * bad batch is submitted: its own validation of each request (a stored spec
 * is known only once rl_submit resolves it: its names and permits then). */
static int batch_suspect(const rl_request *reqs, Py_ssize_t n)
{
    if (n > 100000) return 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        const rl_request *r = &reqs[i];
        int bad = r->stored_spec ? rl_check_name("name", r->name) || rl_check_id(r->id) || r->permits < 1
                                 : rl_validate_request(r) != RL_OK;
        if (bad) return 1;
    }
    return 0;
}

PyDoc_STRVAR(completions_submit_many_doc,
"submit_many(tag, limiter, requests, now)\n--\n\n"
"Queue limiter.acquire_many(requests, now=now): request i completes under\n"
"tag + i. Returns how many were queued. As acquire_many, every request is\n"
"validated first: if one is invalid InvalidArgument is raised and nothing\n"
"is queued. (Should the check here and the core's ever disagree, the batch\n"
"runs as acquire_many does and its list of Results is returned instead.)");

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
    rl_client *rl = client_enter(st, client);
    if (!rl) goto done;
    if (batch_suspect(reqs, n)) {
        /* rl_execute validates the whole batch before sending anything: its
         * refusal is the exact error acquire_many raises */
        rl_result *results = PyMem_Calloc((size_t)n, sizeof *results);
        int rc;
        if (!results) {
            client_leave(client);
            PyErr_NoMemory();
            goto done;
        }
        Py_BEGIN_ALLOW_THREADS
        rc = rl_execute(rl, reqs, (size_t)n, results);
        if (rc) save_errmsg(err, rc);
        Py_END_ALLOW_THREADS
        client_leave(client);
        if (rc) raise_code(st, rc, err);
        else out = results_list(st, results, n);
        PyMem_Free(results);
        goto done;
    }
    client_leave(client);
    for (i = 0; i < n; i++) {
        if (submit_one(st, self, client, &reqs[i], tag + (uint64_t)i, err) < 0) {
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

PyDoc_STRVAR(completions_take_doc,
"take(max=1024)\n--\n\n"
"Up to max completions that wait, as a list of (tag, status, value):\n"
"status 0 and a Result, or the status (ERR_*) and the exception the\n"
"blocking call would raise. Never blocks; [] when none waits.");

static PyObject *completions_take(CompletionsObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    rl_state *st = STATE(self);
    Py_ssize_t max = 1024;
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
    if (!self->q) return PyList_New(0); /* closed and freed */
    if ((size_t)max > self->bufcap) {
        rl_completion *grown = PyMem_Realloc(self->buf, (size_t)max * sizeof *grown);
        if (!grown) return PyErr_NoMemory();
        self->buf = grown;
        self->bufcap = (size_t)max;
    }
    size_t n = rl_completions_take(self->q, self->buf, (size_t)max);
    self->pending -= (Py_ssize_t)n;
    PyObject *out = PyList_New((Py_ssize_t)n);
    if (!out) return NULL; /* taken and lost: their futures would hang, but so does everything after a MemoryError */
    for (size_t i = 0; i < n; i++) {
        const rl_completion *c = &self->buf[i];
        PyObject *value;
        if (c->status == RL_OK) {
            value = result_new(st, &c->result);
        } else {
            value = make_exception(st, c->status, c->error[0] ? c->error : rl_strerror(c->status));
        }
        PyObject *item = value ? Py_BuildValue("(KiN)", (unsigned long long)c->tag, c->status, value) : NULL;
        if (!item) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, (Py_ssize_t)i, item);
    }
    return out;
}

PyDoc_STRVAR(completions_close_doc,
"close()\n--\n\n"
"No more submissions. The queue (and its file descriptor) is freed now, or\n"
"once the last client that may still complete into it is closed (or has\n"
"nothing pending here). Closing twice is a no-op.");

static PyObject *completions_close(CompletionsObject *self, PyObject *unused)
{
    if (self->closed) Py_RETURN_NONE;
    self->closed = 1;
    if (self->holders == 0) queue_free(self);
    Py_RETURN_NONE;
}

static PyObject *completions_get_pending(CompletionsObject *self, void *c)
{
    return PyLong_FromSsize_t(self->pending);
}

static PyObject *completions_get_closed(CompletionsObject *self, void *c)
{
    return PyBool_FromLong(self->closed);
}

static PyObject *completions_get_freed(CompletionsObject *self, void *c)
{
    return PyBool_FromLong(self->q == NULL);
}

static PyMethodDef completions_methods[] = {
    {"fileno", (PyCFunction)completions_fileno, METH_NOARGS, completions_fileno_doc},
    {"submit", (PyCFunction)(void (*)(void))completions_submit, METH_FASTCALL, completions_submit_doc},
    {"submit_many", (PyCFunction)(void (*)(void))completions_submit_many, METH_FASTCALL, completions_submit_many_doc},
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
"A completion queue for asynchronous decisions (used by ratelimit.aio, one\n"
"per event loop and client): submit() queues a decision, fileno() becomes\n"
"readable while completions wait, take() returns them.");

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
