/* ratelimit._ratelimit: the CPython binding of the C core.
 *
 * Modelled on CPython's Modules/_sqlite: multi-phase init, heap types, and
 * the exception classes in module state. Every Redis round trip runs with
 * the GIL released; nothing Python is touched while it is released, except
 * by the cancel callback, which takes the GIL back first. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "ratelimit.h"

/* ---- module state --------------------------------------------------------- */

typedef struct {
    PyObject *RateLimitError;
    PyObject *InvalidArgument;
    PyObject *ConnectionError;
    PyObject *Timeout;
    PyObject *ProtocolError;
    PyObject *RedisError;
    PyObject *Cancelled;
    PyObject *ClientClosed;
    PyObject *RateLimitExceeded;
    PyTypeObject *ClientType;
    PyTypeObject *LimiterType;
    PyTypeObject *ResultType;
} rl_state;

static struct PyModuleDef module_def;

static inline rl_state *get_state(PyObject *module)
{
    return (rl_state *)PyModule_GetState(module);
}

/* The state of the module that defined tp or one of its bases (Python
 * subclasses of our types have no module of their own). */
static rl_state *state_of_type(PyTypeObject *tp)
{
#if PY_VERSION_HEX >= 0x030B0000
    PyObject *m = PyType_GetModuleByDef(tp, &module_def);
    if (!m) return NULL;
    return get_state(m);
#else
    PyObject *mro = tp->tp_mro;
    for (Py_ssize_t i = 0; mro && i < PyTuple_GET_SIZE(mro); i++) {
        PyTypeObject *base = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
        if (!PyType_HasFeature(base, Py_TPFLAGS_HEAPTYPE)) continue;
        PyObject *m = ((PyHeapTypeObject *)base)->ht_module;
        if (m && PyModule_GetDef(m) == &module_def) return get_state(m);
    }
    PyErr_Format(PyExc_TypeError, "%s is not a ratelimit type", tp->tp_name);
    return NULL;
#endif
}

#define STATE(obj) state_of_type(Py_TYPE(obj))

/* ---- errors ------------------------------------------------------------------ */

#define ERRBUF 600

/* rl_errmsg() is thread-local and the cancel callback may run Python code
 * (signal handlers) that calls the core again: copy it while still in the
 * released region, right after the call. */
static void save_errmsg(char *buf, int rc)
{
    const char *m = rl_errmsg();
    snprintf(buf, ERRBUF, "%s", (m && *m) ? m : rl_strerror(rc));
}

static PyObject *exception_for(rl_state *st, int rc)
{
    switch (rc) {
    case RL_ERR_INVALID: return st->InvalidArgument;
    case RL_ERR_CONNECTION: return st->ConnectionError;
    case RL_ERR_TIMEOUT: return st->Timeout;
    case RL_ERR_PROTOCOL: return st->ProtocolError;
    case RL_ERR_REDIS: return st->RedisError;
    case RL_ERR_CANCELLED: return st->Cancelled;
    case RL_ERR_CLOSED: return st->ClientClosed;
    default: return st->RateLimitError;
    }
}

/* Raises the exception class for rc with message msg and .code = rc. */
static PyObject *raise_code(rl_state *st, int rc, const char *msg)
{
    if (rc == RL_ERR_NOMEM) return PyErr_NoMemory();
    PyObject *cls = exception_for(st, rc);
    PyObject *text = PyUnicode_DecodeUTF8(msg, (Py_ssize_t)strlen(msg), "replace");
    if (!text) return NULL;
    PyObject *exc = PyObject_CallOneArg(cls, text);
    Py_DECREF(text);
    if (!exc) return NULL;
    PyObject *code = PyLong_FromLong(rc);
    if (!code || PyObject_SetAttrString(exc, "code", code) < 0) {
        Py_XDECREF(code);
        Py_DECREF(exc);
        return NULL;
    }
    Py_DECREF(code);
    PyErr_SetObject(cls, exc);
    Py_DECREF(exc);
    return NULL;
}

static PyObject *raise_fmt(rl_state *st, int rc, const char *fmt, ...)
{
    char buf[ERRBUF];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return raise_code(st, rc, buf);
}

/* ---- argument conversion ------------------------------------------------------ */

/* A name, id or message: str (UTF-8) or bytes. *keep receives a new
 * reference that owns the bytes; they stay valid while the GIL is released. */
static int conv_text(rl_state *st, PyObject *o, const char *param, int allow_nul, PyObject **keep,
                     const char **data, Py_ssize_t *len)
{
    Py_ssize_t n;
    const char *p;
    if (PyUnicode_Check(o)) {
        /* surrogateescape: a message popped as str (undecodable bytes kept as
         * lone surrogates) pushes back byte for byte */
        PyObject *b = PyUnicode_AsEncodedString(o, "utf-8", allow_nul ? "surrogateescape" : "strict");
        if (!b) {
            PyErr_Clear();
            raise_fmt(st, RL_ERR_INVALID, "%s is not encodable as UTF-8", param);
            return -1;
        }
        *keep = b;
    } else if (PyBytes_Check(o)) {
        Py_INCREF(o);
        *keep = o;
    } else {
        PyErr_Format(PyExc_TypeError, "%s must be str or bytes, not %.100s", param, Py_TYPE(o)->tp_name);
        return -1;
    }
    p = PyBytes_AS_STRING(*keep);
    n = PyBytes_GET_SIZE(*keep);
    if (!allow_nul && memchr(p, '\0', (size_t)n)) {
        Py_CLEAR(*keep);
        raise_fmt(st, RL_ERR_INVALID, "%s must not contain NUL characters", param);
        return -1;
    }
    *data = p;
    if (len) *len = n;
    return 0;
}

static int conv_int64(rl_state *st, PyObject *o, const char *param, int64_t *out)
{
    int overflow;
    long long v;
    if (PyBool_Check(o) || !PyLong_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be int, not %.100s", param, Py_TYPE(o)->tp_name);
        return -1;
    }
    v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (overflow) {
        raise_fmt(st, RL_ERR_INVALID, "%s is out of range", param);
        return -1;
    }
    *out = (int64_t)v;
    return 0;
}

/* Seconds (int, float, or anything with total_seconds() such as timedelta)
 * -> whole milliseconds, rounded to nearest. Ranges are the core's business;
 * only what the conversion itself cannot represent is refused here. */
