/*
 * JNI glue between io.ratelimit.Native and the C core. Thin on purpose: it
 * copies arguments in, calls one rl_* function, and wraps the answer. All
 * validation, keys and defaults live in the core. This file: the library,
 * the client, errors and the I/O thread's callback for decisions;
 * limiter_jni.c: decisions and stored specs; primitives_jni.c: semaphore,
 * lock and delay queue, blocking and asynchronous; stats_jni.c: metrics.
 *
 * Conventions:
 *   - strings arrive as UTF-8 byte[] (never modified UTF-8), so keys match
 *     what other bindings build; Java has already rejected embedded NULs in
 *     names;
 *   - on failure throw_status() raises the Java exception and the caller
 *     returns at once;
 *   - no JNI critical regions: arrays are copied before any Redis I/O;
 *   - natives are bound with RegisterNatives, so only JNI_OnLoad/OnUnload
 *     are exported and a stale library fails loudly at load time.
 */
#include <jni.h>
#include <ctype.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ratelimit.h"
#include "ratelimit_jni.h"

#define RLJ_JNI_VERSION JNI_VERSION_1_8

static jclass g_native;      /* io.ratelimit.Native */
jclass g_result;             /* io.ratelimit.Result */
static jmethodID g_exception;    /* static RuntimeException Native.exception(int, byte[]) */
static jmethodID g_result_init;  /* Result(boolean, long, long, long, long, long, boolean, long, int, boolean) */
static jmethodID g_cancel;       /* boolean ClientHandle.cancelRequested() */
static jmethodID g_complete;     /* void AsyncCalls.complete(long, int, boolean, long, long, long, long, long,
                                    boolean, long, int, boolean, byte[]) */
static JavaVM *g_vm;
static pthread_key_t g_detach_key; /* set on an I/O thread we attached: detach it when it ends */
static int g_detach_key_ok;
static atomic_int g_io_threads;    /* numbers the I/O threads' names */

/* ---- errors --------------------------------------------------------------- */

/* ms as java.time.Duration.toString() writes it: PT0.001S, PT1M30S, PT24H */
static void fmt_duration(char *out, size_t size, int64_t ms)
{
    if (ms < 0 || ms % 1000) { /* Duration's own form for these is harder to read: plain seconds */
        snprintf(out, size, "PT%s%lld.%03lldS", ms < 0 ? "-" : "", (long long)(ms < 0 ? -ms : ms) / 1000,
                 (long long)(ms < 0 ? -ms : ms) % 1000);
        return;
    }
    long long s = (long long)(ms / 1000), h = s / 3600, m = s / 60 % 60;
    int n = snprintf(out, size, "PT");
    if (h) n += snprintf(out + n, size - (size_t)n, "%lldH", h);
    if (m) n += snprintf(out + n, size - (size_t)n, "%lldM", m);
    if (s % 60 || (!h && !m)) snprintf(out + n, size - (size_t)n, "%lldS", s % 60);
}

/* The core's last error, when a number was out of range, in a Java
 * caller's terms: camelCase names without "_ms", durations as Duration
 * prints them. 0 when it was not. */
static int java_range_message(char *buf, size_t size)
{
    rl_range_error d;
    char name[64], text[3][48]; /* min, max, value */
    size_t j = 0;
    if (!rl_errrange(&d)) return 0;
    size_t len = strlen(d.param);
    int ms = len > 3 && !strcmp(d.param + len - 3, "_ms");
    if (ms) len -= 3;
    for (size_t i = 0; i < len && j + 1 < sizeof name; i++)
        name[j++] = d.param[i] == '_' && i + 1 < len ? (char)toupper((unsigned char)d.param[++i]) : d.param[i];
    name[j] = '\0';
    int64_t values[3] = {d.min, d.max, d.value};
    for (int i = 0; i < 3; i++)
        if (ms) fmt_duration(text[i], sizeof text[i], values[i]);
        else snprintf(text[i], sizeof text[i], "%lld", (long long)values[i]);
    if (d.value > d.max)
        snprintf(buf, size, "%s is too large%s%s (max %s, got %s)", name, *d.context ? " " : "", d.context, text[1],
                 text[2]);
    else
        snprintf(buf, size, "%s must be in %s..%s (got %s)", name, text[0], text[1], text[2]);
    return 1;
}

