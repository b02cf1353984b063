/* Exceptions: one class per C status, made at import into the module state,
 * and raising them with the core's message and .code. */
#include <stdarg.h>

#include "module.h"

void save_errmsg(char *buf, int rc)
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
    if (rc == RL_ERR_NOMEM) return PyErr_NoMemory();
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

/* Makes the exception classes, adds them to module and keeps them in st. */
int errors_init(PyObject *module, rl_state *st)
{
    PyObject *bases;

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
    return 0;
}