static int conv_seconds(rl_state *st, PyObject *o, const char *param, int64_t *out_ms)
{
    double s;
    if (PyBool_Check(o) || PyUnicode_Check(o) || PyBytes_Check(o)) goto type_error;
    if (PyFloat_Check(o) || PyLong_Check(o)) {
        s = PyFloat_AsDouble(o);
        if (s == -1.0 && PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return -1;
            PyErr_Clear();
            raise_fmt(st, RL_ERR_INVALID, "%s is too large", param);
            return -1;
        }
    } else if (PyObject_HasAttrString(o, "total_seconds")) {
        PyObject *f = PyObject_CallMethod(o, "total_seconds", NULL);
        if (!f) return -1;
        s = PyFloat_AsDouble(f);
        Py_DECREF(f);
        if (s == -1.0 && PyErr_Occurred()) return -1;
    } else {
        s = PyFloat_AsDouble(o); /* numbers with __float__ (Decimal, numpy) */
        if (s == -1.0 && PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_TypeError)) return -1;
            PyErr_Clear();
            goto type_error;
        }
    }
    if (!isfinite(s) || s < 0) {
        raise_fmt(st, RL_ERR_INVALID, "%s must be a finite number of seconds >= 0 (got %g)", param, s);
        return -1;
    }
    if (s * 1000.0 >= 9.0e18) {
        raise_fmt(st, RL_ERR_INVALID, "%s is too large (%g seconds)", param, s);
        return -1;
    }
    *out_ms = (int64_t)llround(s * 1000.0);
    return 0;
type_error:
    PyErr_Format(PyExc_TypeError, "%s must be a number of seconds (int or float), not %.100s", param,
                 Py_TYPE(o)->tp_name);
    return -1;
}

static PyObject *ms_to_seconds(int64_t ms)
{
    return PyFloat_FromDouble((double)ms / 1000.0);
}

/* ---- cancellation ------------------------------------------------------------- */

/* Polled by the core while it sleeps or waits (at least every 100 ms):
 * takes the GIL back so Ctrl-C (signal handlers) and a caller-supplied
 * cancel() can stop the wait, then lets it go again. */
typedef struct {
    PyThreadState *ts;
    PyObject *cancel; /* callable or NULL */
} cancel_ctx;

static int cancel_cb(void *p)
{
    cancel_ctx *c = p;
    int stop = 0;
    PyEval_RestoreThread(c->ts);
    if (PyErr_CheckSignals() < 0) {
        stop = 1; /* the exception stays set on this thread */
    } else if (c->cancel) {
        PyObject *r = PyObject_CallNoArgs(c->cancel);
        if (!r) {
            stop = 1;
        } else {
            int t = PyObject_IsTrue(r);
            Py_DECREF(r);
            stop = t != 0; /* t < 0 leaves an exception set */
        }
    }
    c->ts = PyEval_SaveThread();
    return stop;
}

/* ---- Result ------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    rl_result r;
} ResultObject;

static PyObject *result_new(rl_state *st, const rl_result *r)
{
    ResultObject *self = PyObject_New(ResultObject, st->ResultType);
    if (!self) return NULL;
    self->r = *r;
    return (PyObject *)self;
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
    /* -1 when allowed, as the C result, redis_rate and redis-cell say it */
    if (self->r.retry_after_ms < 0) return PyFloat_FromDouble(-1.0);
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
    if (self->r.retry_after_ms < 0) snprintf(retry, sizeof retry, "-1");
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
"retry_after is -1.0 when the request was allowed. Being denied is a result,\n"
"not an error: only the decorator and reserve() raise RateLimitExceeded.");

static PyType_Slot result_slots[] = {
    {Py_tp_dealloc, result_dealloc},
    {Py_tp_getset, result_getset},
    {Py_tp_repr, result_repr},
    {Py_tp_doc, (void *)result_doc},
    {Py_nb_bool, result_bool},
    {0, NULL}};

static PyType_Spec result_spec = {
    .name = "ratelimit.Result",
    .basicsize = sizeof(ResultObject),
#if PY_VERSION_HEX >= 0x030A0000
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
#else
    .flags = Py_TPFLAGS_DEFAULT,
#endif
    .slots = result_slots,
};

/* ---- Client ------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    rl_client *rl;
    Py_ssize_t inflight; /* calls running with the GIL released */
    int closing;
    PyObject *weakrefs;
} ClientObject;

/* Marks a call in flight; close() defers rl_client_close until none is. */
static rl_client *client_enter(rl_state *st, ClientObject *c)
{
    if (!c->rl || c->closing) {
        raise_code(st, RL_ERR_CLOSED, c->closing ? "the client is closed" : "the client is not open");
        return NULL;
    }
    c->inflight++;
    return c->rl;
}

static void client_leave(ClientObject *c)
{
    if (--c->inflight == 0 && c->closing && c->rl) {
        rl_client *rl = c->rl;
        c->rl = NULL;
        rl_client_close(rl);
    }
}

static PyObject *client_new(PyTypeObject *tp, PyObject *args, PyObject *kw)
{
    ClientObject *self = (ClientObject *)tp->tp_alloc(tp, 0);
    return (PyObject *)self;
}

/* A file path option: str, bytes or os.PathLike, as the file system
 * encodes it. *keep owns the bytes. */
