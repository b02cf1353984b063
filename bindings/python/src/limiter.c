/* ratelimit.Limiter (a named rate limit applied per id) and ratelimit.Result
 * (the outcome of one decision). */
#include "module.h"

/* ---- Result ------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    rl_result r;
} ResultObject;

PyObject *result_new(rl_state *st, const rl_result *r)
{
    ResultObject *self = PyObject_New(ResultObject, st->ResultType);
    if (!self) return NULL;
    self->r = *r;
    return (PyObject *)self;
}

/* A list of n Results. */
PyObject *results_list(rl_state *st, const rl_result *results, Py_ssize_t n)
{
    PyObject *out = PyList_New(n);
    for (Py_ssize_t i = 0; out && i < n; i++) {
        PyObject *r = result_new(st, &results[i]);
        if (!r) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, r);
    }
    return out;
}

static void result_dealloc(ResultObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_Free(self);
    Py_DECREF(tp);
}

static PyObject *result_allowed(ResultObject *self, void *c)
{
    return PyBool_FromLong(self->r.allowed);
}
static PyObject *result_limit(ResultObject *self, void *c)
{
    return PyLong_FromLongLong(self->r.limit);
}
static PyObject *result_remaining(ResultObject *self, void *c)
{
    return PyLong_FromLongLong(self->r.remaining);
}
static PyObject *result_retry_after(ResultObject *self, void *c)
{
    /* None when allowed (the C result says -1 ms) */
    if (self->r.retry_after_ms < 0) Py_RETURN_NONE;
    return ms_to_seconds(self->r.retry_after_ms);
}
static PyObject *result_reset_after(ResultObject *self, void *c)
{
    return ms_to_seconds(self->r.reset_after_ms);
}
static PyObject *result_wait(ResultObject *self, void *c)
{
    return ms_to_seconds(self->r.wait_ms);
}
static PyObject *result_fallback(ResultObject *self, void *c)
{
    return PyBool_FromLong(self->r.fallback);
}

static PyGetSetDef result_getset[] = {
    {"allowed", (getter)result_allowed, NULL, "True if the permits were granted (or the slot booked).", NULL},
    {"limit", (getter)result_limit, NULL, "The most permits the limiter can hold (burst for token_bucket/gcra).", NULL},
    {"remaining", (getter)result_remaining, NULL, "Permits still available right now.", NULL},
    {"retry_after", (getter)result_retry_after, NULL,
     "Seconds until this request could pass, as a float; None when it was allowed.", NULL},
    {"reset_after", (getter)result_reset_after, NULL, "Seconds until the limiter is back to full.", NULL},
    {"wait", (getter)result_wait, NULL,
     "reserve(): seconds to wait before acting on the booked slot; 0.0 otherwise.", NULL},
    {"fallback", (getter)result_fallback, NULL,
     "True when Redis was unreachable and the client's on_redis_error policy decided.", NULL},
    {NULL}};

static int result_bool(ResultObject *self)
{
    return self->r.allowed != 0;
}

static PyObject *result_repr(ResultObject *self)
{
    char retry[32];
    if (self->r.retry_after_ms < 0) snprintf(retry, sizeof retry, "None");
    else snprintf(retry, sizeof retry, "%.3f", (double)self->r.retry_after_ms / 1000.0);
    char text[300];
    snprintf(text, sizeof text,
             "Result(allowed=%s, limit=%lld, remaining=%lld, retry_after=%s, reset_after=%.3f, wait=%.3f%s)",
             self->r.allowed ? "True" : "False", (long long)self->r.limit, (long long)self->r.remaining, retry,
             (double)self->r.reset_after_ms / 1000.0, (double)self->r.wait_ms / 1000.0,
             self->r.fallback ? ", fallback=True" : "");
    return PyUnicode_FromString(text);
}

PyDoc_STRVAR(result_doc,
"The outcome of one rate-limit decision.\n\n"
"A Result is truthy iff the request was allowed. Times are seconds as floats;\n"
"retry_after is None when the request was allowed. Being denied is a result,\n"
"not an error: only the decorator and reserve() raise RateLimitExceeded.");

