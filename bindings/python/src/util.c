/* Argument conversion (text, ints, seconds) and the cancel callback of
 * blocking waits: what every type of the binding shares. */
#include "module.h" /* first: Python.h sets the feature macros (3.15's _POSIX_C_SOURCE) */

#include <math.h>

/* ---- argument conversion ------------------------------------------------------ */

/* A name, id or message: str (UTF-8) or bytes. *keep receives a new
 * reference that owns the bytes; they stay valid while the GIL is released. */
int conv_text(rl_state *st, PyObject *o, const char *param, int allow_nul, PyObject **keep, const char **data,
              Py_ssize_t *len)
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

int conv_int64(rl_state *st, PyObject *o, const char *param, int64_t *out)
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
int conv_seconds(rl_state *st, PyObject *o, const char *param, int64_t *out_ms)
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

PyObject *ms_to_seconds(int64_t ms)
{
    return PyFloat_FromDouble((double)ms / 1000.0);
}

/* ---- cancellation ------------------------------------------------------------- */

/* Polled by the core while it sleeps or waits (at least every 100 ms):
 * takes the GIL back so Ctrl-C (signal handlers) and a caller-supplied
 * cancel() can stop the wait, then lets it go again. */
int cancel_cb(void *p)
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