static int conv_path(rl_state *st, PyObject *o, const char *param, PyObject **keep, const char **out)
{
    PyObject *p;
    if (PyBool_Check(o) || !(PyUnicode_Check(o) || PyBytes_Check(o) || PyObject_HasAttrString(o, "__fspath__"))) {
        PyErr_Format(PyExc_TypeError, "%s must be a path (str, bytes or os.PathLike), not %.100s", param,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    if (!(p = PyOS_FSPath(o))) return -1;
    if (PyUnicode_Check(p)) {
        *keep = PyUnicode_EncodeFSDefault(p);
        Py_DECREF(p);
        if (!*keep) return -1;
    } else {
        *keep = p; /* bytes: PyOS_FSPath returns str or bytes only */
    }
    if (memchr(PyBytes_AS_STRING(*keep), '\0', (size_t)PyBytes_GET_SIZE(*keep))) {
        Py_CLEAR(*keep);
        raise_fmt(st, RL_ERR_INVALID, "%s must not contain NUL characters", param);
        return -1;
    }
    *out = PyBytes_AS_STRING(*keep);
    return 0;
}

/* Seconds -> a positive int of milliseconds for an rl_options field. */
static int conv_option_ms(rl_state *st, PyObject *o, const char *param, int *out)
{
    int64_t v;
    if (conv_seconds(st, o, param, &v) < 0) return -1;
    if (v > INT32_MAX) {
        raise_fmt(st, RL_ERR_INVALID, "%s is too large", param);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* ssl_cert_reqs as redis-py takes it: "required" / "none" (any case), or
 * ssl.CERT_REQUIRED / ssl.CERT_NONE (ssl.VerifyMode, an int). */
static int conv_cert_reqs(rl_state *st, PyObject *o, rl_tls_verify *out)
{
    if (PyUnicode_Check(o)) {
        const char *s = PyUnicode_AsUTF8(o);
        if (!s) return -1;
        if (!strcasecmp(s, "required")) *out = RL_TLS_VERIFY_REQUIRED;
        else if (!strcasecmp(s, "none")) *out = RL_TLS_VERIFY_NONE;
        else {
            raise_fmt(st, RL_ERR_INVALID, "ssl_cert_reqs must be 'required' or 'none' (got '%.50s')%s", s,
                      strcasecmp(s, "optional") ? "" : ": 'optional' is not supported");
            return -1;
        }
        return 0;
    }
    if (PyLong_Check(o) && !PyBool_Check(o)) {
        long v = PyLong_AsLong(o);
        if (v == -1 && PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return -1;
            PyErr_Clear();
        }
        if (v == 2) *out = RL_TLS_VERIFY_REQUIRED; /* ssl.CERT_REQUIRED */
        else if (v == 0) *out = RL_TLS_VERIFY_NONE; /* ssl.CERT_NONE */
        else {
            raise_fmt(st, RL_ERR_INVALID,
                      "ssl_cert_reqs must be 'required', 'none', ssl.CERT_REQUIRED or ssl.CERT_NONE (got %ld)%s", v,
                      v == 1 ? ": ssl.CERT_OPTIONAL is not supported" : "");
            return -1;
        }
        return 0;
    }
    PyErr_Format(PyExc_TypeError, "ssl_cert_reqs must be str ('required' or 'none') or ssl.VerifyMode, not %.100s",
                 Py_TYPE(o)->tp_name);
    return -1;
}

static int client_init(ClientObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"url", "prefix", "timeout", "connect_timeout", "pool_size", "on_redis_error",
                             "ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_cert_reqs", "reconnect_max", NULL};
    enum { CA, CERT, KEY, NPATHS };
    static const char *path_names[NPATHS] = {"ssl_ca_certs", "ssl_certfile", "ssl_keyfile"};
    PyObject *url, *prefix = Py_None, *timeout = Py_None, *connect_timeout = Py_None, *pool_size = Py_None,
                   *on_error = Py_None, *cert_reqs = Py_None, *reconnect_max = Py_None;
    PyObject *paths[NPATHS] = {Py_None, Py_None, Py_None}, *path_keep[NPATHS] = {NULL, NULL, NULL};
    const char **path_fields[NPATHS];
    PyObject *url_keep = NULL, *prefix_keep = NULL;
    const char *url_s, *prefix_s;
    rl_state *st = STATE(self);
    rl_options opts;
    rl_client *rl = NULL;
    char err[ERRBUF];
    int64_t v;
    int rc = -1;

    if (!st) return -1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$OOOOOOOOOO:Client", kwlist, &url, &prefix, &timeout,
                                     &connect_timeout, &pool_size, &on_error, &paths[CA], &paths[CERT],
                                     &paths[KEY], &cert_reqs, &reconnect_max))
        return -1;
    if (self->rl || self->closing) {
        raise_code(st, RL_ERR_INVALID, "Client.__init__ may be called only once");
        return -1;
    }
    rl_options_init(&opts);
    path_fields[CA] = &opts.tls_ca_file;
    path_fields[CERT] = &opts.tls_cert_file;
    path_fields[KEY] = &opts.tls_key_file;
    if (!PyUnicode_Check(url)) {
        PyErr_Format(PyExc_TypeError, "url must be str, not %.100s", Py_TYPE(url)->tp_name);
        return -1;
    }
    if (conv_text(st, url, "url", 0, &url_keep, &url_s, NULL) < 0) return -1;
    if (prefix != Py_None) {
        if (!PyUnicode_Check(prefix)) {
            PyErr_Format(PyExc_TypeError, "prefix must be str, not %.100s", Py_TYPE(prefix)->tp_name);
            goto done;
        }
        if (conv_text(st, prefix, "prefix", 0, &prefix_keep, &prefix_s, NULL) < 0) goto done;
        opts.key_prefix = prefix_s;
    }
    if (timeout != Py_None && conv_option_ms(st, timeout, "timeout", &opts.command_timeout_ms) < 0) goto done;
    if (connect_timeout != Py_None &&
        conv_option_ms(st, connect_timeout, "connect_timeout", &opts.connect_timeout_ms) < 0)
        goto done;
    if (pool_size != Py_None) {
        if (conv_int64(st, pool_size, "pool_size", &v) < 0) goto done;
        if (v < INT32_MIN || v > INT32_MAX) {
            raise_code(st, RL_ERR_INVALID, "pool_size is out of range");
            goto done;
        }
        opts.pool_size = (int)v;
    }
    if (on_error != Py_None) {
        const char *s = PyUnicode_Check(on_error) ? PyUnicode_AsUTF8(on_error) : NULL;
        if (!PyUnicode_Check(on_error)) {
            PyErr_Format(PyExc_TypeError, "on_redis_error must be str, not %.100s", Py_TYPE(on_error)->tp_name);
            goto done;
        }
        if (!s) goto done;
        if (!strcmp(s, "raise")) opts.on_error = RL_ON_ERROR_RAISE;
        else if (!strcmp(s, "allow")) opts.on_error = RL_ON_ERROR_ALLOW;
        else if (!strcmp(s, "deny")) opts.on_error = RL_ON_ERROR_DENY;
        else {
            raise_fmt(st, RL_ERR_INVALID, "on_redis_error must be 'raise', 'allow' or 'deny' (got '%.50s')", s);
            goto done;
        }
    }
    for (int i = 0; i < NPATHS; i++)
        if (paths[i] != Py_None && conv_path(st, paths[i], path_names[i], &path_keep[i], path_fields[i]) < 0)
            goto done;
    if (cert_reqs != Py_None && conv_cert_reqs(st, cert_reqs, &opts.tls_verify) < 0) goto done;
    if (reconnect_max != Py_None) {
        /* 0 ms means "the default" to the core: here that is None */
        if (conv_option_ms(st, reconnect_max, "reconnect_max", &opts.reconnect_max_ms) < 0) goto done;
        if (opts.reconnect_max_ms <= 0) {
            raise_code(st, RL_ERR_INVALID, "reconnect_max must be at least 0.001 seconds (None: the default, 1.0)");
            goto done;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    rc = rl_client_open(&rl, url_s, &opts);
    if (rc) save_errmsg(err, rc);
    Py_END_ALLOW_THREADS
    if (rc) {
        raise_code(st, rc, err);
        rc = -1;
        goto done;
    }
    self->rl = rl;
done:
    Py_XDECREF(url_keep);
    Py_XDECREF(prefix_keep);
    for (int i = 0; i < NPATHS; i++) Py_XDECREF(path_keep[i]);
    return rc;
}

static int client_traverse(ClientObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    return 0;
}

static void client_dealloc(ClientObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (self->weakrefs) PyObject_ClearWeakRefs((PyObject *)self);
    /* calls hold a reference to the client, so none is in flight here */
    if (self->rl) {
        rl_client *rl = self->rl;
        self->rl = NULL;
        rl_client_close(rl);
    }
    tp->tp_free(self);
    Py_DECREF(tp);
}

PyDoc_STRVAR(client_close_doc,
"close()\n--\n\n"
"Close all connections. Calls still running finish first (the connections\n"
"are closed when the last one returns); new calls raise ClientClosed.\n"
"Closing twice is a no-op.");

static PyObject *client_close(ClientObject *self, PyObject *unused)
{
    if (self->closing) Py_RETURN_NONE;
    self->closing = 1;
    if (self->inflight == 0 && self->rl) {
        rl_client *rl = self->rl;
        self->rl = NULL;
        Py_BEGIN_ALLOW_THREADS
        rl_client_close(rl);
        Py_END_ALLOW_THREADS
    }
    Py_RETURN_NONE;
}

static PyObject *client_get_closed(ClientObject *self, void *c)
{
    return PyBool_FromLong(self->closing || !self->rl);
}

static PyObject *client_get_prefix(ClientObject *self, void *c)
{
    if (!self->rl) Py_RETURN_NONE;
    return PyUnicode_FromString(rl_client_prefix(self->rl));
}

/* ---- Client: semaphore, lock, delay queue (the Python layer wraps these) ---- */

static PyObject *permit_tuple(const rl_permit *p)
{
    if (!p->acquired) Py_RETURN_NONE;
    return Py_BuildValue("(sLN)", p->id, (long long)p->fencing_token, ms_to_seconds(p->lease_ms));
}

/* kind 0: semaphore, 1: lock */
static PyObject *sync_acquire(ClientObject *self, PyObject *args, PyObject *kw, int lock)
{
    static char *sem_kwlist[] = {"name", "permits", "lease", "timeout", "cancel", NULL};
    static char *lock_kwlist[] = {"name", "lease", "timeout", "cancel", NULL};
    PyObject *name, *permits = NULL, *lease, *timeout = Py_None, *cancel = Py_None, *keep = NULL;
    rl_state *st = STATE(self);
    const char *name_s;
    int64_t max = 1, lease_ms, timeout_ms = 0;
    rl_permit permit;
    char err[ERRBUF];
    int rc;

    if (!st) return NULL;
    if (lock) {
        if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|OO:_lock_acquire", lock_kwlist, &name, &lease, &timeout,
                                         &cancel))
            return NULL;
    } else if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|OO:_semaphore_acquire", sem_kwlist, &name, &permits,
                                            &lease, &timeout, &cancel)) {
        return NULL;
    }
    if (permits && conv_int64(st, permits, "permits", &max) < 0) return NULL;
    if (conv_seconds(st, lease, "lease", &lease_ms) < 0) return NULL;
    if (timeout != Py_None && conv_seconds(st, timeout, "timeout", &timeout_ms) < 0) return NULL;
    if (cancel != Py_None && !PyCallable_Check(cancel)) {
        PyErr_SetString(PyExc_TypeError, "cancel must be callable");
        return NULL;
    }
    if (conv_text(st, name, "name", 0, &keep, &name_s, NULL) < 0) return NULL;
    rl_client *rl = client_enter(st, self);
    if (!rl) {
        Py_DECREF(keep);
        return NULL;
    }
    cancel_ctx cc = {NULL, cancel == Py_None ? NULL : cancel};
    rl_wait wait = {timeout_ms, cancel_cb, &cc};
    cc.ts = PyEval_SaveThread();
    rc = lock ? rl_lock_acquire(rl, name_s, lease_ms, &wait, &permit)
              : rl_semaphore_acquire(rl, name_s, max, lease_ms, &wait, &permit);
    if (rc) save_errmsg(err, rc);
    PyEval_RestoreThread(cc.ts);
    client_leave(self);
    Py_DECREF(keep);
    if (PyErr_Occurred()) return NULL; /* KeyboardInterrupt or cancel() raised */
    if (rc) return raise_code(st, rc, err);
    return permit_tuple(&permit);
}

