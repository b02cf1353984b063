/* ratelimit._ratelimit: the CPython binding of the C core.
 *
 * Modelled on CPython's Modules/_sqlite: multi-phase init, heap types, and
 * the exception classes in module state, one file per concept of the core:
 * errors.c, client.c, limiter.c (with Result), sync.c (semaphore, lock,
 * delay queue), aio.c (completion queues for asynchronous calls),
 * util.c (argument conversion, cancellation), and this one (module state,
 * module functions, init). */
#include "module.h"

static struct PyModuleDef module_def;

rl_state *state_of_type(PyTypeObject *tp)
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
    if (rl_rate_parse(s, &limit, &period_ms)) return raise_code(st, RL_ERR_INVALID, rl_errmsg());
    /* accept exactly what limiter(name, text) accepts (its default algorithm) */
    rl_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.algorithm = RL_GCRA;
    spec.limit = limit;
    spec.period_ms = period_ms;
    if (rl_spec_validate(&spec)) return raise_code(st, RL_ERR_INVALID, rl_errmsg());
    return Py_BuildValue("(LN)", (long long)limit, ms_to_seconds(period_ms));
}

PyDoc_STRVAR(parse_key_doc,
"_parse_key(key, prefix)\n--\n\n"
"For tools: what a key of the library holds, as the core reads it back:\n"
"(kind, name, id, client_id, algorithm, rate, suffix), kind 'state',\n"
"'config' or 'other' (a primitive's: suffix says what); rate 1 for the\n"
"first; None for a key of someone else's.");

static PyObject *text_or_none(const char *s)
{
    if (!s) Py_RETURN_NONE;
    return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "backslashreplace");
}

static PyObject *mod_parse_key(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    static const char *const kinds[] = {"state", "config", "other"};
    PyObject *key, *out = NULL;
    const char *prefix;
    rl_key_parts parts;
    if (nargs != 2 || !PyUnicode_Check(args[0]) || !PyUnicode_Check(args[1]))
        return PyErr_Format(PyExc_TypeError, "_parse_key(key, prefix) takes two str");
    if (!(prefix = PyUnicode_AsUTF8(args[1]))) return NULL;
    if (!(key = PyUnicode_AsEncodedString(args[0], "utf-8", "surrogateescape"))) return NULL;
    int rc = rl_key_parse(prefix, PyBytes_AS_STRING(key), (size_t)PyBytes_GET_SIZE(key), &parts);
    if (rc < 0) raise_code(get_state(module), rc, rl_errmsg());
    else if (rc == 0) {
        Py_INCREF(Py_None);
        out = Py_None;
    }
    else
        out = Py_BuildValue("(sNNNzis)", kinds[parts.kind], text_or_none(parts.name), text_or_none(parts.id),
                            text_or_none(parts.client_id),
                            parts.kind == RL_KEY_STATE ? rl_algorithm_name(parts.algorithm) : NULL, parts.rate + 1,
                            parts.suffix ? parts.suffix : "");
    rl_key_parts_free(&parts);
    Py_DECREF(key);
    return out;
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
    return PyBool_FromLong(rl_tls_supported());
}

PyDoc_STRVAR(redact_url_doc,
"redact_url(url)\n--\n\n"
"url as a log may show it: the password and secret-looking options\n"
"(sentinel_password...) masked as ***, the way the core's messages quote URLs.");

static PyObject *mod_redact_url(PyObject *module, PyObject *arg)
{
    Py_ssize_t len;
    const char *url = PyUnicode_AsUTF8AndSize(arg, &len);
    if (!url) return NULL;
    char small[512], *buf = small;
    int n = rl_url_redact(url, small, sizeof small);
    if (n >= (int)sizeof small) {
        if (!(buf = PyMem_Malloc((size_t)n + 1))) return PyErr_NoMemory();
        rl_url_redact(url, buf, (size_t)n + 1);
    }
    PyObject *out = PyUnicode_DecodeUTF8(buf, n, "surrogateescape");
    if (buf != small) PyMem_Free(buf);
    return out;
}

PyDoc_STRVAR(tls_version_doc,
"tls_version()\n--\n\n"
"The OpenSSL this build runs with (\"OpenSSL 3.0.20 7 Apr 2026\"), to tell\n"
"whether an OpenSSL advisory concerns it; None without TLS.");

static PyObject *mod_tls_version(PyObject *module, PyObject *unused)
{
    const char *version = rl_tls_version();
    if (!version) Py_RETURN_NONE;
    return PyUnicode_FromString(version);
}

