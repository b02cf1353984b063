/* ratelimit.Limiter: a named rate limit applied per id. */
#include "module.h"

/* ---- Limiter ------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    ClientObject *client;
    PyObject *name;     /* bytes, UTF-8, owns the C string */
    PyObject *name_str; /* as given, for repr and the name property */
    rl_spec spec;
    int stored; /* 1: every call uses the spec stored in Redis (spec is unused) */
    int64_t lease_ms; /* rl_request.lease_ms of every call: 0 off */
} LimiterObject;

static PyObject *limiter_new(PyTypeObject *tp, PyObject *args, PyObject *kw)
{
    return tp->tp_alloc(tp, 0);
}

/* Made with a rate, a spec stored for name must be the same one; made
 * without (spec NULL), one must be stored (the core's rl_config_check: its
 * cache, and the outage rule). */
static int check_config(rl_state *st, ClientObject *client, const char *name, const rl_spec *spec)
{
    char err[ERRBUF];
    int rc;
    rl_client *rl = client_handle(st, client);
    if (!rl) {
        PyErr_Clear();
        return 0;
    }
    CALL_WITHOUT_GIL(rc, err, rl_config_check(rl, name, spec));
    if (rc) {
        raise_code(st, rc, err);
        return -1;
    }
    return 0;
}

/* lease: None (off) or seconds in 0.001..3600, refused when the limiter is
 * made rather than on its first call. */
int conv_lease(rl_state *st, PyObject *o, int64_t *out_ms)
{
    *out_ms = 0;
    if (o == Py_None) return 0;
    if (conv_seconds(st, o, "lease", out_ms) == 0 && *out_ms >= 1 && *out_ms <= RL_LEASE_MAX_MS) return 0;
    if (PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(st->InvalidArgument)) return -1; /* a wrong type: TypeError */
        PyErr_Clear(); /* NaN, inf, negative: said below, as zero and too large are */
    }
    PyObject *repr = PyObject_Repr(o);
    const char *text = repr ? PyUnicode_AsUTF8(repr) : NULL;
    if (text)
        raise_fmt(st, RL_ERR_INVALID, "lease must be in 0.001..%d seconds (got %.50s; None: no lease)",
                  RL_LEASE_MAX_MS / 1000, text);
    Py_XDECREF(repr);
    return -1;
}

static int limiter_init(LimiterObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"client", "name", "rate", "algorithm", "burst", "initial_tokens", "per_client", "lease",
                             NULL};
    PyObject *client, *name, *rate = Py_None, *algorithm = Py_None, *burst = Py_None, *initial = Py_None,
                              *per_client = Py_False, *lease = Py_None, *keep = NULL;
    rl_state *st = STATE(self);
    const char *name_s;
    rl_spec spec;
    int64_t lease_ms;
    int stored;

    if (!st) return -1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|O$OOOOO:Limiter", kwlist, &client, &name, &rate, &algorithm,
                                     &burst, &initial, &per_client, &lease))
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
    if (!PyUnicode_Check(name)) {
        PyErr_Format(PyExc_TypeError, "name must be str, not %.100s", Py_TYPE(name)->tp_name);
        return -1;
    }
    if (conv_lease(st, lease, &lease_ms) < 0) return -1;
    stored = rate == Py_None;
    memset(&spec, 0, sizeof spec);
    if (stored) {
        int t = PyObject_IsTrue(per_client);
        if (t < 0) return -1;
        if (algorithm != Py_None || burst != Py_None || initial != Py_None || t) {
            raise_code(st, RL_ERR_INVALID, "rate=None uses the spec stored in Redis: algorithm, burst, "
                       "initial_tokens and per_client come from it (change it with client.configure)");
            return -1;
        }
    } else if (conv_spec(st, rate, algorithm, burst, initial, per_client, &spec) < 0) {
        return -1;
    }
    if (conv_text(st, name, "name", 0, &keep, &name_s, NULL) < 0) return -1;
    if (!*name_s) {
        Py_DECREF(keep);
        raise_code(st, RL_ERR_INVALID, "name must not be empty");
        return -1;
    }
    if (check_config(st, (ClientObject *)client, name_s, stored ? NULL : &spec) < 0) {
        Py_DECREF(keep);
        return -1;
    }
    /* the fields are set once: calls read them without a lock (and with the
     * GIL released); a second __init__, even one racing this, is refused */
    int first = 0;
    Py_BEGIN_CRITICAL_SECTION(self);
    if (!self->client) {
        Py_INCREF(client);
        Py_INCREF(name);
        self->name = keep;
        self->name_str = name;
        self->spec = spec;
        self->stored = stored;
        self->lease_ms = lease_ms;
        self->client = (ClientObject *)client;
        first = 1;
    }
    Py_END_CRITICAL_SECTION();
    if (!first) {
        Py_DECREF(keep);
        raise_code(st, RL_ERR_INVALID, "Limiter.__init__ may be called only once");
        return -1;
    }
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
    req->stored_spec = self->stored;
    req->lease_ms = self->lease_ms; /* every op: the core ignores it but for acquires */
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
    rl_result res = {0}; /* every field defined, whatever the core fills */
    char err[ERRBUF];
    int rc;
    rl_client *rl = client_handle(st, self->client);
    if (!rl) {
        Py_DECREF(keep);
        return NULL;
    }
    cancel_ctx cc = {NULL, (cancel && cancel != Py_None) ? cancel : NULL};
    rl_wait wait = {timeout_ms, cancel_cb, &cc};
    CALL_CANCELLABLE(cc, rc, err,
                     timeout_ms > 0 ? rl_acquire_wait(rl, req, &wait, &res) : rl_execute(rl, req, 1, &res));
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

