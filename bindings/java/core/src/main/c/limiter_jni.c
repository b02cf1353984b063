/*
 * JNI glue for rate-limit decisions and the specs stored in Redis: a limiter's
 * spec crosses the boundary as one long[] (LimiterConfig.toNative()):
 *
 *   {algorithm, initial_tokens, scope, limit_1, period_ms_1, burst_1, limit_2, ...}
 *
 * with the core's values (initial_tokens 0 = full, RL_EMPTY = none), or null
 * for "the spec stored in Redis for this name" (rl_request.stored_spec). A
 * limiter's lease (LimiterConfig.lease) is not part of the spec, as in the
 * core: it travels with each request as rl_request.lease_ms (0 = none). The
 * core validates; this file only copies. Conventions as in ratelimit_jni.c.
 */
#include <jni.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ratelimit.h"
#include "ratelimit_jni.h"

#define SPEC_HEAD 3 /* algorithm, initial_tokens, scope */

/* ---- specs ------------------------------------------------------------------ */

/* Copies a spec array into *spec; *stored = 1 for null (the stored spec). A
 * count of rates the core does not accept is passed on as more_count for its
 * message, never written past more[]. Returns 0, or -1 with an exception
 * pending. */
static int spec_in(JNIEnv *env, jlongArray array, rl_spec *spec, int *stored)
{
    jlong v[SPEC_HEAD + 3 * RL_MAX_RATES];
    memset(spec, 0, sizeof *spec);
    *stored = array == NULL;
    if (!array) return 0;
    jsize n = (*env)->GetArrayLength(env, array);
    jsize rates = n >= SPEC_HEAD ? (n - SPEC_HEAD) / 3 : 0;
    if (rates < 1 || (n - SPEC_HEAD) % 3 != 0) { /* LimiterConfig builds these: a bug if reached */
        jclass c = (*env)->FindClass(env, "java/lang/IllegalStateException");
        if (c) (*env)->ThrowNew(env, c, "ratelimit: malformed spec array");
        return -1;
    }
    jsize copied = n < (jsize)(sizeof v / sizeof v[0]) ? n : (jsize)(sizeof v / sizeof v[0]);
    (*env)->GetLongArrayRegion(env, array, 0, copied, v);
    spec->algorithm = (rl_algorithm)v[0];
    spec->initial_tokens = v[1];
    spec->scope = (rl_scope)v[2];
    spec->limit = v[3];
    spec->period_ms = v[4];
    spec->burst = v[5];
    spec->more_count = (size_t)rates - 1;
    for (jsize i = 1; i < rates && i < RL_MAX_RATES; i++)
        spec->more[i - 1] = (rl_rate){v[SPEC_HEAD + 3 * i], v[SPEC_HEAD + 3 * i + 1], v[SPEC_HEAD + 3 * i + 2]};
    return 0;
}

static jlongArray spec_out(JNIEnv *env, const rl_spec *spec)
{
    size_t rates = spec->more_count + 1 < RL_MAX_RATES ? spec->more_count + 1 : RL_MAX_RATES;
    jlong v[SPEC_HEAD + 3 * RL_MAX_RATES] = {spec->algorithm, spec->initial_tokens, spec->scope,
                                             spec->limit, spec->period_ms, spec->burst};
    for (size_t i = 1; i < rates; i++) {
        v[SPEC_HEAD + 3 * i] = spec->more[i - 1].limit;
        v[SPEC_HEAD + 3 * i + 1] = spec->more[i - 1].period_ms;
        v[SPEC_HEAD + 3 * i + 2] = spec->more[i - 1].burst;
    }
    jsize n = (jsize)(SPEC_HEAD + 3 * rates);
    jlongArray out = (*env)->NewLongArray(env, n);
    if (out) (*env)->SetLongArrayRegion(env, out, 0, n, v);
    return out;
}