PyDoc_STRVAR(client_semaphore_acquire_doc,
"_semaphore_acquire(name, permits, lease, timeout=None, cancel=None)\n--\n\n"
"Low level: (permit_id, fencing_token, lease) or None if not acquired within\n"
"timeout seconds. Use Client.semaphore() instead.");

static PyObject *client_semaphore_acquire(ClientObject *self, PyObject *args, PyObject *kw)
{
    return sync_acquire(self, args, kw, 0);
}

PyDoc_STRVAR(client_lock_acquire_doc,
"_lock_acquire(name, lease, timeout=None, cancel=None)\n--\n\n"
"Low level: (token, fencing_token, lease) or None. Use Client.lock() instead.");

static PyObject *client_lock_acquire(ClientObject *self, PyObject *args, PyObject *kw)
{
    return sync_acquire(self, args, kw, 1);
}

/* release (with_lease 0) / refresh (with_lease 1) for kind lock or semaphore */
static PyObject *sync_simple(ClientObject *self, PyObject *args, int lock, int with_lease)
{
    PyObject *name, *id, *lease = NULL, *keep_name = NULL, *keep_id = NULL;
    rl_state *st = STATE(self);
    const char *name_s, *id_s;
    int64_t lease_ms = 0;
    int done = 0, rc = 0;
    char err[ERRBUF];

    if (!st) return NULL;
    if (!PyArg_ParseTuple(args, with_lease ? "OOO" : "OO", &name, &id, &lease)) return NULL;
    if (lease && conv_seconds(st, lease, "lease", &lease_ms) < 0) return NULL;
    if (conv_text(st, name, "name", 0, &keep_name, &name_s, NULL) < 0) return NULL;
    if (conv_text(st, id, lock ? "token" : "permit id", 0, &keep_id, &id_s, NULL) < 0) {
        Py_DECREF(keep_name);
        return NULL;
    }
    rl_client *rl = client_enter(st, self);
    if (rl) {
        Py_BEGIN_ALLOW_THREADS
        if (lock) rc = with_lease ? rl_lock_extend(rl, name_s, id_s, lease_ms, &done)
                                  : rl_lock_release(rl, name_s, id_s, &done);
        else rc = with_lease ? rl_semaphore_refresh(rl, name_s, id_s, lease_ms, &done)
                             : rl_semaphore_release(rl, name_s, id_s, &done);
        if (rc) save_errmsg(err, rc);
        Py_END_ALLOW_THREADS
        client_leave(self);
    }
    Py_DECREF(keep_name);
    Py_DECREF(keep_id);
    if (!rl) return NULL;
    if (rc) return raise_code(st, rc, err);
    return PyBool_FromLong(done);
}