static PyType_Slot result_slots[] = {
    {Py_tp_dealloc, result_dealloc},
    {Py_tp_getset, result_getset},
    {Py_tp_repr, result_repr},
    {Py_tp_doc, (void *)result_doc},
    {Py_nb_bool, result_bool},
    {0, NULL}};

PyType_Spec result_spec = {
    .name = "ratelimit.Result",
    .basicsize = sizeof(ResultObject),
#if PY_VERSION_HEX >= 0x030A0000
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
#else
    .flags = Py_TPFLAGS_DEFAULT,
#endif
    .slots = result_slots,
};

/* ---- Limiter ------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    ClientObject *client;
    PyObject *name;     /* bytes, UTF-8, owns the C string */
    PyObject *name_str; /* as given, for repr and the name property */
    rl_spec spec;
} LimiterObject;

static PyObject *limiter_new(PyTypeObject *tp, PyObject *args, PyObject *kw)
{
    return tp->tp_alloc(tp, 0);
}

static int limiter_init(LimiterObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"client", "name", "rate", "algorithm", "burst", NULL};
    PyObject *client, *name, *rate, *algorithm = NULL, *burst = Py_None, *keep = NULL;
    rl_state *st = STATE(self);
    const char *name_s;
    rl_spec spec;

    if (!st) return -1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|$OO:Limiter", kwlist, &client, &name, &rate, &algorithm,
                                     &burst))
        return -1;
    if (self->client) {
        /* calls in flight read name and spec with the GIL released */
        raise_code(st, RL_ERR_INVALID, "Limiter.__init__ may be called only once");
        return -1;
    }
    if (!PyObject_TypeCheck(client, st->ClientType)) {
        PyErr_Format(PyExc_TypeError, "client must be a ratelimit.Client, not %.100s", Py_TYPE(client)->tp_name);
        return -1;
    }
    memset(&spec, 0, sizeof spec);
    if (!PyUnicode_Check(name)) {
        PyErr_Format(PyExc_TypeError, "name must be str, not %.100s", Py_TYPE(name)->tp_name);
        return -1;
    }
    /* the algorithm: the core parses it */
    if (algorithm == NULL) {
        spec.algorithm = RL_GCRA;
    } else {
        const char *a;
        if (!PyUnicode_Check(algorithm)) {
            PyErr_Format(PyExc_TypeError, "algorithm must be str, not %.100s", Py_TYPE(algorithm)->tp_name);
            return -1;
        }
        if (!(a = PyUnicode_AsUTF8(algorithm))) return -1;
        rl_algorithm alg;
        if (rl_algorithm_parse(a, &alg)) {
            raise_code(st, RL_ERR_INVALID, rl_errmsg());
            return -1;
        }
        spec.algorithm = alg;
    }
    /* the rate: "10/minute" (the core parses it) or (limit, period_seconds) */
    if (PyUnicode_Check(rate)) {
        const char *text = PyUnicode_AsUTF8(rate);
        if (!text) return -1;
        if (rl_parse_rate(text, &spec.limit, &spec.period_ms)) {
            raise_code(st, RL_ERR_INVALID, rl_errmsg());
            return -1;
        }
    } else if (PyTuple_Check(rate) && PyTuple_GET_SIZE(rate) == 2) {
        if (conv_int64(st, PyTuple_GET_ITEM(rate, 0), "rate limit", &spec.limit) < 0) return -1;
        if (conv_seconds(st, PyTuple_GET_ITEM(rate, 1), "rate period", &spec.period_ms) < 0) return -1;
    } else {
        PyErr_Format(PyExc_TypeError,
                     "rate must be a str such as '10/minute' or a (limit, period_seconds) tuple, not %.100s",
                     Py_TYPE(rate)->tp_name);
        return -1;
    }
    if (burst != Py_None && conv_int64(st, burst, "burst", &spec.burst) < 0) return -1;
    if (rl_spec_validate(&spec)) { /* a bad limiter fails where it is made */
        raise_code(st, RL_ERR_INVALID, rl_errmsg());
        return -1;
    }
    if (conv_text(st, name, "name", 0, &keep, &name_s, NULL) < 0) return -1;
    if (!*name_s) {
        Py_DECREF(keep);
        raise_code(st, RL_ERR_INVALID, "name must not be empty");
        return -1;
    }
    Py_INCREF(client);
    Py_XSETREF(self->client, (ClientObject *)client);
    Py_XSETREF(self->name, keep);
    Py_INCREF(name);
    Py_XSETREF(self->name_str, name);
    self->spec = spec;
    return 0;
}