/* The Java exception for status (Native.exception) carrying msg, else the
 * status's text; NULL with an exception pending. */
jobject new_exception(JNIEnv *env, int status, const char *msg)
{
    if (!msg || !*msg) msg = rl_strerror(status);
    jsize len = (jsize)strlen(msg);
    jbyteArray bytes = (*env)->NewByteArray(env, len);
    if (!bytes) return NULL; /* OutOfMemoryError pending */
    (*env)->SetByteArrayRegion(env, bytes, 0, len, (const jbyte *)msg);
    jobject ex = (*env)->CallStaticObjectMethod(env, g_native, g_exception, (jint)status, bytes);
    (*env)->DeleteLocalRef(env, bytes);
    if (ex && (*env)->ExceptionCheck(env)) {
        (*env)->DeleteLocalRef(env, ex);
        return NULL;
    }
    return ex;
}

/* Raises the Java exception for a core status, with the core's message for
 * this thread (read here, on the calling thread, before anything else can
 * overwrite it). An exception already pending (from a callback or an
 * allocation) wins. */
void throw_status(JNIEnv *env, int status)
{
    char said[600];
    if ((*env)->ExceptionCheck(env)) return;
    const char *msg = rl_errmsg();
    if (status == RL_ERR_INVALID && java_range_message(said, sizeof said)) msg = said;
    jobject ex = new_exception(env, status, msg);
    if (ex) {
        (*env)->Throw(env, (jthrowable)ex);
        (*env)->DeleteLocalRef(env, ex);
    }
}

void throw_oom(JNIEnv *env)
{
    jclass c = (*env)->FindClass(env, "java/lang/OutOfMemoryError");
    if (c) (*env)->ThrowNew(env, c, "ratelimit: native allocation failed");
}

/* ---- arguments ------------------------------------------------------------- */

/* Copies a byte[] into a malloc'd NUL-terminated buffer. A null array gives
 * NULL (the core reports a missing argument itself). Returns 0, or -1 with an
 * exception pending. */
int copy_bytes(JNIEnv *env, jbyteArray array, char **out, size_t *len)
{
    *out = NULL;
    if (len) *len = 0;
    if (!array) return 0;
    jsize n = (*env)->GetArrayLength(env, array);
    char *buf = malloc((size_t)n + 1);
    if (!buf) {
        throw_oom(env);
        return -1;
    }
    (*env)->GetByteArrayRegion(env, array, 0, n, (jbyte *)buf);
    buf[n] = '\0';
    *out = buf;
    if (len) *len = (size_t)n;
    return 0;
}

rl_client *client_of(jlong handle)
{
    return (rl_client *)(intptr_t)handle;
}

/* Copies a byte[] into buf when it fits (no allocation on the hot path), else
 * into a malloc'd buffer; *out is NULL for a null array. Returns 0, or -1 with
 * an exception pending. Free *out with free_bytes. */
int copy_bytes_small(JNIEnv *env, jbyteArray array, char *buf, size_t size, char **out)
{
    *out = NULL;
    if (!array) return 0;
    jsize n = (*env)->GetArrayLength(env, array);
    char *dst = (size_t)n < size ? buf : malloc((size_t)n + 1);
    if (!dst) {
        throw_oom(env);
        return -1;
    }
    (*env)->GetByteArrayRegion(env, array, 0, n, (jbyte *)dst);
    dst[n] = '\0';
    *out = dst;
    return 0;
}

void free_bytes(char *p, char *buf)
{
    if (p != buf) free(p);
}

