/* ratelimit.Result: the outcome of one decision. */
#include "module.h"

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

PyObject *outcome_new(rl_state *st, int status, const char *error, const rl_result *r)
{
    return status == RL_OK ? result_new(st, r) : make_exception(st, status, error[0] ? error : rl_strerror(status));
}

/* A batch's outcomes (rl_execute_each), one per request: its Result, or its
 * error as an exception instance. */
static PyObject *outcomes_list(rl_state *st, const rl_result *results, const rl_outcome *outcomes, Py_ssize_t n)
{
    PyObject *out = PyList_New(n);
    for (Py_ssize_t i = 0; out && i < n; i++) {
        PyObject *r = outcome_new(st, outcomes[i].status, outcomes[i].error, &results[i]);
        if (!r) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, r);
    }
    return out;
}

PyObject *batch_outcomes(rl_state *st, int rc, const char *err, const rl_result *results, const rl_outcome *outcomes,
                         Py_ssize_t n, int return_exceptions)
{
    PyObject *list = outcomes_list(st, results, outcomes, n);
    /* an invalid batch was not sent: bad input raises, whatever was asked */
    if (!list || rc == RL_OK || (return_exceptions && rc != RL_ERR_INVALID)) return list;
    if (rc == RL_ERR_NOMEM) {
        Py_DECREF(list);
        return PyErr_NoMemory();
    }
    raise_code(st, rc, err);
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (value && PyObject_SetAttrString(value, "results", list) < 0) {
        Py_DECREF(list);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return NULL;
    }
    Py_DECREF(list);
    PyErr_Restore(type, value, tb);
    return NULL;
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
static PyObject *result_granted(ResultObject *self, void *c)
{
    return PyLong_FromLongLong(self->r.granted);
}
static PyObject *result_rate_index(ResultObject *self, void *c)
{
    return PyLong_FromLong(self->r.rate_index);
}
static PyObject *result_local(ResultObject *self, void *c)
{
    return PyBool_FromLong(self->r.local);
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
    {"granted", (getter)result_granted, NULL,
     "Permits consumed (acquire_at_most: 1..permits), given back (refund), or that would be\n"
     "(peek); 0 when denied.", NULL},
    {"rate_index", (getter)result_rate_index, NULL,
     "The rate that binds (0 = the first): when allowed the one with the least remaining,\n"
     "when denied the one that denied (the longest retry_after).", NULL},
    {"local", (getter)result_local, NULL,
     "True when decided from this client's lease (or a denial it remembers) without a round trip;\n"
     "remaining and reset_after are then the client's best knowledge.", NULL},
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
             "Result(allowed=%s, limit=%lld, remaining=%lld, retry_after=%s, reset_after=%.3f, wait=%.3f%s%s)",
             self->r.allowed ? "True" : "False", (long long)self->r.limit, (long long)self->r.remaining, retry,
             (double)self->r.reset_after_ms / 1000.0, (double)self->r.wait_ms / 1000.0,
             self->r.fallback ? ", fallback=True" : "", self->r.local ? ", local=True" : "");
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