static int limiter_traverse(LimiterObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->client);
    return 0;
}

static int limiter_clear(LimiterObject *self)
{
    Py_CLEAR(self->client);
    Py_CLEAR(self->name);
    Py_CLEAR(self->name_str);
    return 0;
}

static void limiter_dealloc(LimiterObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    limiter_clear(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static int limiter_ready(rl_state *st, LimiterObject *self)
{
    if (!self->client) {
        raise_code(st, RL_ERR_INVALID, "the Limiter was not initialized");
        return -1;
    }
    return 0;
}

/* Fills req for id/permits/now; *keep owns the id bytes. */
static int build_request(rl_state *st, LimiterObject *self, PyObject *id, PyObject *permits, PyObject *now, rl_op op,
                         rl_request *req, PyObject **keep)
{
    memset(req, 0, sizeof *req);
    req->name = PyBytes_AS_STRING(self->name);
    req->spec = self->spec;
    req->op = op;
    req->permits = 1;
    if (permits && permits != Py_None && conv_int64(st, permits, "permits", &req->permits) < 0) return -1;
    if (now && now != Py_None && conv_seconds(st, now, "now", &req->now_ms) < 0) return -1;
    return conv_text(st, id, "id", 0, keep, &req->id, NULL);
}

/* For aio.c: the request limiter's acquire / peek / reserve would send
 * (max_wait: reserve only, None = 0), and its client (borrowed). */
int limiter_request(rl_state *st, PyObject *limiter, PyObject *id, PyObject *permits, PyObject *now,
                    PyObject *max_wait, rl_op op, rl_request *req, PyObject **keep, ClientObject **client)
{
    LimiterObject *self = (LimiterObject *)limiter;
    int64_t max_wait_ms = 0;
    if (!PyObject_TypeCheck(limiter, st->LimiterType)) {
        PyErr_Format(PyExc_TypeError, "limiter must be a ratelimit.Limiter, not %.100s", Py_TYPE(limiter)->tp_name);
        return -1;
    }
    if (limiter_ready(st, self) < 0) return -1;
    if (op == RL_OP_RESERVE && max_wait && max_wait != Py_None &&
        conv_seconds(st, max_wait, "max_wait", &max_wait_ms) < 0)
        return -1;
    if (build_request(st, self, id, permits, now, op, req, keep) < 0) return -1;
    req->max_wait_ms = max_wait_ms;
    *client = self->client;
    return 0;
}

/* acquire_many's requests: an iterable of ids or (id, permits) pairs ->
 * *n requests (PyMem, the caller frees) whose bytes *keeps owns. */
static int build_batch(rl_state *st, LimiterObject *self, PyObject *items, PyObject *now, rl_request **reqs_out,
                       PyObject **keeps_out, Py_ssize_t *n_out)
{
    PyObject *seq, *keeps = NULL;
    rl_request *reqs = NULL;
    Py_ssize_t n;
    *reqs_out = NULL;
    *keeps_out = NULL;
    *n_out = 0;
    if (PyUnicode_Check(items) || PyBytes_Check(items)) {
        PyErr_SetString(PyExc_TypeError, "requests must be an iterable of ids or (id, permits) pairs, not a single id");
        return -1;
    }
    if (!(seq = PySequence_Fast(items, "requests must be an iterable of ids or (id, permits) pairs"))) return -1;
    n = PySequence_Fast_GET_SIZE(seq);
    if (n == 0) {
        Py_DECREF(seq);
        return 0;
    }
    reqs = PyMem_Calloc((size_t)n, sizeof *reqs);
    keeps = PyList_New(n);
    if (!reqs || !keeps) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i), *id = item, *permits = NULL, *keep = NULL;
        if (PyTuple_Check(item) || PyList_Check(item)) {
            if (PySequence_Size(item) != 2) {
                PyErr_Format(PyExc_TypeError, "requests[%zd] must be an id or an (id, permits) pair", i);
                goto fail;
            }
            id = PySequence_Fast_GET_ITEM(item, 0);
            permits = PySequence_Fast_GET_ITEM(item, 1);
        }
        if (build_request(st, self, id, permits, now, RL_OP_ACQUIRE, &reqs[i], &keep) < 0) goto fail;
        PyList_SET_ITEM(keeps, i, keep);
    }
    Py_DECREF(seq);
    *reqs_out = reqs;
    *keeps_out = keeps;
    *n_out = n;
    return 0;
fail:
    /* a partially filled keeps list holds NULLs, which list dealloc skips */
    Py_XDECREF(keeps);
    Py_DECREF(seq);
    PyMem_Free(reqs);
    return -1;
}