/* Fills a request; name and id are malloc'd (free with free_request). */
static int make_request(JNIEnv *env, rl_request *req, jbyteArray name, jbyteArray id, jlongArray spec, jlong permits,
                        jint op, jlong max_wait_ms, jlong now_ms, jlong lease_ms)
{
    char *cname, *cid;
    memset(req, 0, sizeof *req);
    if (spec_in(env, spec, &req->spec, &req->stored_spec)) return -1;
    if (copy_bytes(env, name, &cname, NULL)) return -1;
    if (copy_bytes(env, id, &cid, NULL)) {
        free(cname);
        return -1;
    }
    req->name = cname;
    req->id = cid;
    req->permits = permits;
    req->op = (rl_op)op;
    req->max_wait_ms = max_wait_ms;
    req->now_ms = now_ms;
    req->lease_ms = lease_ms;
    return 0;
}

static void free_request(rl_request *req)
{
    free((char *)req->name);
    free((char *)req->id);
    req->name = req->id = NULL;
}

/* ---- natives: specs ------------------------------------------------------------ */

static void n_validate_spec(JNIEnv *env, jclass cls, jlongArray array)
{
    (void)cls;
    rl_spec spec;
    int stored, rc;
    if (spec_in(env, array, &spec, &stored)) return;
    if ((rc = rl_spec_validate(&spec))) throw_status(env, rc);
}

/* "10/second;1000/hour" -> {limit_1, period_ms_1, limit_2, ...} */
static jlongArray n_parse_rates(JNIEnv *env, jclass cls, jbyteArray text)
{
    (void)cls;
    char *s;
    rl_spec spec;
    memset(&spec, 0, sizeof spec);
    if (copy_bytes(env, text, &s, NULL)) return NULL;
    int rc = rl_rates_parse(s, &spec);
    free(s);
    if (rc) {
        throw_status(env, rc);
        return NULL;
    }
    jlong v[2 * RL_MAX_RATES] = {spec.limit, spec.period_ms};
    for (size_t i = 0; i < spec.more_count; i++) {
        v[2 * i + 2] = spec.more[i].limit;
        v[2 * i + 3] = spec.more[i].period_ms;
    }
    jsize n = (jsize)(2 * (spec.more_count + 1));
    jlongArray out = (*env)->NewLongArray(env, n);
    if (out) (*env)->SetLongArrayRegion(env, out, 0, n, v);
    return out;
}

static jstring n_spec_format(JNIEnv *env, jclass cls, jlongArray array)
{
    (void)cls;
    rl_spec spec;
    int stored;
    char buf[1024];
    if (spec_in(env, array, &spec, &stored)) return NULL;
    int n = rl_spec_format(&spec, buf, sizeof buf);
    if (n < 0) {
        throw_status(env, n);
        return NULL;
    }
    return (*env)->NewStringUTF(env, buf); /* ASCII only */
}

/* ---- natives: stored specs --------------------------------------------------------- */

static jboolean n_config_set(JNIEnv *env, jclass cls, jlong handle, jbyteArray name, jlongArray array,
                             jboolean if_absent)
{
    (void)cls;
    rl_spec spec;
    char *cname;
    int stored, set = 1, rc;
    if (spec_in(env, array, &spec, &stored) || copy_bytes(env, name, &cname, NULL)) return JNI_FALSE;
    rc = if_absent ? rl_config_set_if_absent(client_of(handle), cname, &spec, &set)
                   : rl_config_set(client_of(handle), cname, &spec);
    free(cname);
    if (rc) {
        throw_status(env, rc);
        return JNI_FALSE;
    }
    return set ? JNI_TRUE : JNI_FALSE;
}

/* the stored spec as an array, or null when none is stored */
static jlongArray n_config_get(JNIEnv *env, jclass cls, jlong handle, jbyteArray name)
{
    (void)cls;
    rl_spec spec;
    char *cname;
    int found = 0;
    if (copy_bytes(env, name, &cname, NULL)) return NULL;
    int rc = rl_config_get(client_of(handle), cname, &spec, &found);
    free(cname);
    if (rc) {
        throw_status(env, rc);
        return NULL;
    }
    return found ? spec_out(env, &spec) : NULL;
}

