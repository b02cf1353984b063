/* ratelimit.Client: a pool of connections to Redis (rl_client) and its
 * options. The semaphore, lock and delay queue methods are in sync.c. */
#include "module.h" /* first: Python.h sets the feature macros (3.15's _POSIX_C_SOURCE) */

#include <strings.h>

/* ---- Client ------------------------------------------------------------------- */

rl_client *client_handle(rl_state *st, ClientObject *c)
{
    if (!c->rl) raise_code(st, RL_ERR_CLOSED, "the client is not open");
    return c->rl;
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

/* A count for an rl_options field, 1..max (the core reads 0 as "the
 * default": here that is None, so 0 is refused); shown: the range's end the
 * message names. */
static int conv_option_count(rl_state *st, PyObject *o, const char *param, int64_t max, int64_t shown, int *out)
{
    int64_t v;
    if (conv_int64(st, o, param, &v) < 0) return -1;
    if (v < 1 || v > max) {
        raise_fmt(st, RL_ERR_INVALID, "%s must be in 1..%lld (got %lld)", param, (long long)shown, (long long)v);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* Seconds -> a positive int of milliseconds for an rl_options field (the
 * core reads 0 as "the default": here that is None, so 0 is refused). */
static int conv_option_ms(rl_state *st, PyObject *o, const char *param, int *out)
{
    int64_t v;
    if (conv_seconds(st, o, param, &v) < 0) return -1;
    if (v < 1) {
        raise_fmt(st, RL_ERR_INVALID, "%s must be at least 0.001 seconds (None: the default)", param);
        return -1;
    }
    if (v > INT32_MAX) {
        raise_fmt(st, RL_ERR_INVALID, "%s is too large (max %d seconds)", param, INT32_MAX / 1000);
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
                             "ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_cert_reqs", "reconnect_max",
                             "config_refresh", "client_id", "max_in_flight", "max_batch", NULL};
    enum { CA, CERT, KEY, NPATHS };
    static const char *path_names[NPATHS] = {"ssl_ca_certs", "ssl_certfile", "ssl_keyfile"};
    PyObject *url, *prefix = Py_None, *timeout = Py_None, *connect_timeout = Py_None, *pool_size = Py_None,
                   *on_error = Py_None, *cert_reqs = Py_None, *reconnect_max = Py_None, *config_refresh = Py_None,
                   *client_id = Py_None, *client_id_keep = NULL, *max_in_flight = Py_None,
                   *max_batch = Py_None;
    PyObject *paths[NPATHS] = {Py_None, Py_None, Py_None}, *path_keep[NPATHS] = {NULL, NULL, NULL};
    const char **path_fields[NPATHS];
    PyObject *url_keep = NULL, *prefix_keep = NULL;
    const char *url_s, *prefix_s;
    rl_state *st = STATE(self);
    rl_options opts;
    rl_client *rl = NULL;
    char err[ERRBUF];
    int rc = -1;

    if (!st) return -1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$OOOOOOOOOOOOOO:Client", kwlist, &url, &prefix, &timeout,
                                     &connect_timeout, &pool_size, &on_error, &paths[CA], &paths[CERT],
                                     &paths[KEY], &cert_reqs, &reconnect_max, &config_refresh, &client_id,
                                     &max_in_flight, &max_batch))
        return -1;
    if (self->rl || CLOSING_LOAD(self)) {
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
    /* pool_size: the core checks the range (its message names 1..1024) */
    if (pool_size != Py_None && conv_option_count(st, pool_size, "pool_size", INT32_MAX, 1024, &opts.pool_size) < 0)
        goto done;
    if (max_in_flight != Py_None &&
        conv_option_count(st, max_in_flight, "max_in_flight", 1000000, 1000000, &opts.max_in_flight) < 0)
        goto done;
    if (max_batch != Py_None && conv_option_count(st, max_batch, "max_batch", 100, 100, &opts.max_batch) < 0)
        goto done;
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
        if (conv_option_ms(st, reconnect_max, "reconnect_max", &opts.reconnect_max_ms) < 0) goto done;
    }
    if (config_refresh != Py_None &&
        conv_option_ms(st, config_refresh, "config_refresh", &opts.config_refresh_ms) < 0)
        goto done;
    if (client_id != Py_None) {
        if (!PyUnicode_Check(client_id)) {
            PyErr_Format(PyExc_TypeError, "client_id must be str, not %.100s", Py_TYPE(client_id)->tp_name);
            goto done;
        }
        /* the core checks it (1..64 of [A-Za-z0-9._-]); "" would mean its default */
        if (conv_text(st, client_id, "client_id", 0, &client_id_keep, &opts.client_id, NULL) < 0) goto done;
        if (!*opts.client_id) {
            raise_code(st, RL_ERR_INVALID, "client_id must not be empty (None: a random one)");
            goto done;
        }
    }
    CALL_WITHOUT_GIL(rc, err, rl_client_open(&rl, url_s, &opts));
    if (rc) {
        raise_code(st, rc, err);
        rc = -1;
        goto done;
    }
    /* two threads may run __init__ at once (the GIL was released above):
     * the first to finish keeps its client */
    int first = 0;
    Py_BEGIN_CRITICAL_SECTION(self);
    if (!self->rl && !CLOSING_LOAD(self)) {
        self->rl = rl;
        first = 1;
    }
    Py_END_CRITICAL_SECTION();
    if (!first) {
        WITHOUT_GIL(rl_client_close(rl));
        raise_code(st, RL_ERR_INVALID, "Client.__init__ may be called only once");
        rc = -1;
    }
done:
    Py_XDECREF(url_keep);
    Py_XDECREF(client_id_keep);
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
    rl_client *rl = self->rl;
    self->rl = NULL;
    if (rl) WITHOUT_GIL(rl_client_close(rl));
    client_release_queues(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

PyDoc_STRVAR(client_close_doc,
"close()\n--\n\n"
"Give every lease's unused permits back, then close all connections (one\n"
"round trip per lease, bounded by the timeout). Calls still running finish\n"
"first (both happen when the last one returns); new calls raise\n"
"ClientClosed. Closing twice is a no-op.");

static PyObject *client_close(ClientObject *self, PyObject *unused)
{
    if (CLOSING_SET(self)) Py_RETURN_NONE; /* one thread closes */
    /* asynchronous requests complete (ClientClosed) into their queues on
     * the I/O thread, which needs no GIL (aio.c frees a queue once taken) */
    int done = 0;
    if (self->rl) WITHOUT_GIL(done = rl_client_shutdown(self->rl, 0));
    if (done) client_release_queues(self); /* nothing posts to them any more */
    Py_RETURN_NONE;
}

void client_give_back(rl_state *st, ClientObject *c, const char *name)
{
    rl_client *rl = client_handle(st, c);
    if (!rl) { /* a closed client gave every lease back */
        PyErr_Clear();
        return;
    }
    /* a failure leaves the permits booked until the lease ends (safe); a
     * client shut down gave them back already */
    WITHOUT_GIL(rl_leases_give_back(rl, name));
}

PyDoc_STRVAR(client_give_back_doc,
"_give_back()\n--\n\n"
"Low level: end every lease of this client now, giving back its unused\n"
"permits (what close() does first); the client stays open. Never raises.\n"
"Run at interpreter exit for every open client.");

static PyObject *client_give_back_all(ClientObject *self, PyObject *unused)
{
    rl_state *st = STATE(self);
    if (st) client_give_back(st, self, NULL);
    Py_RETURN_NONE;
}

static PyObject *client_get_closed(ClientObject *self, void *c)
{
    return PyBool_FromLong(CLOSING_LOAD(self) || !self->rl);
}

static PyObject *client_get_prefix(ClientObject *self, void *c)
{
    if (!self->rl || CLOSING_LOAD(self)) Py_RETURN_NONE;
    return PyUnicode_FromString(rl_client_prefix(self->rl));
}

PyDoc_STRVAR(client_stats_doc,
"stats() -> dict\n--\n\n"
"The decisions this client made, per limiter name: {name: {'allowed': int,\n"
"'denied': int, 'fallback': int, 'errors': int, 'local_allowed': int,\n"
"'local_denied': int, 'lease_calls': int, 'latency_sum': seconds,\n"
"'latency_buckets': [(upper_bound_seconds, count), ...]}}. local_allowed and\n"
"local_denied are the part of allowed and denied decided from a lease\n"
"without a round trip; lease_calls the scripts that took or gave back a\n"
"block. Bucket counts are not cumulative; the last bound is inf. Names past\n"
"the core's limit share the entry ''. Empty when the client was made with\n"
"metrics off.");

/* One name's counters as plain data. */
static PyObject *limiter_stats_dict(const rl_limiter_stats *s)
{
    PyObject *buckets = PyList_New(RL_STATS_BUCKETS);
    if (!buckets) return NULL;
    for (int b = 0; b < RL_STATS_BUCKETS; b++) {
        double bound = b < RL_STATS_BUCKETS - 1 ? (double)RL_STATS_BUCKET_US(b) / 1e6 : Py_HUGE_VAL;
        PyObject *pair = Py_BuildValue("(dK)", bound, (unsigned long long)s->latency_buckets[b]);
        if (!pair) {
            Py_DECREF(buckets);
            return NULL;
        }
        PyList_SET_ITEM(buckets, b, pair);
    }
    return Py_BuildValue("{sKsKsKsKsKsKsKsdsN}", "allowed", (unsigned long long)s->allowed, "denied",
                         (unsigned long long)s->denied, "fallback", (unsigned long long)s->fallback, "errors",
                         (unsigned long long)s->errors, "local_allowed", (unsigned long long)s->local_allowed,
                         "local_denied", (unsigned long long)s->local_denied, "lease_calls",
                         (unsigned long long)s->lease_calls, "latency_sum", (double)s->latency_sum_us / 1e6,
                         "latency_buckets", buckets);
}

static PyObject *client_stats(ClientObject *self, PyObject *unused)
{
    rl_state *st = STATE(self);
    rl_client *rl = client_handle(st, self);
    rl_limiter_stats *all = NULL;
    PyObject *out = NULL;
    size_t n = 0, got = 0;
    if (!rl) return NULL;
    /* no lock nor round trip in the core: the GIL stays held */
    int rc = rl_client_stats(rl, NULL, 0, &n); /* fails only closed */
    if (rc) return raise_code(st, rc, rl_errmsg());
    if (!(all = PyMem_Calloc(n + 1, sizeof *all))) {
        PyErr_NoMemory();
        goto done;
    }
    rl_client_stats(rl, all, n + 1, &got);
    if (got > n + 1) got = n + 1; /* names added in between wait for the next call */
    if (!(out = PyDict_New())) goto done;
    for (size_t i = 0; i < got; i++) {
        PyObject *name = PyUnicode_DecodeUTF8(all[i].name, (Py_ssize_t)strlen(all[i].name), "replace");
        PyObject *entry = name ? limiter_stats_dict(&all[i]) : NULL;
        int rc = entry ? PyDict_SetItem(out, name, entry) : -1;
        Py_XDECREF(name);
        Py_XDECREF(entry);
        if (rc < 0) {
            Py_CLEAR(out);
            break;
        }
    }
done:
    PyMem_Free(all);
    return out;
}

/* ---- stored limiter specs ------------------------------------------------------ */

/* What the config calls share: name (str) as UTF-8 (*keep owns it), and
 * the client; NULL: raised. */
static rl_client *enter_named(rl_state *st, ClientObject *self, PyObject *name, PyObject **keep, const char **name_s)
{
    if (!PyUnicode_Check(name)) {
        PyErr_Format(PyExc_TypeError, "name must be str, not %.100s", Py_TYPE(name)->tp_name);
        return NULL;
    }
    if (conv_text(st, name, "name", 0, keep, name_s, NULL) < 0) return NULL;
    rl_client *rl = client_handle(st, self);
    if (!rl) Py_CLEAR(*keep);
    return rl;
}

/* Ends a config call: *value as a bool, or the error raised. */
static PyObject *leave_named(rl_state *st, ClientObject *self, PyObject *keep, int rc, const char *err, int value)
{
    Py_DECREF(keep);
    if (rc) return raise_code(st, rc, err);
    return PyBool_FromLong(value);
}

PyDoc_STRVAR(client_config_set_doc,
"_config_set(name, rate, algorithm, burst, initial_tokens, per_client, if_absent) -> bool\n--\n\n"
"Low level: store a limiter's spec in Redis. Use Client.configure() instead.");

static PyObject *client_config_set(ClientObject *self, PyObject *args)
{
    PyObject *name, *rate, *algorithm, *burst, *initial, *per_client, *keep = NULL;
    rl_state *st = STATE(self);
    const char *name_s;
    char err[ERRBUF];
    int if_absent, set = 1, rc;
    rl_spec spec;

    if (!st || !PyArg_ParseTuple(args, "OOOOOOp:_config_set", &name, &rate, &algorithm, &burst, &initial,
                                 &per_client, &if_absent))
        return NULL;
    if (conv_spec(st, rate, algorithm, burst, initial, per_client, &spec) < 0) return NULL;
    rl_client *rl = enter_named(st, self, name, &keep, &name_s);
    if (!rl) return NULL;
    CALL_WITHOUT_GIL(rc, err,
                     if_absent ? rl_config_set_if_absent(rl, name_s, &spec, &set) : rl_config_set(rl, name_s, &spec));
    return leave_named(st, self, keep, rc, err, set);
}

PyDoc_STRVAR(client_config_get_doc,
"_config_get(name) -> tuple or None\n--\n\n"
"Low level: the spec stored for name, read from Redis (not the cache), as\n"
"(algorithm, rates, bursts, initial_tokens, per_client, text). Use\n"
"Client.get_config() instead.");

static PyObject *client_config_get(ClientObject *self, PyObject *name)
{
    rl_state *st = STATE(self);
    PyObject *keep = NULL, *out;
    const char *name_s;
    char err[ERRBUF];
    int found = 0, rc;
    rl_spec spec;

    rl_client *rl = st ? enter_named(st, self, name, &keep, &name_s) : NULL;
    if (!rl) return NULL;
    CALL_WITHOUT_GIL(rc, err, rl_config_get(rl, name_s, &spec, &found));
    if (!(out = leave_named(st, self, keep, rc, err, found))) return NULL;
    Py_DECREF(out);
    if (!found) Py_RETURN_NONE;
    return spec_to_python(&spec);
}

PyDoc_STRVAR(client_config_delete_doc,
"_config_delete(name) -> bool\n--\n\n"
"Low level: delete the spec stored for name. Use Client.delete_config().");

static PyObject *client_config_delete(ClientObject *self, PyObject *name)
{
    rl_state *st = STATE(self);
    PyObject *keep = NULL;
    const char *name_s;
    char err[ERRBUF];
    int deleted = 0, rc;

    rl_client *rl = st ? enter_named(st, self, name, &keep, &name_s) : NULL;
    if (!rl) return NULL;
    CALL_WITHOUT_GIL(rc, err, rl_config_delete(rl, name_s, &deleted));
    return leave_named(st, self, keep, rc, err, deleted);
}

static PyObject *client_get_client_id(ClientObject *self, void *c)
{
    if (!self->rl) Py_RETURN_NONE;
    return PyUnicode_FromString(rl_client_id(self->rl));
}

/* ---- raw commands (the ratelimit command line tool) ------------------------------- */

/* A reply as Python data: bytes, int, None, list, float, bool; an error
 * reply is an exception (RedisError), raised. */
static PyObject *reply_to_python(rl_state *st, const rl_reply *r)
{
    size_t len = 0;
    const char *str = rl_reply_str(r, &len);
    switch (rl_reply_kind(r)) {
    case RL_REPLY_STRING: return PyBytes_FromStringAndSize(str, (Py_ssize_t)len);
    case RL_REPLY_STATUS: return PyUnicode_DecodeUTF8(str, (Py_ssize_t)len, "replace");
    case RL_REPLY_INTEGER: return PyLong_FromLongLong(rl_reply_integer(r));
    case RL_REPLY_NIL: Py_RETURN_NONE;
    case RL_REPLY_ERROR: return raise_fmt(st, RL_ERR_REDIS, "%.*s", (int)(len < 400 ? len : 400), str);
    case RL_REPLY_DOUBLE: return PyFloat_FromDouble(rl_reply_double(r));
    case RL_REPLY_BOOL: return PyBool_FromLong((long)rl_reply_integer(r));
    case RL_REPLY_ARRAY: break;
    }
    PyObject *out = PyList_New((Py_ssize_t)rl_reply_count(r));
    for (size_t i = 0; out && i < rl_reply_count(r); i++) {
        PyObject *item = reply_to_python(st, rl_reply_at(r, i));
        if (!item) Py_CLEAR(out);
        else PyList_SET_ITEM(out, (Py_ssize_t)i, item);
    }
    return out;
}

PyDoc_STRVAR(client_command_doc,
"_command(args, key=None, node=None)\n--\n\n"
"Low level, for tools: one Redis command (args: str, bytes or int) on the\n"
"server that holds key (bytes or str; Cluster routing), or on the master\n"
"of slot node (an entry of _masters()), else on any server. Returns the\n"
"reply as bytes, str (status), int, None or lists; an error reply raises\n"
"RedisError. At most 48 arguments.");

/* a command's argument (str, bytes or int) as bytes; NULL with an exception */
static PyObject *command_arg(PyObject *a, Py_ssize_t i)
{
    if (PyLong_Check(a) && !PyBool_Check(a)) {
        PyObject *text = PyObject_Str(a), *b = text ? PyUnicode_AsUTF8String(text) : NULL;
        Py_XDECREF(text);
        return b;
    }
    if (PyUnicode_Check(a)) return PyUnicode_AsEncodedString(a, "utf-8", "surrogateescape");
    if (PyBytes_Check(a)) {
        Py_INCREF(a);
        return a;
    }
    return PyErr_Format(PyExc_TypeError, "args[%zd] must be str, bytes or int, not %.100s", i, Py_TYPE(a)->tp_name);
}

/* the slot a command goes to: key's, node's (a slot from _masters()), or -1 */
static int command_slot(rl_state *st, PyObject *key, PyObject *node, int *slot)
{
    *slot = -1;
    if (key != Py_None) {
        if (!PyUnicode_Check(key) && !PyBytes_Check(key)) {
            PyErr_Format(PyExc_TypeError, "key must be str or bytes, not %.100s", Py_TYPE(key)->tp_name);
            return -1;
        }
        PyObject *k = PyUnicode_Check(key) ? PyUnicode_AsEncodedString(key, "utf-8", "surrogateescape") : NULL;
        if (PyUnicode_Check(key) && !k) return -1;
        *slot = rl_key_slot(PyBytes_AS_STRING(k ? k : key), (size_t)PyBytes_GET_SIZE(k ? k : key));
        Py_XDECREF(k);
    } else if (node != Py_None) {
        long n = PyLong_AsLong(node);
        if (n == -1 && PyErr_Occurred()) return -1;
        if (n < -1 || n > 16383) {
            raise_fmt(st, RL_ERR_INVALID, "node must be a slot from _masters() (got %ld)", n);
            return -1;
        }
        *slot = (int)n;
    }
    return 0;
}

static PyObject *client_command(ClientObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"args", "key", "node", NULL};
    PyObject *items, *key = Py_None, *node = Py_None, *seq, *keeps = NULL, *out = NULL;
    rl_state *st = STATE(self);
    rl_reply *reply = NULL;
    const char *argv[RL_COMMAND_MAX_ARGS];
    size_t lens[RL_COMMAND_MAX_ARGS];
    char err[ERRBUF];
    int rc, slot;

    if (!st || !PyArg_ParseTupleAndKeywords(args, kw, "O|OO:_command", kwlist, &items, &key, &node)) return NULL;
    if (!(seq = PySequence_Fast(items, "args must be a list of str, bytes or int"))) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n < 1 || n > RL_COMMAND_MAX_ARGS) {
        Py_DECREF(seq);
        return raise_fmt(st, RL_ERR_INVALID, "a command has 1..%d arguments (got %zd)", RL_COMMAND_MAX_ARGS, n);
    }
    if (!(keeps = PyList_New(0)) || command_slot(st, key, node, &slot) < 0) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *b = command_arg(PySequence_Fast_GET_ITEM(seq, i), i);
        if (!b || PyList_Append(keeps, b) < 0) {
            Py_XDECREF(b);
            goto done;
        }
        Py_DECREF(b);
        argv[i] = PyBytes_AS_STRING(b);
        lens[i] = (size_t)PyBytes_GET_SIZE(b);
    }
    rl_client *rl = client_handle(st, self);
    if (!rl) goto done;
    CALL_WITHOUT_GIL(rc, err, rl_command_run(rl, slot, (int)n, argv, lens, &reply));
    if (rc) {
        raise_code(st, rc, err);
        goto done;
    }
    out = reply_to_python(st, reply);
    rl_reply_free(reply);
done:
    Py_XDECREF(keeps);
    Py_DECREF(seq);
    return out;
}