/* For aio.c: acquire_many's requests for limiter. */
int limiter_batch(rl_state *st, PyObject *limiter, PyObject *items, PyObject *now, rl_request **reqs,
                  PyObject **keeps, Py_ssize_t *n, ClientObject **client)
{
    if (!PyObject_TypeCheck(limiter, st->LimiterType)) {
        PyErr_Format(PyExc_TypeError, "limiter must be a ratelimit.Limiter, not %.100s", Py_TYPE(limiter)->tp_name);
        return -1;
    }
    if (limiter_ready(st, (LimiterObject *)limiter) < 0) return -1;
    *client = ((LimiterObject *)limiter)->client;
    return build_batch(st, (LimiterObject *)limiter, items, now, reqs, keeps, n);
}

/* One request through rl_execute, or rl_acquire_wait when it may wait. */
static PyObject *limiter_run(LimiterObject *self, rl_state *st, rl_request *req, PyObject *keep, int64_t timeout_ms,
                             PyObject *cancel)
{
    rl_result res;
    char err[ERRBUF];
    int rc;
    rl_client *rl = client_enter(st, self->client);
    if (!rl) {
        Py_DECREF(keep);
        return NULL;
    }
    cancel_ctx cc = {NULL, (cancel && cancel != Py_None) ? cancel : NULL};
    rl_wait wait = {timeout_ms, cancel_cb, &cc};
    cc.ts = PyEval_SaveThread();
    rc = timeout_ms > 0 ? rl_acquire_wait(rl, req, &wait, &res) : rl_execute(rl, req, 1, &res);
    if (rc) save_errmsg(err, rc);
    PyEval_RestoreThread(cc.ts);
    client_leave(self->client);
    Py_DECREF(keep);
    if (PyErr_Occurred()) return NULL;
    if (rc) return raise_code(st, rc, err);
    return result_new(st, &res);
}

PyDoc_STRVAR(limiter_acquire_doc,
"acquire(id, permits=1, *, timeout=None, cancel=None, now=None)\n--\n\n"
"Take permits for id (a user, an IP...) if the limit allows, in one round trip.\n\n"
"Returns a Result, truthy iff allowed; being denied is not an error.\n"
"timeout: seconds to keep retrying (sleeping retry_after between attempts,\n"
"never past the deadline) before returning the last denied Result; None or\n"
"0 decides at once. The GIL is released while waiting and Ctrl-C stops the\n"
"wait. cancel: a callable polled while waiting; a true return stops the\n"
"wait with Cancelled. now: an explicit clock in seconds since the epoch,\n"
"for tests and replays (default: the Redis server's clock).");

