/* Exceptions: one class per C status, made at import into the module state,
 * and raising them with the core's message and .code. */
#include "module.h" /* first: Python.h sets the feature macros (3.15's _POSIX_C_SOURCE) */

#include <stdarg.h>

/* ms as seconds: "0.001", "1.5", "3153600000" */
static void fmt_seconds(char *out, size_t size, int64_t ms)
{
    const char *sign = ms < 0 ? "-" : "";
    unsigned long long a = ms < 0 ? 0ULL - (unsigned long long)ms : (unsigned long long)ms;
    int n = snprintf(out, size, "%s%llu.%03llu", sign, a / 1000, a % 1000);
    while (n > 0 && (size_t)n < size && out[n - 1] == '0') out[--n] = '\0';
    if (n > 0 && (size_t)n < size && out[n - 1] == '.') out[--n] = '\0';
}

/* The core's last error, when it was a number out of range, in a Python
 * caller's terms: the parameter as Python names it ("period", not
 * "period_ms") and milliseconds as seconds. 0 when it was not. */
static int python_range_message(char *buf, size_t size)
{
    rl_range_error d;
    char text[3][40]; /* min, max, value */
    if (!rl_errrange(&d)) return 0;
    size_t len = strlen(d.param);
    int ms = len > 3 && !strcmp(d.param + len - 3, "_ms");
    int name_len = (int)(ms ? len - 3 : len);
    const char *unit = ms ? " seconds" : "", *gap = *d.context ? " " : "";
    int64_t values[3] = {d.min, d.max, d.value};
    for (int i = 0; i < 3; i++)
        if (ms) fmt_seconds(text[i], sizeof text[i], values[i]);
        else snprintf(text[i], sizeof text[i], "%lld", (long long)values[i]);
    if (d.value > d.max)
        snprintf(buf, size, "%.*s is too large%s%s (max %s%s, got %s)", name_len, d.param, gap, d.context, text[1],
                 unit, text[2]);
    else
        snprintf(buf, size, "%.*s must be in %s..%s%s (got %s)", name_len, d.param, text[0], text[1], unit, text[2]);
    return 1;
}

void save_errmsg(char *buf, int rc)
{
    const char *m = rl_errmsg();
    if (rc == RL_ERR_INVALID && python_range_message(buf, ERRBUF)) return;
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
    case RL_ERR_BACKLOG: return st->Backlog;
    default: return st->RateLimitError;
    }
}

/* A new exception instance for rc with message msg and .code = rc (a
 * MemoryError for RL_ERR_NOMEM), or NULL with an error set. */
PyObject *make_exception(rl_state *st, int rc, const char *msg)
{
    PyObject *cls = rc == RL_ERR_NOMEM ? PyExc_MemoryError : exception_for(st, rc);
    PyObject *text = PyUnicode_DecodeUTF8(msg, (Py_ssize_t)strlen(msg), "replace");
    if (!text) return NULL;
    PyObject *exc = PyObject_CallOneArg(cls, text);
    Py_DECREF(text);
    if (!exc || rc == RL_ERR_NOMEM) return exc;
    PyObject *code = PyLong_FromLong(rc);
    if (!code || PyObject_SetAttrString(exc, "code", code) < 0) {
        Py_XDECREF(code);
        Py_DECREF(exc);
        return NULL;
    }
    Py_DECREF(code);
    return exc;
}

/* Raises the exception class for rc with message msg and .code = rc. */
PyObject *raise_code(rl_state *st, int rc, const char *msg)
{
    char said[ERRBUF];
    if (rc == RL_ERR_NOMEM) return PyErr_NoMemory();
    /* the core's own message (passed straight from rl_errmsg()): in Python's terms */
    if (rc == RL_ERR_INVALID && !strcmp(msg, rl_errmsg()) && python_range_message(said, sizeof said)) msg = said;
    PyObject *exc = make_exception(st, rc, msg);
    if (!exc) return NULL;
    PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
    Py_DECREF(exc);
    return NULL;
}