/* acquire_at_most and refund: (id, permits, *, now) for op. */
static PyObject *limiter_simple_op(LimiterObject *self, PyObject *args, PyObject *kw, rl_op op, const char *fmt)
{
    static char *kwlist[] = {"id", "permits", "now", NULL};
    PyObject *id, *permits = NULL, *now = Py_None, *keep = NULL;
    rl_state *st = STATE(self);
    rl_request req;

    if (!st || limiter_ready(st, self) < 0) return NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, fmt, kwlist, &id, &permits, &now)) return NULL;
    if (build_request(st, self, id, permits, now, op, &req, &keep) < 0) return NULL;
    return limiter_run(self, st, &req, keep, 0, NULL);
}

PyDoc_STRVAR(limiter_acquire_at_most_doc,
"acquire_at_most(id, permits, *, now=None)\n--\n\n"
"Take as many of permits as are available right now, at least 1 (go-redis\n"
"redis_rate's AllowAtMost, Bucket4j's tryConsumeAsMuchAsPossible).\n\n"
"Returns a Result: allowed when at least one permit was taken, granted says\n"
"how many (1..permits; 0 when denied). permits may exceed the capacity.\n"
"With several rates, granted is what every rate can give.");

static PyObject *limiter_acquire_at_most(LimiterObject *self, PyObject *args, PyObject *kw)
{
    return limiter_simple_op(self, args, kw, RL_OP_ACQUIRE_UP_TO, "OO|$O:acquire_at_most");
}

PyDoc_STRVAR(limiter_refund_doc,
"refund(id, permits=1, *, now=None)\n--\n\n"
"Give permits back to id (Bucket4j's addTokens), for work that was admitted\n"
"and then not done; the state never goes above full (refunding more than\n"
"was taken just fills it). Returns a Result: granted is permits, remaining\n"
"the permits available after it. sliding_log takes back the newest permits.");