/* ---- cancellation -------------------------------------------------------- */

/* Polled by the core while it waits, on the thread that called in, so env is
 * valid. Asks the Java handle whether the thread was interrupted or the
 * client is closing. */
static int cancel_requested(void *p)
{
    cancel_ctx *ctx = p;
    JNIEnv *env = ctx->env;
    if ((*env)->ExceptionCheck(env)) return 1;
    jboolean stop = (*env)->CallBooleanMethod(env, ctx->handle, g_cancel);
    if ((*env)->ExceptionCheck(env)) return 1;
    return stop ? 1 : 0;
}

void init_wait(rl_wait *wait, cancel_ctx *ctx, JNIEnv *env, jobject handle, jlong timeout_ms)
{
    ctx->env = env;
    ctx->handle = handle;
    wait->timeout_ms = timeout_ms;
    wait->cancel = handle ? cancel_requested : NULL;
    wait->cancel_ctx = handle ? ctx : NULL;
}

/* ---- results ---------------------------------------------------------------- */

jobject new_result(JNIEnv *env, const rl_result *r)
{
    return (*env)->NewObject(env, g_result, g_result_init, (jboolean)(r->allowed != 0), (jlong)r->limit,
                             (jlong)r->remaining, (jlong)r->retry_after_ms, (jlong)r->reset_after_ms,
                             (jlong)r->wait_ms, (jboolean)(r->fallback != 0), (jlong)r->granted,
                             (jint)r->rate_index, (jboolean)(r->local != 0));
}

/* ---- natives: library --------------------------------------------------------- */

static jint n_version(JNIEnv *env, jclass cls)
{
    (void)env;
    (void)cls;
    return rl_version_number();
}

static jstring n_strerror(JNIEnv *env, jclass cls, jint status)
{
    (void)cls;
    return (*env)->NewStringUTF(env, rl_strerror(status));
}

static jlongArray n_parse_rate(JNIEnv *env, jclass cls, jbyteArray text)
{
    (void)cls;
    char *s;
    int64_t limit = 0, period = 0;
    if (copy_bytes(env, text, &s, NULL)) return NULL;
    int rc = rl_rate_parse(s, &limit, &period);
    free(s);
    if (rc) {
        throw_status(env, rc);
        return NULL;
    }
    jlongArray out = (*env)->NewLongArray(env, 2);
    if (!out) return NULL;
    jlong v[2] = {(jlong)limit, (jlong)period};
    (*env)->SetLongArrayRegion(env, out, 0, 2, v);
    return out;
}

static jstring n_algorithm_name(JNIEnv *env, jclass cls, jint algorithm)
{
    (void)cls;
    const char *name = rl_algorithm_name((rl_algorithm)algorithm);
    return name ? (*env)->NewStringUTF(env, name) : NULL;
}

static jint n_algorithm_parse(JNIEnv *env, jclass cls, jbyteArray name)
{
    (void)cls;
    char *s;
    rl_algorithm a = RL_FIXED_WINDOW;
    if (copy_bytes(env, name, &s, NULL)) return -1;
    int rc = rl_algorithm_parse(s, &a);
    free(s);
    if (rc) {
        throw_status(env, rc);
        return -1;
    }
    return (jint)a;
}

/* {name0, sha1_0, name1, sha1_1, ...} of the embedded scripts */
static jobjectArray n_scripts(JNIEnv *env, jclass cls)
{
    (void)cls;
    size_t n = rl_script_count();
    jclass string = (*env)->FindClass(env, "java/lang/String");
    if (!string) return NULL;
    jobjectArray out = (*env)->NewObjectArray(env, (jsize)(2 * n), string, NULL);
    (*env)->DeleteLocalRef(env, string);
    if (!out) return NULL;
    for (size_t i = 0; i < n; i++) {
        const char *info[2] = {NULL, NULL};
        int rc = rl_script_info(i, &info[0], &info[1]);
        if (rc) {
            throw_status(env, rc);
            return NULL;
        }
        for (int k = 0; k < 2; k++) {
            jstring s = (*env)->NewStringUTF(env, info[k]);
            if (!s) return NULL;
            (*env)->SetObjectArrayElement(env, out, (jsize)(2 * i + (size_t)k), s);
            (*env)->DeleteLocalRef(env, s);
        }
    }
    return out;
}