static jboolean n_config_delete(JNIEnv *env, jclass cls, jlong handle, jbyteArray name)
{
    (void)cls;
    char *cname;
    int deleted = 0;
    if (copy_bytes(env, name, &cname, NULL)) return JNI_FALSE;
    int rc = rl_config_delete(client_of(handle), cname, &deleted);
    free(cname);
    if (rc) {
        throw_status(env, rc);
        return JNI_FALSE;
    }
    return deleted ? JNI_TRUE : JNI_FALSE;
}

/* rl_config_cached: the stored spec when the cached copy is fresh, else null (never a round trip) */
static jlongArray n_config_cached(JNIEnv *env, jclass cls, jlong handle, jbyteArray name)
{
    (void)cls;
    rl_spec spec;
    char buf[128], *cname;
    int fresh = 0;
    if (copy_bytes_small(env, name, buf, sizeof buf, &cname)) return NULL;
    int rc = rl_config_cached(client_of(handle), cname, &spec, &fresh);
    free_bytes(cname, buf);
    if (rc) {
        throw_status(env, rc);
        return NULL;
    }
    return fresh ? spec_out(env, &spec) : NULL;
}

static void n_config_check(JNIEnv *env, jclass cls, jlong handle, jbyteArray name, jlongArray array)
{
    (void)cls;
    rl_spec spec;
    char *cname;
    int stored;
    if (spec_in(env, array, &spec, &stored) || copy_bytes(env, name, &cname, NULL)) return;
    /* null: a limiter that will use the stored spec (one must be stored) */
    int rc = rl_config_check(client_of(handle), cname, stored ? NULL : &spec);
    free(cname);
    if (rc) throw_status(env, rc);
}

static jstring n_client_id(JNIEnv *env, jclass cls, jlong handle)
{
    (void)cls;
    return (*env)->NewStringUTF(env, rl_client_id(client_of(handle))); /* [A-Za-z0-9._-] */
}

/* ---- natives: decisions -------------------------------------------------------------- */

/* now_ms: 0 = Redis TIME; > 0 = the explicit clock of Limiter.at() (tests,
 * conformance vectors); the core range-checks it */
static jobject n_decide(JNIEnv *env, jclass cls, jlong handle, jbyteArray name, jbyteArray id, jlongArray spec,
                        jlong permits, jint op, jlong max_wait_ms, jlong now_ms, jlong lease_ms)
{
    (void)cls;
    rl_request req;
    rl_result result;
    if (make_request(env, &req, name, id, spec, permits, op, max_wait_ms, now_ms, lease_ms)) return NULL;
    int rc = rl_execute(client_of(handle), &req, 1, &result);
    free_request(&req);
    if (rc) {
        throw_status(env, rc);
        return NULL;
    }
    return new_result(env, &result);
}

static jobject n_acquire_wait(JNIEnv *env, jclass cls, jlong handle, jobject cancel, jbyteArray name, jbyteArray id,
                              jlongArray spec, jlong permits, jlong timeout_ms, jlong lease_ms)
{
    (void)cls;
    rl_request req;
    rl_result result;
    rl_wait wait;
    cancel_ctx ctx;
    if (make_request(env, &req, name, id, spec, permits, RL_OP_ACQUIRE, 0, 0, lease_ms)) return NULL;
    init_wait(&wait, &ctx, env, cancel, timeout_ms);
    int rc = rl_acquire_wait(client_of(handle), &req, &wait, &result);
    free_request(&req);
    if (rc) {
        throw_status(env, rc);
        return NULL;
    }
    return new_result(env, &result);
}

/* deletes the state of every rate (spec null: the stored spec's) */
static void n_reset(JNIEnv *env, jclass cls, jlong handle, jbyteArray name, jbyteArray id, jlongArray spec)
{
    (void)cls;
    rl_request req;
    if (make_request(env, &req, name, id, spec, 0, 0, 0, 0, 0)) return;
    int rc = rl_reset(client_of(handle), req.name, req.id, req.stored_spec ? NULL : &req.spec);
    free_request(&req);
    if (rc) throw_status(env, rc);
}