static PyObject *limiter_refund(LimiterObject *self, PyObject *args, PyObject *kw)
{
    return limiter_simple_op(self, args, kw, RL_OP_REFUND, "O|O$O:refund");
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
    rl_client *rl = client_handle(st, self->client);
    if (rl) {
        CALL_WITHOUT_GIL(rc, err, rl_reset(rl, PyBytes_AS_STRING(self->name), id_s, self->stored ? NULL : &self->spec));
    }
    Py_DECREF(keep);
    if (!rl) return NULL;
    if (rc) return raise_code(st, rc, err);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(limiter_acquire_many_doc,
"acquire_many(requests, *, now=None, return_exceptions=False)\n--\n\n"
"Acquire for several ids in one pipelined round trip.\n\n"
"requests: an iterable of ids or (id, permits) pairs. Returns a list of\n"
"Results in the same order. Every request is validated first: if one is\n"
"invalid, InvalidArgument is raised and nothing is sent.\n\n"
"Each request has its own outcome: what Redis decided for one is reported\n"
"whatever happens to the others (one key of the wrong type, a timeout or\n"
"a lost connection part-way, a cluster node down). return_exceptions=True\n"
"returns the list with each failed request's exception in its place (as\n"
"asyncio.gather does); otherwise the first failure is raised, its message\n"
"naming the request, and carries that list as .results. The on_error\n"
"policy decides per request, for those Redis could not be asked or did\n"
"not answer in time.");

static PyObject *limiter_acquire_many(LimiterObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"requests", "now", "return_exceptions", NULL};
    PyObject *items, *now = Py_None, *keeps = NULL, *out = NULL;
    rl_state *st = STATE(self);
    rl_request *reqs = NULL;
    rl_result *results = NULL;
    rl_outcome *outcomes = NULL;
    Py_ssize_t n;
    char err[ERRBUF];
    int rc, return_exceptions = 0;

    if (!st || limiter_ready(st, self) < 0) return NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$Op:acquire_many", kwlist, &items, &now, &return_exceptions))
        return NULL;
    if (build_batch(st, self, items, now, &reqs, &keeps, &n) < 0) return NULL;
    if (n == 0) return PyList_New(0);
    results = PyMem_Calloc((size_t)n, sizeof *results);
    outcomes = PyMem_Calloc((size_t)n, sizeof *outcomes);
    if (!results || !outcomes) {
        PyErr_NoMemory();
        goto done;
    }
    rl_client *rl = client_handle(st, self->client);
    if (!rl) goto done;
    CALL_WITHOUT_GIL(rc, err, rl_execute_each(rl, reqs, (size_t)n, results, outcomes));
    out = batch_outcomes(st, rc, err, results, outcomes, n, return_exceptions);
done:
    Py_XDECREF(keeps);
    PyMem_Free(reqs);
    PyMem_Free(results);
    PyMem_Free(outcomes);
    return out;
}

PyDoc_STRVAR(limiter_close_doc,
"close()\n--\n\n"
"End this client's leases on the limiter's name now: their unused permits\n"
"go back to Redis (one round trip per lease, bounded by the client's\n"
"timeout). A with block calls it on exit. Never raises: a give-back that\n"
"fails leaves the permits booked until the lease's validity ends (safe,\n"
"as when a process dies). Later calls still work and take new blocks;\n"
"without a lease it does nothing.");

static PyObject *limiter_close(LimiterObject *self, PyObject *unused)
{
    rl_state *st = STATE(self);
    if (st && self->client) client_give_back(st, self->client, PyBytes_AS_STRING(self->name));
    Py_RETURN_NONE;
}

/* The spec this limiter's calls use: its own, or the one stored in Redis as
 * the client sees it (its cache, read again at most every config_refresh). */
static int current_spec(rl_state *st, LimiterObject *self, rl_spec *out)
{
    char err[ERRBUF];
    int rc;
    if (limiter_ready(st, self) < 0) return -1;
    if (!self->stored) {
        *out = self->spec;
        return 0;
    }
    rl_client *rl = client_handle(st, self->client);
    if (!rl) return -1;
    CALL_WITHOUT_GIL(rc, err, rl_config_resolve(rl, PyBytes_AS_STRING(self->name), out));
    if (rc) {
        raise_code(st, rc, err);
        return -1;
    }
    return 0;
}

