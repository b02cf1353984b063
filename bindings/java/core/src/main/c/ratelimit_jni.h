/*
 * What the JNI files share: ratelimit_jni.c (library, client, errors, the
 * I/O thread's attachment, registration) defines these; limiter_jni.c
 * (rate-limit decisions and stored specs), primitives_jni.c (semaphore,
 * lock, delay queue) and stats_jni.c use them. Everything here is hidden in
 * the library (-fvisibility=hidden, exports.map).
 */
#ifndef RATELIMIT_JNI_H
#define RATELIMIT_JNI_H

#include <jni.h>
#include <stddef.h>

#include "ratelimit.h"

#define B "[B"
#define RESULT "Lio/ratelimit/Result;"
#define HANDLE "Lio/ratelimit/ClientHandle;"

/* io.ratelimit.Result */
extern jclass g_result;

/* Raises the Java exception for a core status with the core's message for
 * this thread; the caller returns at once. */
void throw_status(JNIEnv *env, int status);
/* The exception for a status with msg, not thrown (a local reference), or
 * NULL with an exception pending. */
jobject new_exception(JNIEnv *env, int status, const char *msg);
void throw_oom(JNIEnv *env);

/* A byte[] into a malloc'd NUL-terminated buffer (NULL for null); 0, or -1
 * with an exception pending. */
int copy_bytes(JNIEnv *env, jbyteArray array, char **out, size_t *len);
/* The same into buf when it fits (no allocation); free with free_bytes. */
int copy_bytes_small(JNIEnv *env, jbyteArray array, char *buf, size_t size, char **out);
void free_bytes(char *p, char *buf);

rl_client *client_of(jlong handle);

/* A global reference to a class, or NULL with an exception pending. */
jclass global_class(JNIEnv *env, const char *name);

/* A blocking wait polling ClientHandle.cancelRequested() (handle may be NULL). */
typedef struct {
    JNIEnv *env;
    jobject handle;
} cancel_ctx;

void init_wait(rl_wait *wait, cancel_ctx *ctx, JNIEnv *env, jobject handle, jlong timeout_ms);

jobject new_result(JNIEnv *env, const rl_result *r);

/* rl_submit's callback: AsyncCalls.complete on the client's I/O thread;
 * ctx is the global reference from Native.asyncContext. */
void on_complete(void *ctx, const rl_completion *c);
/* The other calls' callback (primitives_jni.c): AsyncCalls.completeOp. */
void on_op_complete(void *ctx, const rl_completion *c);

/* The I/O thread's JNIEnv, attaching it to the JVM on its first completion
 * (it stays attached until it ends); NULL if the JVM refuses. */
JNIEnv *io_env(void);

/* limiter_jni.c: binds its natives to io.ratelimit.Native; JNI_OK or not. */
jint register_limiter_natives(JNIEnv *env, jclass native);
/* stats_jni.c: the same for Native.stats (rl_client_stats). */
jint register_stats_natives(JNIEnv *env, jclass native);
/* primitives_jni.c: the semaphore, lock and queue natives, blocking and
 * asynchronous; free_primitive_refs drops its global references (unload). */
jint register_primitive_natives(JNIEnv *env, jclass native);
void free_primitive_refs(JNIEnv *env);

#endif