/* rl_submit_reset: completes through AsyncCalls.completeOp (value: the keys deleted) */
static void n_reset_async(JNIEnv *env, jclass cls, jlong handle, jlong ctx, jlong tag, jbyteArray name, jbyteArray id,
                          jlongArray spec)
{
    (void)cls;
    rl_request req;
    if (make_request(env, &req, name, id, spec, 0, 0, 0, 0, 0)) return;
    rl_target target = {on_op_complete, (void *)(intptr_t)ctx, NULL};
    int rc = rl_submit_reset(client_of(handle), req.name, req.id, req.stored_spec ? NULL : &req.spec, (uint64_t)tag,
                             &target);
    free_request(&req);
    if (rc) throw_status(env, rc);
}

/* Reads element i of a primitive array argument into *out (bounds already checked). */
#define GET_AT(kind, type, array, i, out)                                    \
    do {                                                                     \
        type v_;                                                             \
        (*env)->Get##kind##ArrayRegion(env, array, (jsize)(i), 1, &v_);      \
        *(out) = v_;                                                         \
    } while (0)

/* Every request's outcome: its Result, or its exception (not thrown). An
 * invalid batch (nothing sent) throws. */
static jobjectArray n_execute(JNIEnv *env, jclass cls, jlong handle, jobjectArray names, jobjectArray ids,
                              jobjectArray specs, jlongArray permits, jintArray ops, jlongArray max_waits,
                              jlongArray leases)
{
    (void)cls;
    jsize n = (*env)->GetArrayLength(env, names);
    rl_request *reqs = calloc((size_t)n + 1, sizeof *reqs);
    rl_result *results = calloc((size_t)n + 1, sizeof *results);
    rl_outcome *outcomes = calloc((size_t)n + 1, sizeof *outcomes);
    jobjectArray out = NULL;
    jsize built = 0;
    int rc;

    if (!reqs || !results || !outcomes) {
        throw_oom(env);
        goto done;
    }
    for (; built < n; built++) {
        jint op;
        jlong count, max_wait, lease;
        jbyteArray name = (*env)->GetObjectArrayElement(env, names, built);
        jbyteArray id = (*env)->GetObjectArrayElement(env, ids, built);
        jlongArray spec = (*env)->GetObjectArrayElement(env, specs, built);
        GET_AT(Long, jlong, permits, built, &count);
        GET_AT(Int, jint, ops, built, &op);
        GET_AT(Long, jlong, max_waits, built, &max_wait);
        GET_AT(Long, jlong, leases, built, &lease);
        rc = (*env)->ExceptionCheck(env)
                 ? -1
                 : make_request(env, &reqs[built], name, id, spec, count, op, max_wait, 0, lease);
        if (name) (*env)->DeleteLocalRef(env, name);
        if (id) (*env)->DeleteLocalRef(env, id);
        if (spec) (*env)->DeleteLocalRef(env, spec);
        if (rc) goto done;
    }
    rc = rl_execute_each(client_of(handle), reqs, (size_t)n, results, outcomes);
    if (rc == RL_ERR_INVALID) {
        throw_status(env, rc);
        goto done;
    }
    jclass object = (*env)->FindClass(env, "java/lang/Object");
    if (!object || !(out = (*env)->NewObjectArray(env, n, object, NULL))) goto done;
    for (jsize i = 0; i < n; i++) {
        jobject r = outcomes[i].status ? new_exception(env, outcomes[i].status, outcomes[i].error)
                                       : new_result(env, &results[i]);
        if (!r) {
            out = NULL;
            goto done;
        }
        (*env)->SetObjectArrayElement(env, out, i, r);
        (*env)->DeleteLocalRef(env, r);
    }
done:
    for (jsize i = 0; reqs && i < built; i++) free_request(&reqs[i]);
    free(reqs);
    free(results);
    free(outcomes);
    return out;
}