/* The keys of id's state, one per rate of spec (its first only: all = 0). */
static PyObject *entity_keys(rl_state *st, LimiterObject *self, const rl_spec *spec, PyObject *id, int all)
{
    PyObject *keep = NULL, *out = NULL;
    const char *id_s;
    if (conv_text(st, id, "id", 0, &keep, &id_s, NULL) < 0) return NULL;
    rl_client *rl = client_handle(st, self->client);
    if (!rl) goto done;
    int rates = all ? (int)spec->more_count + 1 : 1;
    out = PyList_New(0);
    for (int i = 0; out && i < rates; i++) {
        char small[256], *buf = small;
        int n = rl_key_build(rl, PyBytes_AS_STRING(self->name), id_s, spec->algorithm, spec->scope, i, small,
                             sizeof small);
        if (n >= (int)sizeof small && (buf = PyMem_Malloc((size_t)n + 1)))
            rl_key_build(rl, PyBytes_AS_STRING(self->name), id_s, spec->algorithm, spec->scope, i, buf, (size_t)n + 1);
        PyObject *k = n < 0 ? raise_code(st, n, rl_errmsg()) : buf ? PyUnicode_FromFormat("%s", buf) : PyErr_NoMemory();
        if (buf != small) PyMem_Free(buf);
        if (!k || PyList_Append(out, k) < 0) Py_CLEAR(out);
        Py_XDECREF(k);
    }
done:
    Py_DECREF(keep);
    return out;
}

PyDoc_STRVAR(limiter_key_doc,
"key(id)\n--\n\n"
"The Redis key holding id's state, as the library names it (of the first\n"
"rate; keys(id) lists one per rate).");

static PyObject *limiter_key(LimiterObject *self, PyObject *id)
{
    rl_state *st = STATE(self);
    rl_spec spec;
    if (!st || current_spec(st, self, &spec) < 0) return NULL;
    PyObject *list = entity_keys(st, self, &spec, id, 0), *out;
    if (!list) return NULL;
    out = PyList_GET_ITEM(list, 0);
    Py_INCREF(out);
    Py_DECREF(list);
    return out;
}

PyDoc_STRVAR(limiter_keys_doc,
"keys(id)\n--\n\n"
"The Redis keys holding id's state, one per rate, the first rate's first.");

static PyObject *limiter_keys(LimiterObject *self, PyObject *id)
{
    rl_state *st = STATE(self);
    rl_spec spec;
    if (!st || current_spec(st, self, &spec) < 0) return NULL;
    return entity_keys(st, self, &spec, id, 1);
}

PyDoc_STRVAR(limiter_spec_tuple_doc,
"_spec()\n--\n\n"
"(algorithm, [(limit, period_seconds)...], [burst or None...], initial_tokens, per_client, text):\n"
"the spec calls use now (for rate=None, the one stored in Redis, as cached).");