PyObject *raise_fmt(rl_state *st, int rc, const char *fmt, ...)
{
    char buf[ERRBUF];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return raise_code(st, rc, buf);
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

/* Makes the exception classes, adds them to module and keeps them in st.
 * Two branches separate outcomes: RedisFailure (Redis failed: catch it for
 * outages) and NotAcquired (Redis answered no); a handler for one never
 * catches the other (docs/errors.md). */
int errors_init(PyObject *module, rl_state *st)
{
    PyObject *bases, *failure = NULL, *not_acquired = NULL, *acquire_timeout = NULL;
    int rc = -1;

#define EXC(target, name, doc, base_expr, code)                                                \
    do {                                                                                       \
        if (!(bases = (base_expr))) goto done;                                                 \
        target = new_exception(module, name, doc, bases, code);                                \
        Py_DECREF(bases);                                                                      \
        if (!target) goto done;                                                                \
    } while (0)

    EXC(st->RateLimitError, "RateLimitError",
        "Root of every error raised by ratelimit; .code is the C status (RL_ERR_*),\n"
        "0 for NotAcquired (a decision, not a failure). .results: raised by a batch\n"
        "(acquire_many), every request's outcome, a Result or its exception; else None.",
        PyTuple_Pack(1, PyExc_Exception), 0);
    /* a batch's failure sets it: the list of every request's outcome */
    if (PyObject_SetAttrString(st->RateLimitError, "results", Py_None) < 0) goto done;
    EXC(failure, "RedisFailure",
        "Redis failed: no usable answer (cannot connect, timed out, undecodable\n"
        "reply, error reply) or the client is closed. Catch this for outages; a\n"
        "denial or a busy lock is NotAcquired, never this.",
        PyTuple_Pack(1, st->RateLimitError), 0);
    EXC(not_acquired, "NotAcquired",
        "Redis answered no: a rate limit denied the call (RateLimitExceeded) or a\n"
        "semaphore or lock stayed busy for the whole wait (AcquireTimeout).\n"
        ".code is 0: a decision, not a failure.",
        PyTuple_Pack(1, st->RateLimitError), RL_OK);
    EXC(st->InvalidArgument, "InvalidArgument",
        "A bad argument (also a ValueError); nothing was sent to Redis.",
        PyTuple_Pack(2, st->RateLimitError, PyExc_ValueError), RL_ERR_INVALID);
    EXC(st->ConnectionError, "ConnectionError",
        "Cannot connect to Redis, or the connection broke (also the builtin ConnectionError).",
        PyTuple_Pack(2, failure, PyExc_ConnectionError), RL_ERR_CONNECTION);
    EXC(st->Timeout, "Timeout",
        "Redis did not answer in time: a connect or command timeout (also the\n"
        "builtin TimeoutError). A busy semaphore or lock is AcquireTimeout.",
        PyTuple_Pack(2, failure, PyExc_TimeoutError), RL_ERR_TIMEOUT);
    EXC(st->ProtocolError, "ProtocolError", "Redis answered something the library cannot decode.",
        PyTuple_Pack(1, failure), RL_ERR_PROTOCOL);
    EXC(st->RedisError, "RedisError", "Redis returned an error reply (script error, ACL, OOM...).",
        PyTuple_Pack(1, failure), RL_ERR_REDIS);
    EXC(st->ClientClosed, "ClientClosed", "The client was closed.", PyTuple_Pack(1, failure), RL_ERR_CLOSED);
    EXC(st->Backlog, "Backlog",
        "Not sent, so nothing consumed: the server is behind and max_in_flight\n"
        "requests are in flight to it (or, blocking, one call is, every pooled\n"
        "connection being busy). on_redis_error decides a rate limit, as for a Timeout.",
        PyTuple_Pack(1, failure), RL_ERR_BACKLOG);
    EXC(st->Cancelled, "Cancelled", "A blocking wait was cancelled by its cancel callable.",
        PyTuple_Pack(1, st->RateLimitError), RL_ERR_CANCELLED);
    EXC(st->RateLimitExceeded, "RateLimitExceeded",
        "Raised where the caller asked to raise on denial (the limit() decorator,\n"
        "reserve()). .retry_after: seconds until a retry could pass; .result: the\n"
        "denied Result (or None); .code is 0: denial is a decision, not a failure.",
        PyTuple_Pack(1, not_acquired), RL_OK);
    EXC(acquire_timeout, "AcquireTimeout",
        "A semaphore permit or lock was not acquired within the timeout: it stayed\n"
        "busy (Redis answered every attempt). Also the builtin TimeoutError; not a\n"
        "RedisFailure. .code is 0.",
        PyTuple_Pack(2, not_acquired, PyExc_TimeoutError), RL_OK);
#undef EXC
    rc = 0;
done:
    /* the module holds these; nothing in C raises them */
    Py_XDECREF(failure);
    Py_XDECREF(not_acquired);
    Py_XDECREF(acquire_timeout);
    return rc;
}