static PyObject *limiter_acquire(LimiterObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"id", "permits", "timeout", "cancel", "now", NULL};
    PyObject *id, *permits = NULL, *timeout = Py_None, *cancel = Py_None, *now = Py_None, *keep = NULL;
    rl_state *st = STATE(self);
    int64_t timeout_ms = 0;
    rl_request req;

    if (!st || limiter_ready(st, self) < 0) return NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O$OOO:acquire", kwlist, &id, &permits, &timeout, &cancel, &now))
        return NULL;
    if (timeout != Py_None && conv_seconds(st, timeout, "timeout", &timeout_ms) < 0) return NULL;
    if (cancel != Py_None && !PyCallable_Check(cancel)) {
        PyErr_SetString(PyExc_TypeError, "cancel must be callable");
        return NULL;
    }
    if (build_request(st, self, id, permits, now, RL_OP_ACQUIRE, &req, &keep) < 0) return NULL;
    if (timeout_ms > 0 && req.now_ms) {
        Py_DECREF(keep);
        return raise_code(st, RL_ERR_INVALID, "now cannot be combined with timeout (an explicit clock never advances)");
    }
    return limiter_run(self, st, &req, keep, timeout_ms, cancel);
}

PyDoc_STRVAR(limiter_peek_doc,
"peek(id, permits=1, *, now=None)\n--\n\n"
"The Result acquire() would give now, without consuming or writing anything.");

static PyObject *limiter_peek(LimiterObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"id", "permits", "now", NULL};
    PyObject *id, *permits = NULL, *now = Py_None, *keep = NULL;
    rl_state *st = STATE(self);
    rl_request req;

    if (!st || limiter_ready(st, self) < 0) return NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O$O:peek", kwlist, &id, &permits, &now)) return NULL;
    if (build_request(st, self, id, permits, now, RL_OP_PEEK, &req, &keep) < 0) return NULL;
    return limiter_run(self, st, &req, keep, 0, NULL);
}

PyDoc_STRVAR(limiter_reserve_result_doc,
"_reserve(id, permits=1, *, max_wait=0.0, now=None)\n--\n\n"
"Low level reserve(): the raw Result (wait holds the seconds to wait).");

static PyObject *limiter_reserve_result(LimiterObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"id", "permits", "max_wait", "now", NULL};
    PyObject *id, *permits = NULL, *max_wait = Py_None, *now = Py_None, *keep = NULL;
    rl_state *st = STATE(self);
    rl_request req;
    int64_t max_wait_ms = 0;

    if (!st || limiter_ready(st, self) < 0) return NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O$OO:reserve", kwlist, &id, &permits, &max_wait, &now)) return NULL;
    if (max_wait != Py_None && conv_seconds(st, max_wait, "max_wait", &max_wait_ms) < 0) return NULL;
    if (build_request(st, self, id, permits, now, RL_OP_RESERVE, &req, &keep) < 0) return NULL;
    req.max_wait_ms = max_wait_ms;
    return limiter_run(self, st, &req, keep, 0, NULL);
}

PyDoc_STRVAR(limiter_reset_doc,
"reset(id)\n--\n\n"
"Forget id's state for this limiter's algorithm: it starts afresh.");