PyDoc_STRVAR(check_lease_doc,
"_check_lease(lease)\n--\n\n"
"lease as Client.limiter takes it, checked: the seconds a leased block is\n"
"valid (whole milliseconds), or None. For configuration read before any\n"
"limiter is made (ratelimit.contrib).");

static PyObject *mod_check_lease(PyObject *module, PyObject *lease)
{
    int64_t ms;
    if (conv_lease(get_state(module), lease, &ms) < 0) return NULL;
    if (!ms) Py_RETURN_NONE;
    return ms_to_seconds(ms);
}

static PyMethodDef module_methods[] = {
    {"_check_lease", (PyCFunction)mod_check_lease, METH_O, check_lease_doc},
    {"has_tls", (PyCFunction)mod_has_tls, METH_NOARGS, has_tls_doc},
    {"tls_version", (PyCFunction)mod_tls_version, METH_NOARGS, tls_version_doc},
    {"parse_rate", (PyCFunction)mod_parse_rate, METH_O, parse_rate_doc},
    {"_parse_key", (PyCFunction)(void (*)(void))mod_parse_key, METH_FASTCALL, parse_key_doc},
    {"redact_url", (PyCFunction)mod_redact_url, METH_O, redact_url_doc},
    {"scripts", (PyCFunction)mod_scripts, METH_NOARGS, scripts_doc},
    {"strerror", (PyCFunction)mod_strerror, METH_O, strerror_doc},
    {NULL}};

/* ---- module init ---------------------------------------------------------------- */

/* PyModule_AddObjectRef is 3.10+ */
int add_ref(PyObject *module, const char *name, PyObject *obj)
{
    Py_INCREF(obj);
    if (PyModule_AddObject(module, name, obj) < 0) {
        Py_DECREF(obj);
        return -1;
    }
    return 0;
}

static int module_exec(PyObject *module)
{
    rl_state *st = get_state(module);

    if (rl_version_number() != RL_VERSION_NUMBER) {
        PyErr_Format(PyExc_ImportError, "ratelimit: the C core is version %d but this module was built for %d",
                     rl_version_number(), RL_VERSION_NUMBER);
        return -1;
    }

    if (errors_init(module, st) < 0) return -1;

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
    st->CompletionsType = (PyTypeObject *)PyType_FromModuleAndSpec(module, &completions_spec, NULL);
    if (!st->CompletionsType || add_ref(module, "Completions", (PyObject *)st->CompletionsType) < 0) return -1;

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
        PyModule_AddIntConstant(module, "MAX_RATES", RL_MAX_RATES) < 0 ||
        PyModule_AddIntConstant(module, "ERR_INVALID", RL_ERR_INVALID) < 0 ||
        PyModule_AddIntConstant(module, "ERR_CONNECTION", RL_ERR_CONNECTION) < 0 ||
        PyModule_AddIntConstant(module, "ERR_TIMEOUT", RL_ERR_TIMEOUT) < 0 ||
        PyModule_AddIntConstant(module, "ERR_PROTOCOL", RL_ERR_PROTOCOL) < 0 ||
        PyModule_AddIntConstant(module, "ERR_REDIS", RL_ERR_REDIS) < 0 ||
        PyModule_AddIntConstant(module, "ERR_NOMEM", RL_ERR_NOMEM) < 0 ||
        PyModule_AddIntConstant(module, "ERR_CLOSED", RL_ERR_CLOSED) < 0 ||
        PyModule_AddIntConstant(module, "ERR_CANCELLED", RL_ERR_CANCELLED) < 0 ||
        PyModule_AddIntConstant(module, "ERR_BACKLOG", RL_ERR_BACKLOG) < 0)
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
    Py_VISIT(st->Backlog);
    Py_VISIT(st->RateLimitExceeded);
    Py_VISIT(st->ClientType);
    Py_VISIT(st->LimiterType);
    Py_VISIT(st->ResultType);
    Py_VISIT(st->CompletionsType);
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
    Py_CLEAR(st->Backlog);
    Py_CLEAR(st->RateLimitExceeded);
    Py_CLEAR(st->ClientType);
    Py_CLEAR(st->LimiterType);
    Py_CLEAR(st->ResultType);
    Py_CLEAR(st->CompletionsType);
    return 0;
}

static void module_free(void *module)
{
    module_clear((PyObject *)module);
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, module_exec},
#ifdef Py_GIL_DISABLED
    /* safe without the GIL: module.h, "free-threaded builds" */
    {Py_mod_gil, Py_MOD_GIL_NOT_USED},
#endif
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