/* ---- natives: client ------------------------------------------------------------ */

/* Long.MIN_VALUE means "not set": the core's default stays. Values that do
 * not fit an int become -1, which the core rejects with its own message. */
static void set_int_option(jlong value, int *field)
{
    if (value == INT64_MIN) return;
    *field = value < INT_MIN || value > INT_MAX ? -1 : (int)value;
}

static jboolean n_has_tls(JNIEnv *env, jclass cls)
{
    (void)env;
    (void)cls;
    return rl_tls_supported() ? JNI_TRUE : JNI_FALSE;
}

static jstring n_tls_version(JNIEnv *env, jclass cls)
{
    (void)cls;
    const char *version = rl_tls_version();
    return version ? (*env)->NewStringUTF(env, version) : NULL;
}

/* The string options: each byte[] (null = unset) becomes a malloc'd C string
 * that only has to outlive rl_client_open, which copies what it keeps. */
enum { OPT_URL, OPT_PREFIX, OPT_CA, OPT_CERT, OPT_KEY, OPT_CLIENT_ID, OPT_COUNT };

static jlong n_open(JNIEnv *env, jclass cls, jbyteArray url, jbyteArray prefix, jlong connect_ms, jlong command_ms,
                    jint pool_size, jint on_error, jbyteArray ca_file, jbyteArray cert_file, jbyteArray key_file,
                    jint tls_verify, jlong reconnect_max_ms, jlong config_refresh_ms, jbyteArray client_id,
                    jint max_in_flight, jint max_batch)
{
    (void)cls;
    rl_options options;
    rl_client *client = NULL;
    jbyteArray arrays[OPT_COUNT] = {url, prefix, ca_file, cert_file, key_file, client_id};
    char *str[OPT_COUNT] = {NULL};
    int rc = RL_OK, i;

    rl_options_init(&options);
    set_int_option(connect_ms, &options.connect_timeout_ms);
    set_int_option(command_ms, &options.command_timeout_ms);
    set_int_option(reconnect_max_ms, &options.reconnect_max_ms);
    set_int_option(config_refresh_ms, &options.config_refresh_ms);
    if (pool_size != INT32_MIN) options.pool_size = pool_size;
    if (on_error != INT32_MIN) options.on_error = (rl_on_error)on_error;
    if (tls_verify != INT32_MIN) options.tls_verify = (rl_tls_verify)tls_verify;
    if (max_in_flight != INT32_MIN) options.max_in_flight = max_in_flight;
    if (max_batch != INT32_MIN) options.max_batch = max_batch;
    for (i = 0; i < OPT_COUNT; i++)
        if (copy_bytes(env, arrays[i], &str[i], NULL)) goto done; /* exception pending */
    if (str[OPT_PREFIX]) options.key_prefix = str[OPT_PREFIX];
    options.tls_ca_file = str[OPT_CA];
    options.tls_cert_file = str[OPT_CERT];
    options.tls_key_file = str[OPT_KEY];
    options.client_id = str[OPT_CLIENT_ID];
    rc = rl_client_open(&client, str[OPT_URL], &options);
    if (rc) throw_status(env, rc);
done:
    for (i = 0; i < OPT_COUNT; i++) free(str[i]); /* rl_client_open copied what it keeps */
    return rc ? 0 : (jlong)(intptr_t)client;
}

static void n_close(JNIEnv *env, jclass cls, jlong handle)
{
    (void)env;
    (void)cls;
    rl_client_close(client_of(handle));
}