static PyObject *client_semaphore_release(ClientObject *self, PyObject *args)
{
    return sync_simple(self, args, 0, 0);
}
static PyObject *client_semaphore_refresh(ClientObject *self, PyObject *args)
{
    return sync_simple(self, args, 0, 1);
}
static PyObject *client_lock_release(ClientObject *self, PyObject *args)
{
    return sync_simple(self, args, 1, 0);
}
static PyObject *client_lock_extend(ClientObject *self, PyObject *args)
{
    return sync_simple(self, args, 1, 1);
}

/* available (with_max 1) / holders (with_max 0) */
static PyObject *sem_info(ClientObject *self, PyObject *args, int with_max)
{
    PyObject *name, *permits = NULL, *keep = NULL;
    rl_state *st = STATE(self);
    const char *name_s;
    int64_t max = 0, value = 0;
    char err[ERRBUF];
    int rc = 0;

    if (!st) return NULL;
    if (!PyArg_ParseTuple(args, with_max ? "OO" : "O", &name, &permits)) return NULL;
    if (permits && conv_int64(st, permits, "permits", &max) < 0) return NULL;
    if (conv_text(st, name, "name", 0, &keep, &name_s, NULL) < 0) return NULL;
    rl_client *rl = client_enter(st, self);
    if (rl) {
        Py_BEGIN_ALLOW_THREADS
        rc = with_max ? rl_semaphore_available(rl, name_s, max, &value) : rl_semaphore_holders(rl, name_s, &value);
        if (rc) save_errmsg(err, rc);
        Py_END_ALLOW_THREADS
        client_leave(self);
    }
    Py_DECREF(keep);
    if (!rl) return NULL;
    if (rc) return raise_code(st, rc, err);
    return PyLong_FromLongLong(value);
}

static PyObject *client_semaphore_available(ClientObject *self, PyObject *args)
{
    return sem_info(self, args, 1);
}
static PyObject *client_semaphore_holders(ClientObject *self, PyObject *args)
{
    return sem_info(self, args, 0);
}

static PyObject *client_queue_push(ClientObject *self, PyObject *args)
{
    PyObject *queue, *message, *delay, *keep_q = NULL, *keep_m = NULL;
    rl_state *st = STATE(self);
    const char *q, *m;
    Py_ssize_t mlen;
    int64_t delay_ms;
    int added = 0, rc = 0;
    char err[ERRBUF];

    if (!st) return NULL;
    if (!PyArg_ParseTuple(args, "OOO:_queue_push", &queue, &message, &delay)) return NULL;
    if (conv_seconds(st, delay, "delay", &delay_ms) < 0) return NULL;
    if (conv_text(st, queue, "queue", 0, &keep_q, &q, NULL) < 0) return NULL;
    if (conv_text(st, message, "message", 1, &keep_m, &m, &mlen) < 0) {
        Py_DECREF(keep_q);
        return NULL;
    }
    rl_client *rl = client_enter(st, self);
    if (rl) {
        Py_BEGIN_ALLOW_THREADS
        rc = rl_queue_push(rl, q, m, (size_t)mlen, delay_ms, &added);
        if (rc) save_errmsg(err, rc);
        Py_END_ALLOW_THREADS
        client_leave(self);
    }
    Py_DECREF(keep_q);
    Py_DECREF(keep_m);
    if (!rl) return NULL;
    if (rc) return raise_code(st, rc, err);
    return PyBool_FromLong(added);
}

static PyObject *messages_list(rl_messages *msgs)
{
    PyObject *list = PyList_New((Py_ssize_t)msgs->count);
    for (size_t i = 0; list && i < msgs->count; i++) {
        PyObject *b = PyBytes_FromStringAndSize(msgs->items[i], (Py_ssize_t)msgs->lens[i]);
        if (!b) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, b);
    }
    rl_messages_free(msgs);
    return list;
}

/* pop_ready (wait 0) or pop_wait (wait 1) */
static PyObject *queue_pop(ClientObject *self, PyObject *args, PyObject *kw, int wait)
{
    static char *kwlist[] = {"queue", "max", "timeout", "cancel", NULL};
    PyObject *queue, *max = NULL, *timeout = Py_None, *cancel = Py_None, *keep = NULL;
    rl_state *st = STATE(self);
    const char *q;
    int64_t max_n = 1, timeout_ms = 0;
    rl_messages msgs;
    char err[ERRBUF];
    int rc;

    if (!st) return NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|OO:_queue_pop", kwlist, &queue, &max, &timeout, &cancel))
        return NULL;
    if (conv_int64(st, max, "max", &max_n) < 0) return NULL;
    if (max_n < 0) max_n = 0; /* size_t in the core: let it say "max must be in 1.." */
    if (timeout != Py_None && conv_seconds(st, timeout, "timeout", &timeout_ms) < 0) return NULL;
    if (cancel != Py_None && !PyCallable_Check(cancel)) {
        PyErr_SetString(PyExc_TypeError, "cancel must be callable");
        return NULL;
    }
    if (conv_text(st, queue, "queue", 0, &keep, &q, NULL) < 0) return NULL;
    rl_client *rl = client_enter(st, self);
    if (!rl) {
        Py_DECREF(keep);
        return NULL;
    }
    memset(&msgs, 0, sizeof msgs);
    cancel_ctx cc = {NULL, cancel == Py_None ? NULL : cancel};
    rl_wait w = {timeout_ms, cancel_cb, &cc};
    cc.ts = PyEval_SaveThread();
    rc = wait ? rl_queue_pop_wait(rl, q, (size_t)max_n, &w, &msgs) : rl_queue_pop_ready(rl, q, (size_t)max_n, &msgs);
    if (rc) save_errmsg(err, rc);
    PyEval_RestoreThread(cc.ts);
    client_leave(self);
    Py_DECREF(keep);
    if (PyErr_Occurred()) { /* KeyboardInterrupt or cancel() raised while waiting */
        rl_messages_free(&msgs);
        return NULL;
    }
    /* messages already taken from Redis are handed over even if a later step
     * failed: losing them would be worse than a missed error */
    if (msgs.count || rc == RL_OK) return messages_list(&msgs);
    return raise_code(st, rc, err);
}

