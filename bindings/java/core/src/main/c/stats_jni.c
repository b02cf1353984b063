/*
 * JNI glue for the core's metrics (rl_client_stats): one call copies every
 * limiter name's counters into Java arrays,
 *
 *   Object[] {byte[][] names (UTF-8), long[] counters, long[] bucket bounds (us)}
 *
 * with STRIDE longs per name in counters: allowed, denied, fallback, errors,
 * local_allowed, local_denied, lease_calls, latency sum (us), then
 * RL_STATS_BUCKETS bucket counts (not cumulative).
 * Conventions as in ratelimit_jni.c.
 */
#include <jni.h>
#include <stdlib.h>
#include <string.h>

#include "ratelimit.h"
#include "ratelimit_jni.h"

#define HEAD 8 /* the counters before the buckets */
#define STRIDE (HEAD + RL_STATS_BUCKETS)

static jlongArray bounds_array(JNIEnv *env)
{
    jlong bounds[RL_STATS_BUCKETS - 1];
    for (int b = 0; b < RL_STATS_BUCKETS - 1; b++) bounds[b] = RL_STATS_BUCKET_US(b);
    jlongArray out = (*env)->NewLongArray(env, RL_STATS_BUCKETS - 1);
    if (out) (*env)->SetLongArrayRegion(env, out, 0, RL_STATS_BUCKETS - 1, bounds);
    return out;
}

/* The names and counters of all, or NULL with an exception pending. */
static jobjectArray stats_arrays(JNIEnv *env, const rl_limiter_stats *all, size_t n)
{
    jclass byte_array = (*env)->FindClass(env, "[B"), object = (*env)->FindClass(env, "java/lang/Object");
    if (!byte_array || !object) return NULL;
    jobjectArray names = (*env)->NewObjectArray(env, (jsize)n, byte_array, NULL);
    jlongArray counters = (*env)->NewLongArray(env, (jsize)(n * STRIDE));
    jlongArray bounds = bounds_array(env);
    jobjectArray out = names && counters && bounds ? (*env)->NewObjectArray(env, 3, object, NULL) : NULL;
    for (size_t i = 0; out && i < n; i++) {
        const rl_limiter_stats *s = &all[i];
        jsize len = (jsize)strlen(s->name);
        jbyteArray name = (*env)->NewByteArray(env, len);
        if (!name) return NULL;
        (*env)->SetByteArrayRegion(env, name, 0, len, (const jbyte *)s->name);
        (*env)->SetObjectArrayElement(env, names, (jsize)i, name);
        (*env)->DeleteLocalRef(env, name);
        jlong row[STRIDE] = {(jlong)s->allowed,       (jlong)s->denied,        (jlong)s->fallback,
                             (jlong)s->errors,        (jlong)s->local_allowed, (jlong)s->local_denied,
                             (jlong)s->lease_calls,   (jlong)s->latency_sum_us};
        for (int b = 0; b < RL_STATS_BUCKETS; b++) row[HEAD + b] = (jlong)s->latency_buckets[b];
        (*env)->SetLongArrayRegion(env, counters, (jsize)(i * STRIDE), STRIDE, row);
    }
    if (!out) return NULL;
    (*env)->SetObjectArrayElement(env, out, 0, names);
    (*env)->SetObjectArrayElement(env, out, 1, counters);
    (*env)->SetObjectArrayElement(env, out, 2, bounds);
    return out;
}

static jobjectArray JNICALL n_stats(JNIEnv *env, jclass cls, jlong client)
{
    (void)cls;
    size_t n = 0, got = 0;
    /* no lock and no round trip in the core; names only ever get added */
    int rc = rl_client_stats(client_of(client), NULL, 0, &n);
    rl_limiter_stats *all = rc == RL_OK ? calloc(n + 1, sizeof *all) : NULL;
    if (rc != RL_OK) {
        throw_status(env, rc);
        return NULL;
    }
    if (!all) {
        throw_oom(env);
        return NULL;
    }
    rl_client_stats(client_of(client), all, n + 1, &got);
    jobjectArray out = stats_arrays(env, all, got < n + 1 ? got : n + 1);
    free(all);
    return out;
}

static const JNINativeMethod methods[] = {
    {"stats", "(J)[Ljava/lang/Object;", (void *)n_stats},
};

jint register_stats_natives(JNIEnv *env, jclass native)
{
    return (*env)->RegisterNatives(env, native, methods, (jint)(sizeof methods / sizeof methods[0]));
}