static void n_shutdown(JNIEnv *env, jclass cls, jlong handle)
{
    (void)env;
    (void)cls;
    rl_client_shutdown(client_of(handle), 1);
}

static jstring n_prefix(JNIEnv *env, jclass cls, jlong handle)
{
    (void)cls;
    return (*env)->NewStringUTF(env, rl_client_prefix(client_of(handle)));
}

/* The core's documented limits Java checks before calling: {RL_MAX_PERIOD_MS, RL_LEASE_MAX_MS} */
static jlongArray n_limits(JNIEnv *env, jclass cls)
{
    (void)cls;
    const jlong limits[] = {RL_MAX_PERIOD_MS, RL_LEASE_MAX_MS};
    jlongArray out = (*env)->NewLongArray(env, 2);
    if (out) (*env)->SetLongArrayRegion(env, out, 0, 2, limits);
    return out;
}

static jbyteArray n_key(JNIEnv *env, jclass cls, jlong handle, jbyteArray name, jbyteArray id, jint algorithm,
                        jint scope)
{
    (void)cls;
    char *cname, *cid, small[256], *buf = small;
    jbyteArray out = NULL;
    if (copy_bytes(env, name, &cname, NULL)) return NULL;
    if (copy_bytes(env, id, &cid, NULL)) {
        free(cname);
        return NULL;
    }
    int n = rl_key_build(client_of(handle), cname, cid, (rl_algorithm)algorithm, (rl_scope)scope, 0, small, sizeof small);
    if (n >= (int)sizeof small) {
        if (!(buf = malloc((size_t)n + 1))) {
            throw_oom(env);
            goto done;
        }
        n = rl_key_build(client_of(handle), cname, cid, (rl_algorithm)algorithm, (rl_scope)scope, 0, buf, (size_t)n + 1);
    }
    if (n < 0) {
        throw_status(env, n);
        goto done;
    }
    /* keys embed user bytes: hand them back as UTF-8 for Java to decode */
    if (!(out = (*env)->NewByteArray(env, n))) goto done;
    (*env)->SetByteArrayRegion(env, out, 0, n, (const jbyte *)buf);
done:
    if (buf != small) free(buf);
    free(cname);
    free(cid);
    return out;
}

static jbyteArray n_redact_url(JNIEnv *env, jclass cls, jbyteArray url)
{
    (void)cls;
    char *curl, small[512], *buf = small;
    jbyteArray out = NULL;
    if (copy_bytes(env, url, &curl, NULL)) return NULL;
    int n = rl_url_redact(curl, small, sizeof small);
    if (n >= (int)sizeof small) {
        if (!(buf = malloc((size_t)n + 1))) {
            throw_oom(env);
            goto done;
        }
        rl_url_redact(curl, buf, (size_t)n + 1);
    }
    if ((out = (*env)->NewByteArray(env, n))) (*env)->SetByteArrayRegion(env, out, 0, n, (const jbyte *)buf);
done:
    if (buf != small) free(buf);
    free(curl);
    return out;
}

/* ---- natives: asynchronous decisions ----------------------------------------------------- */

/* rl_submit's target is a callback on the client's I/O thread; its ctx is a
 * global reference to the client's io.ratelimit.AsyncCalls, made once per
 * client (asyncContext) and deleted after rl_client_close returned
 * (asyncContextFree), because the core runs the callbacks of everything still
 * in flight during the close. The tag is a Java-side id into that object's
 * map of pending futures, so no JNI reference is made or deleted per call.
 *
 * The I/O thread is attached to the JVM on its first callback (as a daemon
 * named ratelimit-io-N) and stays attached: a pthread key's destructor
 * detaches it when the core ends the thread (rl_client_close joins it). */

static void detach_at_exit(void *vm)
{
    (*(JavaVM *)vm)->DetachCurrentThread((JavaVM *)vm);
}