static PyObject *client_queue_pop_ready(ClientObject *self, PyObject *args, PyObject *kw)
{
    return queue_pop(self, args, kw, 0);
}
static PyObject *client_queue_pop_wait(ClientObject *self, PyObject *args, PyObject *kw)
{
    return queue_pop(self, args, kw, 1);
}

static PyObject *client_queue_size(ClientObject *self, PyObject *args)
{
    PyObject *queue, *keep = NULL;
    rl_state *st = STATE(self);
    const char *q;
    int64_t size = 0;
    char err[ERRBUF];
    int rc = 0;

    if (!st) return NULL;
    if (!PyArg_ParseTuple(args, "O:_queue_size", &queue)) return NULL;
    if (conv_text(st, queue, "queue", 0, &keep, &q, NULL) < 0) return NULL;
    rl_client *rl = client_enter(st, self);
    if (rl) {
        Py_BEGIN_ALLOW_THREADS
        rc = rl_queue_size(rl, q, &size);
        if (rc) save_errmsg(err, rc);
        Py_END_ALLOW_THREADS
        client_leave(self);
    }
    Py_DECREF(keep);
    if (!rl) return NULL;
    if (rc) return raise_code(st, rc, err);
    return PyLong_FromLongLong(size);
}

static PyObject *client_queue_remove(ClientObject *self, PyObject *args)
{
    PyObject *queue, *message, *keep_q = NULL, *keep_m = NULL;
    rl_state *st = STATE(self);
    const char *q, *m;
    Py_ssize_t mlen;
    int removed = 0, rc = 0;
    char err[ERRBUF];

    if (!st) return NULL;
    if (!PyArg_ParseTuple(args, "OO:_queue_remove", &queue, &message)) return NULL;
    if (conv_text(st, queue, "queue", 0, &keep_q, &q, NULL) < 0) return NULL;
    if (conv_text(st, message, "message", 1, &keep_m, &m, &mlen) < 0) {
        Py_DECREF(keep_q);
        return NULL;
    }
    rl_client *rl = client_enter(st, self);
    if (rl) {
        Py_BEGIN_ALLOW_THREADS
        rc = rl_queue_remove(rl, q, m, (size_t)mlen, &removed);
        if (rc) save_errmsg(err, rc);
        Py_END_ALLOW_THREADS
        client_leave(self);
    }
    Py_DECREF(keep_q);
    Py_DECREF(keep_m);
    if (!rl) return NULL;
    if (rc) return raise_code(st, rc, err);
    return PyBool_FromLong(removed);
}

static PyMethodDef client_methods[] = {
    {"close", (PyCFunction)client_close, METH_NOARGS, client_close_doc},
    {"_semaphore_acquire", (PyCFunction)(void (*)(void))client_semaphore_acquire, METH_VARARGS | METH_KEYWORDS,
     client_semaphore_acquire_doc},
    {"_semaphore_release", (PyCFunction)client_semaphore_release, METH_VARARGS,
     "_semaphore_release(name, permit_id) -> bool"},
    {"_semaphore_refresh", (PyCFunction)client_semaphore_refresh, METH_VARARGS,
     "_semaphore_refresh(name, permit_id, lease) -> bool"},
    {"_semaphore_available", (PyCFunction)client_semaphore_available, METH_VARARGS,
     "_semaphore_available(name, permits) -> int"},
    {"_semaphore_holders", (PyCFunction)client_semaphore_holders, METH_VARARGS, "_semaphore_holders(name) -> int"},
    {"_lock_acquire", (PyCFunction)(void (*)(void))client_lock_acquire, METH_VARARGS | METH_KEYWORDS,
     client_lock_acquire_doc},
    {"_lock_release", (PyCFunction)client_lock_release, METH_VARARGS, "_lock_release(name, token) -> bool"},
    {"_lock_extend", (PyCFunction)client_lock_extend, METH_VARARGS, "_lock_extend(name, token, lease) -> bool"},
    {"_queue_push", (PyCFunction)client_queue_push, METH_VARARGS, "_queue_push(queue, message, delay) -> bool"},
    {"_queue_pop_ready", (PyCFunction)(void (*)(void))client_queue_pop_ready, METH_VARARGS | METH_KEYWORDS,
     "_queue_pop_ready(queue, max) -> list[bytes]"},
    {"_queue_pop_wait", (PyCFunction)(void (*)(void))client_queue_pop_wait, METH_VARARGS | METH_KEYWORDS,
     "_queue_pop_wait(queue, max, timeout=None, cancel=None) -> list[bytes]"},
    {"_queue_size", (PyCFunction)client_queue_size, METH_VARARGS, "_queue_size(queue) -> int"},
    {"_queue_remove", (PyCFunction)client_queue_remove, METH_VARARGS, "_queue_remove(queue, message) -> bool"},
    {NULL}};

static PyGetSetDef client_getset[] = {
    {"closed", (getter)client_get_closed, NULL, "True once close() was called.", NULL},
    {"prefix", (getter)client_get_prefix, NULL, "The key prefix in use (None once closed).", NULL},
    {NULL}};

static PyMemberDef client_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(ClientObject, weakrefs), READONLY, NULL},
    {NULL}};

PyDoc_STRVAR(client_doc,
"Client(url, *, prefix=None, timeout=None, connect_timeout=None, pool_size=None, on_redis_error=None,\n"
"       ssl_ca_certs=None, ssl_certfile=None, ssl_keyfile=None, ssl_cert_reqs=None, reconnect_max=None)\n--\n\n"
"A connection pool to Redis (one server, TLS, Sentinel or Cluster), shared\n"
"safely by all threads. See ratelimit.Client for the options.");

static PyType_Slot client_slots[] = {
    {Py_tp_new, client_new},
    {Py_tp_init, client_init},
    {Py_tp_dealloc, client_dealloc},
    {Py_tp_traverse, client_traverse},
    {Py_tp_methods, client_methods},
    {Py_tp_getset, client_getset},
    {Py_tp_members, client_members},
    {Py_tp_doc, (void *)client_doc},
    {0, NULL}};