static PyObject *limiter_reset(LimiterObject *self, PyObject *id)
{
    rl_state *st = STATE(self);
    PyObject *keep = NULL;
    const char *id_s;
    char err[ERRBUF];
    int rc = 0;

    if (!st || limiter_ready(st, self) < 0) return NULL;
    if (conv_text(st, id, "id", 0, &keep, &id_s, NULL) < 0) return NULL;
    rl_client *rl = client_enter(st, self->client);
    if (rl) {
        Py_BEGIN_ALLOW_THREADS
        rc = rl_reset(rl, PyBytes_AS_STRING(self->name), id_s, &self->spec);
        if (rc) save_errmsg(err, rc);
        Py_END_ALLOW_THREADS
        client_leave(self->client);
    }
    Py_DECREF(keep);
    if (!rl) return NULL;
    if (rc) return raise_code(st, rc, err);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(limiter_acquire_many_doc,
"acquire_many(requests, *, now=None)\n--\n\n"
"Acquire for several ids in one pipelined round trip.\n\n"
"requests: an iterable of ids or (id, permits) pairs. Returns a list of\n"
"Results in the same order. Every request is validated first: if one is\n"
"invalid, InvalidArgument is raised and nothing is sent.");

static PyObject *limiter_acquire_many(LimiterObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"requests", "now", NULL};
    PyObject *items, *now = Py_None, *keeps = NULL, *out = NULL;
    rl_state *st = STATE(self);
    rl_request *reqs = NULL;
    rl_result *results = NULL;
    Py_ssize_t n;
    char err[ERRBUF];
    int rc;

    if (!st || limiter_ready(st, self) < 0) return NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$O:acquire_many", kwlist, &items, &now)) return NULL;
    if (build_batch(st, self, items, now, &reqs, &keeps, &n) < 0) return NULL;
    if (n == 0) return PyList_New(0);
    if (!(results = PyMem_Calloc((size_t)n, sizeof *results))) {
        PyErr_NoMemory();
        goto done;
    }
    rl_client *rl = client_enter(st, self->client);
    if (!rl) goto done;
    Py_BEGIN_ALLOW_THREADS
    rc = rl_execute(rl, reqs, (size_t)n, results);
    if (rc) save_errmsg(err, rc);
    Py_END_ALLOW_THREADS
    client_leave(self->client);
    if (rc) {
        raise_code(st, rc, err);
        goto done;
    }
    out = results_list(st, results, n);
done:
    Py_XDECREF(keeps);
    PyMem_Free(reqs);
    PyMem_Free(results);
    return out;
}

PyDoc_STRVAR(limiter_key_doc,
"key(id)\n--\n\n"
"The Redis key holding id's state, as the library names it.");

static PyObject *limiter_key(LimiterObject *self, PyObject *id)
{
    rl_state *st = STATE(self);
    PyObject *keep = NULL, *out = NULL;
    const char *id_s;

    if (!st || limiter_ready(st, self) < 0) return NULL;
    if (conv_text(st, id, "id", 0, &keep, &id_s, NULL) < 0) return NULL;
    rl_client *rl = client_enter(st, self->client);
    if (rl) {
        char small[256];
        int n = rl_key(rl, PyBytes_AS_STRING(self->name), id_s, self->spec.algorithm, small, sizeof small);
        if (n < 0) {
            raise_code(st, n, rl_errmsg());
        } else if ((size_t)n < sizeof small) {
            out = PyUnicode_DecodeUTF8(small, n, "surrogateescape");
        } else {
            char *big = PyMem_Malloc((size_t)n + 1);
            if (!big) PyErr_NoMemory();
            else {
                rl_key(rl, PyBytes_AS_STRING(self->name), id_s, self->spec.algorithm, big, (size_t)n + 1);
                out = PyUnicode_DecodeUTF8(big, n, "surrogateescape");
                PyMem_Free(big);
            }
        }
        client_leave(self->client);
    }
    Py_DECREF(keep);
    return out;
}

static PyObject *limiter_get_name(LimiterObject *self, void *c)
{
    if (!self->name_str) Py_RETURN_NONE;
    Py_INCREF(self->name_str);
    return self->name_str;
}
static PyObject *limiter_get_client(LimiterObject *self, void *c)
{
    if (!self->client) Py_RETURN_NONE;
    Py_INCREF(self->client);
    return (PyObject *)self->client;
}
static PyObject *limiter_get_algorithm(LimiterObject *self, void *c)
{
    const char *name = rl_algorithm_name(self->spec.algorithm);
    return PyUnicode_FromString(name ? name : "?");
}
static PyObject *limiter_get_rate(LimiterObject *self, void *c)
{
    return Py_BuildValue("(LN)", (long long)self->spec.limit, ms_to_seconds(self->spec.period_ms));
}
static PyObject *limiter_get_period(LimiterObject *self, void *c)
{
    return ms_to_seconds(self->spec.period_ms);
}
static PyObject *limiter_get_burst(LimiterObject *self, void *c)
{
    if (!self->spec.burst) Py_RETURN_NONE;
    return PyLong_FromLongLong(self->spec.burst);
}