/* The calling thread's JNIEnv, attaching it the first time; NULL if the JVM
 * refuses (then the completion cannot be delivered). */
JNIEnv *io_env(void)
{
    JNIEnv *env = NULL;
    jint rc = (*g_vm)->GetEnv(g_vm, (void **)&env, RLJ_JNI_VERSION);
    if (rc == JNI_OK) return env; /* attached already: ours, or a Java thread */
    if (rc != JNI_EDETACHED) return NULL;
    char name[32];
    snprintf(name, sizeof name, "ratelimit-io-%d", atomic_fetch_add(&g_io_threads, 1) + 1);
    JavaVMAttachArgs args = {RLJ_JNI_VERSION, name, NULL};
    if ((*g_vm)->AttachCurrentThreadAsDaemon(g_vm, (void **)&env, &args) != JNI_OK) return NULL;
    /* without the key the thread would stay attached after it ends: refuse */
    if (!g_detach_key_ok || pthread_setspecific(g_detach_key, g_vm) != 0) {
        (*g_vm)->DetachCurrentThread(g_vm);
        return NULL;
    }
    return env;
}

void on_complete(void *ctx, const rl_completion *c)
{
    JNIEnv *env = io_env();
    if (!env) {
        /* the future stays pending until the client closes (AsyncCalls then fails it) */
        fprintf(stderr, "ratelimit: cannot attach the I/O thread to the JVM; completion %llu dropped\n",
                (unsigned long long)c->tag);
        return;
    }
    const rl_result *r = &c->result;
    jbyteArray message = NULL;
    if (c->status != RL_OK) {
        const char *msg = c->error[0] ? c->error : rl_strerror(c->status);
        jsize len = (jsize)strnlen(msg, sizeof c->error);
        if ((message = (*env)->NewByteArray(env, len)))
            (*env)->SetByteArrayRegion(env, message, 0, len, (const jbyte *)msg);
        else (*env)->ExceptionClear(env); /* Java falls back to the status's text */
    }
    (*env)->CallVoidMethod(env, (jobject)ctx, g_complete, (jlong)c->tag, (jint)c->status,
                           (jboolean)(r->allowed != 0), (jlong)r->limit, (jlong)r->remaining,
                           (jlong)r->retry_after_ms, (jlong)r->reset_after_ms, (jlong)r->wait_ms,
                           (jboolean)(r->fallback != 0), (jlong)r->granted, (jint)r->rate_index,
                           (jboolean)(r->local != 0), message);
    /* AsyncCalls.complete catches everything; an Error thrown anyway must not
     * stay pending on a thread that never returns to Java */
    if ((*env)->ExceptionCheck(env)) {
        (*env)->ExceptionDescribe(env);
        (*env)->ExceptionClear(env);
    }
    /* this thread never returns to Java: local references would pile up */
    if (message) (*env)->DeleteLocalRef(env, message);
}

static jlong n_async_context(JNIEnv *env, jclass cls, jobject calls)
{
    (void)cls;
    jobject ref = (*env)->NewGlobalRef(env, calls);
    if (!ref) throw_oom(env);
    return (jlong)(intptr_t)ref;
}

/* only after rl_client_close returned: no callback can run any more */
static void n_async_context_free(JNIEnv *env, jclass cls, jlong ref)
{
    (void)cls;
    if (ref) (*env)->DeleteGlobalRef(env, (jobject)(intptr_t)ref);
}

/* ---- registration ------------------------------------------------------------------------ */