static PyType_Spec client_spec = {
    .name = "ratelimit._ratelimit.Client",
    .basicsize = sizeof(ClientObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = client_slots,
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
    PyObject *items, *now = Py_None, *seq = NULL, *keeps = NULL, *out = NULL;
    rl_state *st = STATE(self);
    rl_request *reqs = NULL;
    rl_result *results = NULL;
    Py_ssize_t n;
    char err[ERRBUF];
    int rc;

    if (!st || limiter_ready(st, self) < 0) return NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$O:acquire_many", kwlist, &items, &now)) return NULL;
    if (PyUnicode_Check(items) || PyBytes_Check(items)) {
        PyErr_SetString(PyExc_TypeError, "requests must be an iterable of ids or (id, permits) pairs, not a single id");
        return NULL;
    }
    if (!(seq = PySequence_Fast(items, "requests must be an iterable of ids or (id, permits) pairs"))) return NULL;
    n = PySequence_Fast_GET_SIZE(seq);
    if (n == 0) {
        Py_DECREF(seq);
        return PyList_New(0);
    }
    reqs = PyMem_Calloc((size_t)n, sizeof *reqs);
    results = PyMem_Calloc((size_t)n, sizeof *results);
    keeps = PyList_New(n);
    if (!reqs || !results || !keeps) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i), *id = item, *permits = NULL, *keep = NULL;
        if (PyTuple_Check(item) || PyList_Check(item)) {
            if (PySequence_Size(item) != 2) {
                PyErr_Format(PyExc_TypeError, "requests[%zd] must be an id or an (id, permits) pair", i);
                goto done;
            }
            id = PySequence_Fast_GET_ITEM(item, 0);
            permits = PySequence_Fast_GET_ITEM(item, 1);
        }
        if (build_request(st, self, id, permits, now, RL_OP_ACQUIRE, &reqs[i], &keep) < 0) goto done;
        PyList_SET_ITEM(keeps, i, keep);
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
    if (!(out = PyList_New(n))) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = result_new(st, &results[i]);
        if (!r) {
            Py_CLEAR(out);
            goto done;
        }
        PyList_SET_ITEM(out, i, r);
    }
done:
    /* a partially filled keeps list holds NULLs, which list dealloc skips */
    Py_XDECREF(keeps);
    Py_XDECREF(seq);
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

static PyType_Spec limiter_spec = {
    .name = "ratelimit._ratelimit.Limiter",
    .basicsize = sizeof(LimiterObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = limiter_slots,
};

/* ---- module functions ------------------------------------------------------------ */

PyDoc_STRVAR(parse_rate_doc,
"parse_rate(text)\n--\n\n"
"Parse a rate such as '10/second', '100/minute', '5 per 30 seconds' or\n"
"'3/500ms' into (limit, period_seconds). Raises InvalidArgument.");

static PyObject *mod_parse_rate(PyObject *module, PyObject *text)
{
    rl_state *st = get_state(module);
    int64_t limit, period_ms;
    const char *s;
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "rate must be str, not %.100s", Py_TYPE(text)->tp_name);
        return NULL;
    }
    if (!(s = PyUnicode_AsUTF8(text))) return NULL;
    if (rl_parse_rate(s, &limit, &period_ms)) return raise_code(st, RL_ERR_INVALID, rl_errmsg());
    return Py_BuildValue("(LN)", (long long)limit, ms_to_seconds(period_ms));
}

PyDoc_STRVAR(scripts_doc,
"scripts()\n--\n\n"
"The embedded Lua scripts as a list of (name, sha1) pairs.");

static PyObject *mod_scripts(PyObject *module, PyObject *unused)
{
    size_t n = rl_script_count();
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        const char *name, *sha;
        rl_script_info(i, &name, &sha);
        PyObject *t = Py_BuildValue("(ss)", name, sha);
        if (!t) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    return list;
}

PyDoc_STRVAR(strerror_doc, "strerror(code)\n--\n\nStatic text for a status code.");

static PyObject *mod_strerror(PyObject *module, PyObject *code)
{
    long c = PyLong_AsLong(code);
    if (c == -1 && PyErr_Occurred()) return NULL;
    return PyUnicode_FromString(rl_strerror((int)c));
}

PyDoc_STRVAR(has_tls_doc,
"has_tls()\n--\n\n"
"True if this build speaks TLS (rediss:// URLs and the ssl_* options): it\n"
"was built against hiredis >= 1.0 with hiredis_ssl and OpenSSL.");

static PyObject *mod_has_tls(PyObject *module, PyObject *unused)
{
    return PyBool_FromLong(rl_has_tls());
}

static PyMethodDef module_methods[] = {
    {"has_tls", (PyCFunction)mod_has_tls, METH_NOARGS, has_tls_doc},
    {"parse_rate", (PyCFunction)mod_parse_rate, METH_O, parse_rate_doc},
    {"scripts", (PyCFunction)mod_scripts, METH_NOARGS, scripts_doc},
    {"strerror", (PyCFunction)mod_strerror, METH_O, strerror_doc},
    {NULL}};

/* ---- module init ---------------------------------------------------------------- */

/* PyModule_AddObjectRef is 3.10+ */
static int add_ref(PyObject *module, const char *name, PyObject *obj)
{
    Py_INCREF(obj);
    if (PyModule_AddObject(module, name, obj) < 0) {
        Py_DECREF(obj);
        return -1;
    }
    return 0;
}

static PyObject *new_exception(PyObject *module, const char *name, const char *doc, PyObject *bases, int code)
{
    char qualified[100];
    snprintf(qualified, sizeof qualified, "ratelimit.%s", name);
    PyObject *dict = Py_BuildValue("{si}", "code", code);
    if (!dict) return NULL;
    PyObject *exc = PyErr_NewExceptionWithDoc(qualified, doc, bases, dict);
    Py_DECREF(dict);
    if (!exc) return NULL;
    if (add_ref(module, name, exc) < 0) {
        Py_DECREF(exc);
        return NULL;
    }
    return exc;
}

