/* Python's spelling of an rl_spec: rates as "10/second" or (limit, seconds),
 * bursts, initial tokens, scope; and back. */
#include "module.h"

/* One rate: "10/second" (the core parses it) or (limit, period_seconds). */
static int conv_one_rate(rl_state *st, PyObject *o, int64_t *limit, int64_t *period_ms)
{
    if (PyUnicode_Check(o)) {
        const char *text = PyUnicode_AsUTF8(o);
        if (!text) return -1;
        if (rl_rate_parse(text, limit, period_ms)) {
            raise_code(st, RL_ERR_INVALID, rl_errmsg());
            return -1;
        }
        return 0;
    }
    if (PyTuple_Check(o) && PyTuple_GET_SIZE(o) == 2) {
        if (conv_int64(st, PyTuple_GET_ITEM(o, 0), "rate limit", limit) < 0) return -1;
        return conv_seconds(st, PyTuple_GET_ITEM(o, 1), "rate period", period_ms);
    }
    PyErr_Format(PyExc_TypeError,
                 "a rate must be a str such as '10/minute' or a (limit, period_seconds) tuple, not %.100s",
                 Py_TYPE(o)->tp_name);
    return -1;
}

/* rate: one rate, "10/second;1000/hour", or a list of rates -> spec's rates. */
static int conv_rates(rl_state *st, PyObject *rate, rl_spec *spec)
{
    if (PyUnicode_Check(rate)) {
        const char *text = PyUnicode_AsUTF8(rate);
        if (!text) return -1;
        /* one rate goes through rl_rate_parse, as ratelimit.parse_rate does */
        if (!strpbrk(text, ";,|")) return conv_one_rate(st, rate, &spec->limit, &spec->period_ms);
        if (rl_rates_parse(text, spec)) {
            raise_code(st, RL_ERR_INVALID, rl_errmsg());
            return -1;
        }
        return 0;
    }
    /* (limit, period): one rate; any other list or tuple: several */
    if (PyTuple_Check(rate) && PyTuple_GET_SIZE(rate) == 2 && PyLong_Check(PyTuple_GET_ITEM(rate, 0)))
        return conv_one_rate(st, rate, &spec->limit, &spec->period_ms);
    if (PyList_Check(rate) || PyTuple_Check(rate)) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(rate);
        if (n < 1 || n > RL_MAX_RATES) {
            raise_fmt(st, RL_ERR_INVALID, "a limiter holds 1..%d rates (got %zd)", RL_MAX_RATES, n);
            return -1;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t *limit = i ? &spec->more[i - 1].limit : &spec->limit;
            int64_t *period = i ? &spec->more[i - 1].period_ms : &spec->period_ms;
            if (conv_one_rate(st, PySequence_Fast_GET_ITEM(rate, i), limit, period) < 0) return -1;
        }
        spec->more_count = (size_t)n - 1;
        return 0;
    }
    PyErr_Format(PyExc_TypeError,
                 "rate must be a str such as '10/minute' or '10/second;1000/hour', a (limit, period_seconds) "
                 "tuple, or a list of those, not %.100s",
                 Py_TYPE(rate)->tp_name);
    return -1;
}

/* burst: None, an int for the first rate, or one int (or None) per rate. */
static int conv_bursts(rl_state *st, PyObject *burst, rl_spec *spec)
{
    if (burst == Py_None) return 0;
    if (!PyList_Check(burst) && !PyTuple_Check(burst)) return conv_int64(st, burst, "burst", &spec->burst);
    Py_ssize_t n = PySequence_Fast_GET_SIZE(burst);
    if ((size_t)n != spec->more_count + 1) {
        raise_fmt(st, RL_ERR_INVALID, "burst: a list holds one value per rate (%zu rates, %zd bursts)",
                  spec->more_count + 1, n);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *b = PySequence_Fast_GET_ITEM(burst, i);
        if (b != Py_None && conv_int64(st, b, "burst", i ? &spec->more[i - 1].burst : &spec->burst) < 0) return -1;
    }
    return 0;
}

int conv_spec(rl_state *st, PyObject *rate, PyObject *algorithm, PyObject *burst, PyObject *initial_tokens,
              PyObject *per_client, rl_spec *spec)
{
    memset(spec, 0, sizeof *spec);
    spec->algorithm = RL_GCRA;
    if (algorithm && algorithm != Py_None) {
        const char *a;
        rl_algorithm alg;
        if (!PyUnicode_Check(algorithm)) {
            PyErr_Format(PyExc_TypeError, "algorithm must be str, not %.100s", Py_TYPE(algorithm)->tp_name);
            return -1;
        }
        if (!(a = PyUnicode_AsUTF8(algorithm))) return -1;
        if (rl_algorithm_parse(a, &alg)) {
            raise_code(st, RL_ERR_INVALID, rl_errmsg());
            return -1;
        }
        spec->algorithm = alg;
    }
    if (conv_rates(st, rate, spec) < 0) return -1;
    if (burst && conv_bursts(st, burst, spec) < 0) return -1;
    if (initial_tokens && initial_tokens != Py_None) {
        int64_t v;
        if (conv_int64(st, initial_tokens, "initial_tokens", &v) < 0) return -1;
        if (v < 0) {
            raise_fmt(st, RL_ERR_INVALID, "initial_tokens must be at least 0 (got %lld; None: full)", (long long)v);
            return -1;
        }
        spec->initial_tokens = v == 0 ? RL_EMPTY : v; /* Python's 0 is "none"; the core's 0 is "full" */
    }
    if (per_client) {
        int t = PyObject_IsTrue(per_client);
        if (t < 0) return -1;
        spec->scope = t ? RL_SCOPE_PER_CLIENT : RL_SCOPE_OVERALL;
    }
    if (rl_spec_validate(spec)) { /* a bad limiter fails where it is made */
        raise_code(st, RL_ERR_INVALID, rl_errmsg());
        return -1;
    }
    return 0;
}

PyObject *spec_to_python(const rl_spec *spec)
{
    rl_rate rates[RL_MAX_RATES];
    size_t n = rl_spec_rates(spec, rates);
    char text[1024];
    PyObject *list = PyList_New((Py_ssize_t)n), *bursts = PyList_New((Py_ssize_t)n), *initial;
    if (!list || !bursts) goto fail;
    for (size_t i = 0; i < n; i++) {
        PyObject *r = Py_BuildValue("(LN)", (long long)rates[i].limit, ms_to_seconds(rates[i].period_ms));
        PyObject *b = rates[i].burst ? PyLong_FromLongLong(rates[i].burst) : (Py_INCREF(Py_None), Py_None);
        if (!r || !b) {
            Py_XDECREF(r);
            Py_XDECREF(b);
            goto fail;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, r);
        PyList_SET_ITEM(bursts, (Py_ssize_t)i, b);
    }
    if (spec->initial_tokens == 0) initial = (Py_INCREF(Py_None), Py_None);
    else initial = PyLong_FromLongLong(spec->initial_tokens == RL_EMPTY ? 0 : spec->initial_tokens);
    if (!initial) goto fail;
    rl_spec_format(spec, text, sizeof text);
    return Py_BuildValue("(sNNNOs)", rl_algorithm_name(spec->algorithm), list, bursts, initial,
                         spec->scope == RL_SCOPE_PER_CLIENT ? Py_True : Py_False, text);
fail:
    Py_XDECREF(list);
    Py_XDECREF(bursts);
    return NULL;
}