static PyObject *limiter_repr(LimiterObject *self)
{
    const char *alg = rl_algorithm_name(self->spec.algorithm);
    PyObject *period, *out;
    if (!self->name_str) return PyUnicode_FromFormat("<%s (uninitialized)>", Py_TYPE(self)->tp_name);
    if (!(period = ms_to_seconds(self->spec.period_ms))) return NULL;
    if (self->spec.burst)
        out = PyUnicode_FromFormat("<%s %R: %lld per %S s, %s, burst %lld>", Py_TYPE(self)->tp_name, self->name_str,
                                   (long long)self->spec.limit, period, alg, (long long)self->spec.burst);
    else
        out = PyUnicode_FromFormat("<%s %R: %lld per %S s, %s>", Py_TYPE(self)->tp_name, self->name_str,
                                   (long long)self->spec.limit, period, alg);
    Py_DECREF(period);
    return out;
}

static PyMethodDef limiter_methods[] = {
    {"acquire", (PyCFunction)(void (*)(void))limiter_acquire, METH_VARARGS | METH_KEYWORDS, limiter_acquire_doc},
    {"peek", (PyCFunction)(void (*)(void))limiter_peek, METH_VARARGS | METH_KEYWORDS, limiter_peek_doc},
    {"_reserve", (PyCFunction)(void (*)(void))limiter_reserve_result, METH_VARARGS | METH_KEYWORDS,
     limiter_reserve_result_doc},
    {"reset", (PyCFunction)limiter_reset, METH_O, limiter_reset_doc},
    {"acquire_many", (PyCFunction)(void (*)(void))limiter_acquire_many, METH_VARARGS | METH_KEYWORDS,
     limiter_acquire_many_doc},
    {"key", (PyCFunction)limiter_key, METH_O, limiter_key_doc},
    {NULL}};

static PyGetSetDef limiter_getset[] = {
    {"name", (getter)limiter_get_name, NULL, "The limiter's name.", NULL},
    {"client", (getter)limiter_get_client, NULL, "The Client it runs on.", NULL},
    {"algorithm", (getter)limiter_get_algorithm, NULL, "The algorithm's name, e.g. 'gcra'.", NULL},
    {"rate", (getter)limiter_get_rate, NULL,
     "(limit, period_seconds): permits per period (leaky_bucket: capacity, drain time).", NULL},
    {"period", (getter)limiter_get_period, NULL, "The period in seconds.", NULL},
    {"burst", (getter)limiter_get_burst, NULL, "token_bucket/gcra capacity if set, else None.", NULL},
    {NULL}};

PyDoc_STRVAR(limiter_doc,
"Limiter(client, name, rate, *, algorithm='gcra', burst=None)\n--\n\n"
"A named rate limit applied per id. Use Client.limiter() to make one.");

static PyType_Slot limiter_slots[] = {
    {Py_tp_new, limiter_new},
    {Py_tp_init, limiter_init},
    {Py_tp_dealloc, limiter_dealloc},
    {Py_tp_traverse, limiter_traverse},
    {Py_tp_clear, limiter_clear},
    {Py_tp_methods, limiter_methods},
    {Py_tp_getset, limiter_getset},
    {Py_tp_repr, limiter_repr},
    {Py_tp_doc, (void *)limiter_doc},
    {0, NULL}};

PyType_Spec limiter_spec = {
    .name = "ratelimit._ratelimit.Limiter",
    .basicsize = sizeof(LimiterObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = limiter_slots,
};