static int module_exec(PyObject *module)
{
    rl_state *st = get_state(module);
    PyObject *bases;

    if (rl_version_number() != RL_VERSION_NUMBER) {
        PyErr_Format(PyExc_ImportError, "ratelimit: the C core is version %d but this module was built for %d",
                     rl_version_number(), RL_VERSION_NUMBER);
        return -1;
    }

#define EXC(field, name, doc, base_expr, code)                                                \
    do {                                                                                       \
        if (!(bases = (base_expr))) return -1;                                                 \
        st->field = new_exception(module, name, doc, bases, code);                             \
        Py_DECREF(bases);                                                                      \
        if (!st->field) return -1;                                                             \
    } while (0)

    EXC(RateLimitError, "RateLimitError",
        "Root of every error raised by ratelimit; .code is the C status (RL_ERR_*).",
        PyTuple_Pack(1, PyExc_Exception), 0);
    EXC(InvalidArgument, "InvalidArgument",
        "A bad argument (also a ValueError); nothing was sent to Redis.",
        PyTuple_Pack(2, st->RateLimitError, PyExc_ValueError), RL_ERR_INVALID);
    EXC(ConnectionError, "ConnectionError",
        "Cannot connect to Redis, or the connection broke (also the builtin ConnectionError).",
        PyTuple_Pack(2, st->RateLimitError, PyExc_ConnectionError), RL_ERR_CONNECTION);
    EXC(Timeout, "Timeout",
        "A connect or command timeout, or a semaphore/lock not acquired in time\n"
        "(also the builtin TimeoutError).",
        PyTuple_Pack(2, st->RateLimitError, PyExc_TimeoutError), RL_ERR_TIMEOUT);
    EXC(ProtocolError, "ProtocolError", "Redis answered something the library cannot decode.",
        PyTuple_Pack(1, st->RateLimitError), RL_ERR_PROTOCOL);
    EXC(RedisError, "RedisError", "Redis returned an error (script error, ACL, OOM...).",
        PyTuple_Pack(1, st->RateLimitError), RL_ERR_REDIS);
    EXC(Cancelled, "Cancelled", "A blocking wait was cancelled by its cancel callable.",
        PyTuple_Pack(1, st->RateLimitError), RL_ERR_CANCELLED);
    EXC(ClientClosed, "ClientClosed", "The client was closed.", PyTuple_Pack(1, st->RateLimitError),
        RL_ERR_CLOSED);
    EXC(RateLimitExceeded, "RateLimitExceeded",
        "Raised where the caller asked to raise on denial (the limit() decorator,\n"
        "reserve()). .retry_after: seconds until a retry could pass; .result: the\n"
        "denied Result (or None); .code is 0: denial is a decision, not a failure.",
        PyTuple_Pack(1, st->RateLimitError), RL_OK);
#undef EXC

    st->ResultType = (PyTypeObject *)PyType_FromModuleAndSpec(module, &result_spec, NULL);
    if (!st->ResultType) return -1;
#if PY_VERSION_HEX < 0x030A0000
    st->ResultType->tp_new = NULL; /* made only by the library */
#endif
    if (add_ref(module, "Result", (PyObject *)st->ResultType) < 0) return -1;
    st->ClientType = (PyTypeObject *)PyType_FromModuleAndSpec(module, &client_spec, NULL);
    if (!st->ClientType || add_ref(module, "Client", (PyObject *)st->ClientType) < 0) return -1;
    st->LimiterType = (PyTypeObject *)PyType_FromModuleAndSpec(module, &limiter_spec, NULL);
    if (!st->LimiterType || add_ref(module, "Limiter", (PyObject *)st->LimiterType) < 0) return -1;

    PyObject *algorithms = PyTuple_New(RL_ALGORITHM_COUNT);
    if (!algorithms) return -1;
    for (int i = 0; i < RL_ALGORITHM_COUNT; i++)
        PyTuple_SET_ITEM(algorithms, i, PyUnicode_FromString(rl_algorithm_name((rl_algorithm)i)));
    if (PyModule_AddObject(module, "ALGORITHMS", algorithms) < 0) {
        Py_DECREF(algorithms);
        return -1;
    }
    if (PyModule_AddIntConstant(module, "VERSION_NUMBER", rl_version_number()) < 0 ||
        PyModule_AddIntConstant(module, "OK", RL_OK) < 0 ||
        PyModule_AddIntConstant(module, "ERR_INVALID", RL_ERR_INVALID) < 0 ||
        PyModule_AddIntConstant(module, "ERR_CONNECTION", RL_ERR_CONNECTION) < 0 ||
        PyModule_AddIntConstant(module, "ERR_TIMEOUT", RL_ERR_TIMEOUT) < 0 ||
        PyModule_AddIntConstant(module, "ERR_PROTOCOL", RL_ERR_PROTOCOL) < 0 ||
        PyModule_AddIntConstant(module, "ERR_REDIS", RL_ERR_REDIS) < 0 ||
        PyModule_AddIntConstant(module, "ERR_NOMEM", RL_ERR_NOMEM) < 0 ||
        PyModule_AddIntConstant(module, "ERR_CLOSED", RL_ERR_CLOSED) < 0 ||
        PyModule_AddIntConstant(module, "ERR_CANCELLED", RL_ERR_CANCELLED) < 0)
        return -1;
    return 0;
}

static int module_traverse(PyObject *module, visitproc visit, void *arg)
{
    rl_state *st = get_state(module);
    Py_VISIT(st->RateLimitError);
    Py_VISIT(st->InvalidArgument);
    Py_VISIT(st->ConnectionError);
    Py_VISIT(st->Timeout);
    Py_VISIT(st->ProtocolError);
    Py_VISIT(st->RedisError);
    Py_VISIT(st->Cancelled);
    Py_VISIT(st->ClientClosed);
    Py_VISIT(st->RateLimitExceeded);
    Py_VISIT(st->ClientType);
    Py_VISIT(st->LimiterType);
    Py_VISIT(st->ResultType);
    return 0;
}

static int module_clear(PyObject *module)
{
    rl_state *st = get_state(module);
    Py_CLEAR(st->RateLimitError);
    Py_CLEAR(st->InvalidArgument);
    Py_CLEAR(st->ConnectionError);
    Py_CLEAR(st->Timeout);
    Py_CLEAR(st->ProtocolError);
    Py_CLEAR(st->RedisError);
    Py_CLEAR(st->Cancelled);
    Py_CLEAR(st->ClientClosed);
    Py_CLEAR(st->RateLimitExceeded);
    Py_CLEAR(st->ClientType);
    Py_CLEAR(st->LimiterType);
    Py_CLEAR(st->ResultType);
    return 0;
}

static void module_free(void *module)
{
    module_clear((PyObject *)module);
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, module_exec},
    {0, NULL}};

PyDoc_STRVAR(module_doc, "The C core of ratelimit. Import ratelimit instead.");

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "ratelimit._ratelimit",
    .m_doc = module_doc,
    .m_size = sizeof(rl_state),
    .m_methods = module_methods,
    .m_slots = module_slots,
    .m_traverse = module_traverse,
    .m_clear = module_clear,
    .m_free = module_free,
};

PyMODINIT_FUNC PyInit__ratelimit(void)
{
    return PyModuleDef_Init(&module_def);
}