PyDoc_STRVAR(client_key_doc,
"_key(name, id, algorithm, rate=0, per_client=False)\n--\n\n"
"Low level, for tools: the key of rate (0: the first) of id's state under a\n"
"limiter named name with that algorithm and scope, as the core names it.");

static PyObject *client_key(ClientObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"name", "id", "algorithm", "rate", "per_client", NULL};
    rl_state *st = STATE(self);
    const char *name, *id, *alg_name;
    int rate = 0, per_client = 0;
    rl_algorithm alg;
    char buf[1024];
    if (!st || !PyArg_ParseTupleAndKeywords(args, kw, "sss|ip:_key", kwlist, &name, &id, &alg_name, &rate, &per_client))
        return NULL;
    if (rl_algorithm_parse(alg_name, &alg)) return raise_code(st, RL_ERR_INVALID, rl_errmsg());
    rl_client *rl = client_handle(st, self);
    if (!rl) return NULL;
    int n = rl_key_build(rl, name, id, alg, per_client ? RL_SCOPE_PER_CLIENT : RL_SCOPE_OVERALL, rate, buf, sizeof buf);
    if (n < 0) return raise_code(st, n, rl_errmsg());
    if (n >= (int)sizeof buf) return raise_fmt(st, RL_ERR_INVALID, "key too long for _key (%d bytes)", n);
    return PyUnicode_FromFormat("%s", buf);
}