/* Queues one decision (timeout_ms other than 0: a timed acquire); the
 * completion calls AsyncCalls.complete(tag, ...) on the I/O thread. A
 * failure to queue (bad request, closing, a stored spec that cannot be read)
 * throws here, on the caller's thread, with the core's message, as the
 * blocking calls do. */
static void n_submit(JNIEnv *env, jclass cls, jlong handle, jlong ctx, jlong tag, jbyteArray name, jbyteArray id,
                     jlongArray spec, jlong permits, jint op, jlong max_wait_ms, jlong now_ms, jlong lease_ms,
                     jlong timeout_ms)
{
    (void)cls;
    char name_buf[128], id_buf[128];
    rl_request req;
    memset(&req, 0, sizeof req);
    char *cname, *cid;
    if (spec_in(env, spec, &req.spec, &req.stored_spec)) return;
    if (copy_bytes_small(env, name, name_buf, sizeof name_buf, &cname)) return;
    if (copy_bytes_small(env, id, id_buf, sizeof id_buf, &cid)) {
        free_bytes(cname, name_buf);
        return;
    }
    req.name = cname;
    req.id = cid;
    req.permits = permits;
    req.op = (rl_op)op;
    req.max_wait_ms = max_wait_ms;
    req.now_ms = now_ms;
    req.lease_ms = lease_ms;
    rl_target target = {on_complete, (void *)(intptr_t)ctx, NULL};
    /* both copy the strings */
    int rc = timeout_ms ? rl_submit_acquire_wait(client_of(handle), &req, timeout_ms, (uint64_t)tag, &target)
                        : rl_submit(client_of(handle), &req, (uint64_t)tag, &target);
    free_bytes(cname, name_buf);
    free_bytes(cid, id_buf);
    if (rc) throw_status(env, rc);
}

/* rl_leases_give_back: name null gives back every lease of the client */
static void n_leases_give_back(JNIEnv *env, jclass cls, jlong handle, jbyteArray name)
{
    (void)cls;
    char *cname;
    if (copy_bytes(env, name, &cname, NULL)) return;
    int rc = rl_leases_give_back(client_of(handle), cname);
    free(cname);
    if (rc) throw_status(env, rc);
}

/* ---- registration ---------------------------------------------------------------------- */

#define SPEC "[J"

static const JNINativeMethod methods[] = {
    {"validateSpec", "(" SPEC ")V", (void *)n_validate_spec},
    {"parseRates", "(" B ")[J", (void *)n_parse_rates},
    {"specFormat", "(" SPEC ")Ljava/lang/String;", (void *)n_spec_format},
    {"configSet", "(J" B SPEC "Z)Z", (void *)n_config_set},
    {"configGet", "(J" B ")" SPEC, (void *)n_config_get},
    {"configDelete", "(J" B ")Z", (void *)n_config_delete},
    {"configCheck", "(J" B SPEC ")V", (void *)n_config_check},
    {"configCached", "(J" B ")" SPEC, (void *)n_config_cached},
    {"clientId", "(J)Ljava/lang/String;", (void *)n_client_id},
    {"decide", "(J" B B SPEC "JIJJJ)" RESULT, (void *)n_decide},
    {"acquireWait", "(J" HANDLE B B SPEC "JJJ)" RESULT, (void *)n_acquire_wait},
    {"reset", "(J" B B SPEC ")V", (void *)n_reset},
    {"resetAsync", "(JJJ" B B SPEC ")V", (void *)n_reset_async},
    {"execute", "(J[[B[[B[[J[J[I[J[J)[Ljava/lang/Object;", (void *)n_execute},
    {"submit", "(JJJ" B B SPEC "JIJJJJ)V", (void *)n_submit},
    {"leasesGiveBack", "(J" B ")V", (void *)n_leases_give_back},
};

jint register_limiter_natives(JNIEnv *env, jclass native)
{
    return (*env)->RegisterNatives(env, native, methods, (jint)(sizeof methods / sizeof methods[0]));
}