static const JNINativeMethod methods[] = {
    {"version", "()I", (void *)n_version},
    {"strerror", "(I)Ljava/lang/String;", (void *)n_strerror},
    {"parseRate", "(" B ")[J", (void *)n_parse_rate},
    {"algorithmName", "(I)Ljava/lang/String;", (void *)n_algorithm_name},
    {"algorithmParse", "(" B ")I", (void *)n_algorithm_parse},
    {"scripts", "()[Ljava/lang/String;", (void *)n_scripts},
    {"hasTls", "()Z", (void *)n_has_tls},
    {"redactUrl", "(" B ")" B, (void *)n_redact_url},
    {"tlsVersion", "()Ljava/lang/String;", (void *)n_tls_version},
    {"open", "(" B B "JJII" B B B "IJJ" B "II)J", (void *)n_open},
    {"close", "(J)V", (void *)n_close},
    {"shutdown", "(J)V", (void *)n_shutdown},
    {"prefix", "(J)Ljava/lang/String;", (void *)n_prefix},
    {"key", "(J" B B "II)[B", (void *)n_key},
    {"limits", "()[J", (void *)n_limits},
    {"asyncContext", "(Lio/ratelimit/AsyncCalls;)J", (void *)n_async_context},
    {"asyncContextFree", "(J)V", (void *)n_async_context_free},
};

jclass global_class(JNIEnv *env, const char *name)
{
    jclass local = (*env)->FindClass(env, name);
    if (!local) return NULL;
    jclass global = (*env)->NewGlobalRef(env, local);
    (*env)->DeleteLocalRef(env, local);
    return global;
}

JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM *vm, void *reserved)
{
    JNIEnv *env;
    jclass handle, calls;
    (void)reserved;
    if ((*vm)->GetEnv(vm, (void **)&env, RLJ_JNI_VERSION) != JNI_OK) return JNI_ERR;
    g_vm = vm;
    /* never deleted: an I/O thread may still end after an unload */
    if (!g_detach_key_ok) g_detach_key_ok = pthread_key_create(&g_detach_key, detach_at_exit) == 0;
    /* the core is linked in statically, so this only fails if the build
     * mixed a header and sources from different versions */
    if (rl_version_number() != RL_VERSION_NUMBER) return JNI_ERR;
    if (!(g_native = global_class(env, "io/ratelimit/Native")) ||
        !(g_result = global_class(env, "io/ratelimit/Result")) ||
        !(handle = (*env)->FindClass(env, "io/ratelimit/ClientHandle")))
        return JNI_ERR;
    g_exception = (*env)->GetStaticMethodID(env, g_native, "exception", "(I[B)Ljava/lang/RuntimeException;");
    g_result_init = (*env)->GetMethodID(env, g_result, "<init>", "(ZJJJJJZJIZ)V");
    g_cancel = (*env)->GetMethodID(env, handle, "cancelRequested", "()Z");
    (*env)->DeleteLocalRef(env, handle);
    if (!(calls = (*env)->FindClass(env, "io/ratelimit/AsyncCalls"))) return JNI_ERR;
    g_complete = (*env)->GetMethodID(env, calls, "complete", "(JIZJJJJJZJIZ[B)V");
    (*env)->DeleteLocalRef(env, calls);
    if (!g_exception || !g_result_init || !g_cancel || !g_complete) return JNI_ERR;
    if ((*env)->RegisterNatives(env, g_native, methods, (jint)(sizeof methods / sizeof methods[0])) != JNI_OK ||
        register_limiter_natives(env, g_native) != JNI_OK || register_stats_natives(env, g_native) != JNI_OK ||
        register_primitive_natives(env, g_native) != JNI_OK)
        return JNI_ERR;
    return RLJ_JNI_VERSION;
}

JNIEXPORT void JNICALL JNI_OnUnload(JavaVM *vm, void *reserved)
{
    JNIEnv *env;
    (void)reserved;
    if ((*vm)->GetEnv(vm, (void **)&env, RLJ_JNI_VERSION) != JNI_OK) return;
    jclass *refs[] = {&g_native, &g_result};
    for (size_t i = 0; i < sizeof refs / sizeof refs[0]; i++) {
        if (*refs[i]) (*env)->DeleteGlobalRef(env, *refs[i]);
        *refs[i] = NULL;
    }
    free_primitive_refs(env);
}