PyDoc_STRVAR(client_masters_doc,
"_masters() -> list[int]\n--\n\n"
"Low level, for tools: one slot served by each master of a cluster (pass it\n"
"as _command(..., node=slot) to run a command on every master, e.g. SCAN);\n"
"[-1] outside a cluster.");

static PyObject *client_masters(ClientObject *self, PyObject *unused)
{
    rl_state *st = STATE(self);
    int slots[1024], n;
    char err[ERRBUF];
    rl_client *rl = client_handle(st, self);
    if (!rl) return NULL;
    CALL_WITHOUT_GIL(n, err, rl_client_masters(rl, slots, 1024));
    if (n < 0) return raise_code(st, n, err);
    if (n > 1024) n = 1024;
    PyObject *out = PyList_New(n);
    for (int i = 0; out && i < n; i++) {
        PyObject *v = PyLong_FromLong(slots[i]);
        if (!v) Py_CLEAR(out);
        else PyList_SET_ITEM(out, i, v);
    }
    return out;
}

PyDoc_STRVAR(client_semaphore_acquire_doc,
"_semaphore_acquire(name, permits, lease, timeout=None, cancel=None)\n--\n\n"
"Low level: (permit_id, fencing_token, lease) or None if not acquired within\n"
"timeout seconds. Use Client.semaphore() instead.");