static PyObject *limiter_spec_tuple(LimiterObject *self, PyObject *unused)
{
    rl_state *st = STATE(self);
    rl_spec spec;
    if (!st || current_spec(st, self, &spec) < 0) return NULL;
    return spec_to_python(&spec);
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
static PyObject *limiter_get_stored(LimiterObject *self, void *c)
{
    return PyBool_FromLong(self->stored);
}
static PyObject *limiter_get_lease(LimiterObject *self, void *c)
{
    if (!self->lease_ms) Py_RETURN_NONE;
    return ms_to_seconds(self->lease_ms);
}

/* The getters of the spec: a stored one is read as current_spec says. */
#define SPEC_GETTER(fn, body)                                                                                        \
    static PyObject *fn(LimiterObject *self, void *c)                                                                \
    {                                                                                                                \
        rl_state *st = STATE(self);                                                                                  \
        rl_spec spec;                                                                                                \
        if (!st || current_spec(st, self, &spec) < 0) return NULL;                                                   \
        body                                                                                                         \
    }

SPEC_GETTER(limiter_get_algorithm, {
    const char *name = rl_algorithm_name(spec.algorithm);
    return PyUnicode_FromString(name ? name : "?");
})
SPEC_GETTER(limiter_get_rate, { return Py_BuildValue("(LN)", (long long)spec.limit, ms_to_seconds(spec.period_ms)); })
SPEC_GETTER(limiter_get_period, { return ms_to_seconds(spec.period_ms); })
SPEC_GETTER(limiter_get_burst, {
    if (!spec.burst) Py_RETURN_NONE;
    return PyLong_FromLongLong(spec.burst);
})

static PyObject *limiter_repr(LimiterObject *self)
{
    const char *alg = rl_algorithm_name(self->spec.algorithm);
    char text[1024];
    PyObject *body, *out;
    if (!self->name_str) return PyUnicode_FromFormat("<%s (uninitialized)>", Py_TYPE(self)->tp_name);
    if (self->stored) { /* no round trip here: a stored spec is named as such */
        body = PyUnicode_FromString("the spec stored in Redis");
    } else if (self->spec.more_count || self->spec.initial_tokens || self->spec.scope) {
        rl_spec_format(&self->spec, text, sizeof text);
        body = PyUnicode_FromString(text);
    } else {
        PyObject *period = ms_to_seconds(self->spec.period_ms);
        if (!period) return NULL;
        if (self->spec.burst)
            body = PyUnicode_FromFormat("%lld per %S s, %s, burst %lld", (long long)self->spec.limit, period, alg,
                                        (long long)self->spec.burst);
        else
            body = PyUnicode_FromFormat("%lld per %S s, %s", (long long)self->spec.limit, period, alg);
        Py_DECREF(period);
    }
    if (!body) return NULL;
    if (self->lease_ms) {
        PyObject *lease = ms_to_seconds(self->lease_ms);
        out = lease ? PyUnicode_FromFormat("<%s %R: %U, lease %S s>", Py_TYPE(self)->tp_name, self->name_str, body,
                                           lease)
                    : NULL;
        Py_XDECREF(lease);
    } else {
        out = PyUnicode_FromFormat("<%s %R: %U>", Py_TYPE(self)->tp_name, self->name_str, body);
    }
    Py_DECREF(body);
    return out;
}

static PyMethodDef limiter_methods[] = {
    {"acquire", (PyCFunction)(void (*)(void))limiter_acquire, METH_VARARGS | METH_KEYWORDS, limiter_acquire_doc},
    {"peek", (PyCFunction)(void (*)(void))limiter_peek, METH_VARARGS | METH_KEYWORDS, limiter_peek_doc},
    {"_reserve", (PyCFunction)(void (*)(void))limiter_reserve_result, METH_VARARGS | METH_KEYWORDS,
     limiter_reserve_result_doc},
    {"reset", (PyCFunction)limiter_reset, METH_O, limiter_reset_doc},
    {"acquire_at_most", (PyCFunction)(void (*)(void))limiter_acquire_at_most, METH_VARARGS | METH_KEYWORDS,
     limiter_acquire_at_most_doc},
    {"refund", (PyCFunction)(void (*)(void))limiter_refund, METH_VARARGS | METH_KEYWORDS, limiter_refund_doc},
    {"keys", (PyCFunction)limiter_keys, METH_O, limiter_keys_doc},
    {"_spec", (PyCFunction)limiter_spec_tuple, METH_NOARGS, limiter_spec_tuple_doc},
    {"acquire_many", (PyCFunction)(void (*)(void))limiter_acquire_many, METH_VARARGS | METH_KEYWORDS,
     limiter_acquire_many_doc},
    {"key", (PyCFunction)limiter_key, METH_O, limiter_key_doc},
    {"close", (PyCFunction)limiter_close, METH_NOARGS, limiter_close_doc},
    {NULL}};

static PyGetSetDef limiter_getset[] = {
    {"name", (getter)limiter_get_name, NULL, "The limiter's name.", NULL},
    {"client", (getter)limiter_get_client, NULL, "The Client it runs on.", NULL},
    {"algorithm", (getter)limiter_get_algorithm, NULL, "The algorithm's name, e.g. 'gcra'.", NULL},
    {"rate", (getter)limiter_get_rate, NULL,
     "(limit, period_seconds): permits per period (leaky_bucket: capacity, drain time).", NULL},
    {"period", (getter)limiter_get_period, NULL, "The period in seconds.", NULL},
    {"burst", (getter)limiter_get_burst, NULL, "token_bucket/gcra capacity of the first rate if set, else None.", NULL},
    {"stored", (getter)limiter_get_stored, NULL,
     "True when made with rate=None: every call uses the spec stored in Redis.", NULL},
    {"lease", (getter)limiter_get_lease, NULL,
     "Seconds a block of permits taken from Redis stays valid for local decisions; None: no lease.", NULL},
    {NULL}};

PyDoc_STRVAR(limiter_doc,
"Limiter(client, name, rate=None, *, algorithm=None, burst=None, initial_tokens=None, per_client=False,\n"
"        lease=None)\n--\n\n"
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

