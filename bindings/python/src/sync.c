/* Client methods for the semaphore, the lock and the delay queue (the
 * Python layer, ratelimit/__init__.py, wraps them in classes). */
#include "module.h"

/* ---- semaphore and lock ------------------------------------------------------- */

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
    rl_client *rl = client_handle(st, self);
    if (!rl) {
        Py_DECREF(keep);
        return NULL;
    }
    cancel_ctx cc = {NULL, cancel == Py_None ? NULL : cancel};
    rl_wait wait = {timeout_ms, cancel_cb, &cc};
    CALL_CANCELLABLE(cc, rc, err,
                     lock ? rl_lock_acquire(rl, name_s, lease_ms, &wait, &permit)
                          : rl_semaphore_acquire(rl, name_s, max, lease_ms, &wait, &permit));
    Py_DECREF(keep);
    if (PyErr_Occurred()) return NULL; /* KeyboardInterrupt or cancel() raised */
    if (rc) return raise_code(st, rc, err);
    return permit_tuple(&permit);
}

PyObject *client_semaphore_acquire(ClientObject *self, PyObject *args, PyObject *kw)
{
    return sync_acquire(self, args, kw, 0);
}

PyObject *client_lock_acquire(ClientObject *self, PyObject *args, PyObject *kw)
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
    rl_client *rl = client_handle(st, self);
    if (rl) {
        CALL_WITHOUT_GIL(rc, err, lock ? with_lease ? rl_lock_extend(rl, name_s, id_s, lease_ms, &done)
                                                    : rl_lock_release(rl, name_s, id_s, &done)
                                       : with_lease ? rl_semaphore_refresh(rl, name_s, id_s, lease_ms, &done)
                                                    : rl_semaphore_release(rl, name_s, id_s, &done));
    }
    Py_DECREF(keep_name);
    Py_DECREF(keep_id);
    if (!rl) return NULL;
    if (rc) return raise_code(st, rc, err);
    return PyBool_FromLong(done);
}

PyObject *client_semaphore_release(ClientObject *self, PyObject *args)
{
    return sync_simple(self, args, 0, 0);
}
PyObject *client_semaphore_refresh(ClientObject *self, PyObject *args)
{
    return sync_simple(self, args, 0, 1);
}
PyObject *client_lock_release(ClientObject *self, PyObject *args)
{
    return sync_simple(self, args, 1, 0);
}
PyObject *client_lock_extend(ClientObject *self, PyObject *args)
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
    rl_client *rl = client_handle(st, self);
    if (rl) {
        CALL_WITHOUT_GIL(rc, err,
                         with_max ? rl_semaphore_available(rl, name_s, max, &value) : rl_semaphore_holders(rl, name_s, &value));
    }
    Py_DECREF(keep);
    if (!rl) return NULL;
    if (rc) return raise_code(st, rc, err);
    return PyLong_FromLongLong(value);
}

PyObject *client_semaphore_available(ClientObject *self, PyObject *args)
{
    return sem_info(self, args, 1);
}
PyObject *client_semaphore_holders(ClientObject *self, PyObject *args)
{
    return sem_info(self, args, 0);
}

/* ---- delay queue ------------------------------------------------------------ */

PyObject *client_queue_push(ClientObject *self, PyObject *args)
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
    rl_client *rl = client_handle(st, self);
    if (rl) {
        CALL_WITHOUT_GIL(rc, err, rl_queue_push(rl, q, m, (size_t)mlen, delay_ms, &added));
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
    rl_client *rl = client_handle(st, self);
    if (!rl) {
        Py_DECREF(keep);
        return NULL;
    }
    memset(&msgs, 0, sizeof msgs);
    cancel_ctx cc = {NULL, cancel == Py_None ? NULL : cancel};
    rl_wait w = {timeout_ms, cancel_cb, &cc};
    CALL_CANCELLABLE(cc, rc, err,
                     wait ? rl_queue_pop_wait(rl, q, (size_t)max_n, &w, &msgs)
                          : rl_queue_pop_ready(rl, q, (size_t)max_n, &msgs));
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

PyObject *client_queue_pop_ready(ClientObject *self, PyObject *args, PyObject *kw)
{
    return queue_pop(self, args, kw, 0);
}
PyObject *client_queue_pop_wait(ClientObject *self, PyObject *args, PyObject *kw)
{
    return queue_pop(self, args, kw, 1);
}

PyObject *client_queue_size(ClientObject *self, PyObject *args)
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
    rl_client *rl = client_handle(st, self);
    if (rl) {
        CALL_WITHOUT_GIL(rc, err, rl_queue_size(rl, q, &size));
    }
    Py_DECREF(keep);
    if (!rl) return NULL;
    if (rc) return raise_code(st, rc, err);
    return PyLong_FromLongLong(size);
}

PyObject *client_queue_remove(ClientObject *self, PyObject *args)
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
    rl_client *rl = client_handle(st, self);
    if (rl) {
        CALL_WITHOUT_GIL(rc, err, rl_queue_remove(rl, q, m, (size_t)mlen, &removed));
    }
    Py_DECREF(keep_q);
    Py_DECREF(keep_m);
    if (!rl) return NULL;
    if (rc) return raise_code(st, rc, err);
    return PyBool_FromLong(removed);
}