PyDoc_STRVAR(client_lock_acquire_doc,
"_lock_acquire(name, lease, timeout=None, cancel=None)\n--\n\n"
"Low level: (token, fencing_token, lease) or None. Use Client.lock() instead.");

static PyMethodDef client_methods[] = {
    {"close", (PyCFunction)client_close, METH_NOARGS, client_close_doc},
    {"stats", (PyCFunction)client_stats, METH_NOARGS, client_stats_doc},
    {"_give_back", (PyCFunction)client_give_back_all, METH_NOARGS, client_give_back_doc},
    {"_config_set", (PyCFunction)client_config_set, METH_VARARGS, client_config_set_doc},
    {"_config_get", (PyCFunction)client_config_get, METH_O, client_config_get_doc},
    {"_config_delete", (PyCFunction)client_config_delete, METH_O, client_config_delete_doc},
    {"_command", (PyCFunction)(void (*)(void))client_command, METH_VARARGS | METH_KEYWORDS, client_command_doc},
    {"_masters", (PyCFunction)client_masters, METH_NOARGS, client_masters_doc},
    {"_key", (PyCFunction)(void (*)(void))client_key, METH_VARARGS | METH_KEYWORDS, client_key_doc},
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
    {"client_id", (getter)client_get_client_id, NULL,
     "This client's identity for per_client limiters: the client_id option, else 32 random hex\n"
     "digits drawn when it opened (None once closed).", NULL},
    {NULL}};

static PyMemberDef client_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(ClientObject, weakrefs), READONLY, NULL},
    {NULL}};

PyDoc_STRVAR(client_doc,
"Client(url, *, prefix=None, timeout=None, connect_timeout=None, pool_size=None, on_redis_error=None,\n"
"       ssl_ca_certs=None, ssl_certfile=None, ssl_keyfile=None, ssl_cert_reqs=None, reconnect_max=None,\n"
"       config_refresh=None, client_id=None)\n--\n\n"
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

PyType_Spec client_spec = {
    .name = "ratelimit._ratelimit.Client",
    .basicsize = sizeof(ClientObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = client_slots,
};

