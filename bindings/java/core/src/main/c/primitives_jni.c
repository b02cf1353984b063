/*
 * JNI glue for the primitives: the fair semaphore, the lock (a semaphore of
 * one, lock = JNI_TRUE) and the delay queue, blocking (the caller's thread
 * waits, polling ClientHandle.cancelRequested) and asynchronous (rl_submit_*:
 * the I/O thread waits, holding no thread; rl_cancel stops a wait).
 *
 * An asynchronous call's completion goes to on_op_complete, on the client's
 * I/O thread, which hands it to AsyncCalls.completeOp under the call's tag.
 * The target's ctx is the client's one global reference to its AsyncCalls
 * (Native.asyncContext), as for decisions: nothing is made per call. What
 * the completion holds (a permit, messages) is given back by the Java side
 * when nobody takes it (a future cancelled while the reply was on its way).
 * Conventions as in ratelimit_jni.c.
 */
#include <jni.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ratelimit.h"
#include "ratelimit_jni.h"

static jclass g_permit;         /* io.ratelimit.NativePermit */
static jclass g_byte_array;     /* byte[] */
static jmethodID g_permit_init; /* NativePermit(String, long, long) */
static jmethodID g_complete_op; /* void AsyncCalls.completeOp(long, int, boolean, long, String, long, byte[][],
                                   byte[]) */

/* ---- conversions ------------------------------------------------------------------ */

static jobjectArray new_messages(JNIEnv *env, const rl_messages *m)
{
    if (m->count > INT32_MAX) {
        throw_oom(env);
        return NULL;
    }
    jobjectArray out = (*env)->NewObjectArray(env, (jsize)m->count, g_byte_array, NULL);
    if (!out) return NULL;
    for (size_t i = 0; i < m->count; i++) {
        if (m->lens[i] > INT32_MAX) {
            throw_oom(env);
            return NULL;
        }
        jbyteArray b = (*env)->NewByteArray(env, (jsize)m->lens[i]);
        if (!b) return NULL;
        (*env)->SetByteArrayRegion(env, b, 0, (jsize)m->lens[i], (const jbyte *)m->items[i]);
        (*env)->SetObjectArrayElement(env, out, (jsize)i, b);
        (*env)->DeleteLocalRef(env, b);
    }
    return out;
}

/* ---- natives: semaphore and lock (blocking) ------------------------------------------ */

static jobject n_sem_acquire(JNIEnv *env, jclass cls, jlong handle, jobject cancel, jboolean lock, jbyteArray name,
                             jlong max, jlong lease_ms, jlong timeout_ms)
{
    (void)cls;
    char *cname;
    rl_permit permit;
    rl_wait wait;
    cancel_ctx ctx;
    int rc;
    if (copy_bytes(env, name, &cname, NULL)) return NULL;
    init_wait(&wait, &ctx, env, cancel, timeout_ms);
    rc = lock ? rl_lock_acquire(client_of(handle), cname, lease_ms, &wait, &permit)
              : rl_semaphore_acquire(client_of(handle), cname, max, lease_ms, &wait, &permit);
    free(cname);
    if (rc) {
        throw_status(env, rc);
        return NULL;
    }
    if (!permit.acquired) return NULL;
    jstring id = (*env)->NewStringUTF(env, permit.id);
    if (!id) return NULL;
    jobject out = (*env)->NewObject(env, g_permit, g_permit_init, id, (jlong)permit.fencing_token,
                                    (jlong)permit.lease_ms);
    (*env)->DeleteLocalRef(env, id);
    return out;
}

/* release (lease_ms < 0) or refresh/extend a permit */
static jboolean sem_update(JNIEnv *env, jlong handle, jboolean lock, jbyteArray name, jbyteArray id, jlong lease_ms)
{
    char *cname, *cid;
    int done = 0, rc;
    if (copy_bytes(env, name, &cname, NULL)) return JNI_FALSE;
    if (copy_bytes(env, id, &cid, NULL)) {
        free(cname);
        return JNI_FALSE;
    }
    rl_client *c = client_of(handle);
    if (lease_ms == INT64_MIN)
        rc = lock ? rl_lock_release(c, cname, cid, &done) : rl_semaphore_release(c, cname, cid, &done);
    else
        rc = lock ? rl_lock_extend(c, cname, cid, lease_ms, &done) : rl_semaphore_refresh(c, cname, cid, lease_ms, &done);
    free(cname);
    free(cid);
    if (rc) {
        throw_status(env, rc);
        return JNI_FALSE;
    }
    return done ? JNI_TRUE : JNI_FALSE;
}

static jboolean n_sem_release(JNIEnv *env, jclass cls, jlong handle, jboolean lock, jbyteArray name, jbyteArray id)
{
    (void)cls;
    return sem_update(env, handle, lock, name, id, INT64_MIN);
}

static jboolean n_sem_refresh(JNIEnv *env, jclass cls, jlong handle, jboolean lock, jbyteArray name, jbyteArray id,
                              jlong lease_ms)
{
    (void)cls;
    /* INT64_MIN is the release marker; the core rejects any lease below 1 anyway */
    return sem_update(env, handle, lock, name, id, lease_ms == INT64_MIN ? -1 : lease_ms);
}

static jlong n_sem_available(JNIEnv *env, jclass cls, jlong handle, jbyteArray name, jlong max)
{
    (void)cls;
    char *cname;
    int64_t available = 0;
    if (copy_bytes(env, name, &cname, NULL)) return 0;
    int rc = rl_semaphore_available(client_of(handle), cname, max, &available);
    free(cname);
    if (rc) throw_status(env, rc);
    return (jlong)available;
}

static jlong n_sem_holders(JNIEnv *env, jclass cls, jlong handle, jbyteArray name)
{
    (void)cls;
    char *cname;
    int64_t holders = 0;
    if (copy_bytes(env, name, &cname, NULL)) return 0;
    int rc = rl_semaphore_holders(client_of(handle), cname, &holders);
    free(cname);
    if (rc) throw_status(env, rc);
    return (jlong)holders;
}

/* ---- natives: delay queue (blocking) ---------------------------------------------------- */

static jboolean n_queue_push(JNIEnv *env, jclass cls, jlong handle, jbyteArray queue, jbyteArray message,
                             jlong delay_ms)
{
    (void)cls;
    char *cqueue, *cmsg;
    size_t len;
    int added = 0;
    if (copy_bytes(env, queue, &cqueue, NULL)) return JNI_FALSE;
    if (copy_bytes(env, message, &cmsg, &len)) {
        free(cqueue);
        return JNI_FALSE;
    }
    int rc = rl_queue_push(client_of(handle), cqueue, cmsg, len, delay_ms, &added);
    free(cqueue);
    free(cmsg);
    if (rc) {
        throw_status(env, rc);
        return JNI_FALSE;
    }
    return added ? JNI_TRUE : JNI_FALSE;
}

/* cancel == null: pop_ready (no wait); else pop_wait with the timeout */
static jobjectArray n_queue_pop(JNIEnv *env, jclass cls, jlong handle, jobject cancel, jbyteArray queue, jlong max,
                                jlong timeout_ms)
{
    (void)cls;
    char *cqueue;
    rl_messages messages;
    rl_wait wait;
    cancel_ctx ctx;
    int rc;
    if (copy_bytes(env, queue, &cqueue, NULL)) return NULL;
    /* negative max must reach the core's range check, not wrap to a huge size_t */
    size_t cmax = max < 0 ? 0 : (size_t)max;
    if (cancel) {
        init_wait(&wait, &ctx, env, cancel, timeout_ms);
        rc = rl_queue_pop_wait(client_of(handle), cqueue, cmax, &wait, &messages);
    } else {
        rc = rl_queue_pop_ready(client_of(handle), cqueue, cmax, &messages);
    }
    free(cqueue);
    /* messages taken from Redis are delivered even when a later step failed:
     * dropping them would lose them for good */
    jobjectArray out = NULL;
    if (messages.count > 0 || rc == RL_OK) out = new_messages(env, &messages);
    rl_messages_free(&messages);
    if (rc && messages.count == 0) throw_status(env, rc);
    return out;
}

static jlong n_queue_size(JNIEnv *env, jclass cls, jlong handle, jbyteArray queue)
{
    (void)cls;
    char *cqueue;
    int64_t size = 0;
    if (copy_bytes(env, queue, &cqueue, NULL)) return 0;
    int rc = rl_queue_size(client_of(handle), cqueue, &size);
    free(cqueue);
    if (rc) throw_status(env, rc);
    return (jlong)size;
}

static jboolean n_queue_remove(JNIEnv *env, jclass cls, jlong handle, jbyteArray queue, jbyteArray message)
{
    (void)cls;
    char *cqueue, *cmsg;
    size_t len;
    int removed = 0;
    if (copy_bytes(env, queue, &cqueue, NULL)) return JNI_FALSE;
    if (copy_bytes(env, message, &cmsg, &len)) {
        free(cqueue);
        return JNI_FALSE;
    }
    int rc = rl_queue_remove(client_of(handle), cqueue, cmsg, len, &removed);
    free(cqueue);
    free(cmsg);
    if (rc) {
        throw_status(env, rc);
        return JNI_FALSE;
    }
    return removed ? JNI_TRUE : JNI_FALSE;
}

/* ---- natives: asynchronous calls --------------------------------------------------------- */

/* The completion of a primitive, on the I/O thread: AsyncCalls.completeOp.
 * The messages are ours to free whatever happens; a completion that cannot
 * reach Java (no JNIEnv, no memory for its arrays) fails its future with
 * RL_ERR_NOMEM, or leaves it to the close when even that is impossible. */
void on_op_complete(void *ctx, const rl_completion *c)
{
    rl_messages taken = c->messages;
    int status = c->status;
    const char *msg = NULL;
    jstring permit = NULL;
    jobjectArray messages = NULL;
    jbyteArray message = NULL;
    JNIEnv *env = io_env();
    if (!env) {
        fprintf(stderr, "ratelimit: cannot attach the I/O thread to the JVM; completion %llu dropped\n",
                (unsigned long long)c->tag);
        rl_messages_free(&taken);
        return;
    }
    if (c->acquired && !(permit = (*env)->NewStringUTF(env, c->permit_id))) status = RL_ERR_NOMEM;
    if (status != RL_ERR_NOMEM && taken.count > 0 && !(messages = new_messages(env, &taken)))
        status = RL_ERR_NOMEM;
    if (status == RL_ERR_NOMEM && (*env)->ExceptionCheck(env)) {
        (*env)->ExceptionClear(env);
        /* what was granted or taken cannot be handed over: the permit's
         * lease ends it; the messages are lost, say so */
        msg = "out of memory in the JVM delivering the completion";
        if (taken.count > 0)
            fprintf(stderr, "ratelimit: out of memory delivering completion %llu; %zu message(s) lost\n",
                    (unsigned long long)c->tag, taken.count);
    }
    rl_messages_free(&taken);
    if (status != RL_OK) {
        if (!msg) msg = c->error[0] ? c->error : rl_strerror(status);
        jsize len = (jsize)strnlen(msg, sizeof c->error);
        if ((message = (*env)->NewByteArray(env, len)))
            (*env)->SetByteArrayRegion(env, message, 0, len, (const jbyte *)msg);
        else (*env)->ExceptionClear(env); /* Java falls back to the status's text */
    }
    (*env)->CallVoidMethod(env, (jobject)ctx, g_complete_op, (jlong)c->tag, (jint)status,
                           (jboolean)(status == RL_OK && c->acquired), (jlong)c->fencing_token,
                           status == RL_OK ? permit : NULL, (jlong)c->value, status == RL_ERR_NOMEM ? NULL : messages,
                           message);
    /* completeOp catches everything; an Error must not stay pending here */
    if ((*env)->ExceptionCheck(env)) {
        (*env)->ExceptionDescribe(env);
        (*env)->ExceptionClear(env);
    }
    /* this thread never returns to Java: local references would pile up */
    if (permit) (*env)->DeleteLocalRef(env, permit);
    if (messages) (*env)->DeleteLocalRef(env, messages);
    if (message) (*env)->DeleteLocalRef(env, message);
}

static rl_target op_target(jlong ctx)
{
    rl_target t = {on_op_complete, (void *)(intptr_t)ctx, NULL};
    return t;
}

/* A failure to queue (bad argument, closing) throws here, on the caller's
 * thread, with the core's message; then no completion follows. */
static void n_sem_acquire_async(JNIEnv *env, jclass cls, jlong handle, jlong ctx, jlong tag, jboolean lock,
                                jbyteArray name, jlong max, jlong lease_ms, jlong timeout_ms)
{
    (void)cls;
    char buf[128], *cname;
    if (copy_bytes_small(env, name, buf, sizeof buf, &cname)) return;
    rl_target target = op_target(ctx);
    rl_client *c = client_of(handle);
    int rc = lock ? rl_submit_lock_acquire(c, cname, lease_ms, timeout_ms, (uint64_t)tag, &target)
                  : rl_submit_semaphore_acquire(c, cname, max, lease_ms, timeout_ms, (uint64_t)tag, &target);
    free_bytes(cname, buf);
    if (rc) throw_status(env, rc);
}

/* release (lease_ms == INT64_MIN) or refresh / extend */
static void sem_update_async(JNIEnv *env, jlong handle, jlong ctx, jlong tag, jboolean lock, jbyteArray name,
                             jbyteArray id, jlong lease_ms)
{
    char name_buf[128], id_buf[64], *cname, *cid;
    if (copy_bytes_small(env, name, name_buf, sizeof name_buf, &cname)) return;
    if (copy_bytes_small(env, id, id_buf, sizeof id_buf, &cid)) {
        free_bytes(cname, name_buf);
        return;
    }
    rl_target target = op_target(ctx);
    rl_client *c = client_of(handle);
    uint64_t t = (uint64_t)tag;
    int rc;
    if (lease_ms == INT64_MIN)
        rc = lock ? rl_submit_lock_release(c, cname, cid, t, &target)
                  : rl_submit_semaphore_release(c, cname, cid, t, &target);
    else
        rc = lock ? rl_submit_lock_extend(c, cname, cid, lease_ms, t, &target)
                  : rl_submit_semaphore_refresh(c, cname, cid, lease_ms, t, &target);
    free_bytes(cname, name_buf);
    free_bytes(cid, id_buf);
    if (rc) throw_status(env, rc);
}

static void n_sem_release_async(JNIEnv *env, jclass cls, jlong handle, jlong ctx, jlong tag, jboolean lock,
                                jbyteArray name, jbyteArray id)
{
    (void)cls;
    sem_update_async(env, handle, ctx, tag, lock, name, id, INT64_MIN);
}

static void n_sem_refresh_async(JNIEnv *env, jclass cls, jlong handle, jlong ctx, jlong tag, jboolean lock,
                                jbyteArray name, jbyteArray id, jlong lease_ms)
{
    (void)cls;
    /* INT64_MIN is the release marker; the core rejects any lease below 1 anyway */
    sem_update_async(env, handle, ctx, tag, lock, name, id, lease_ms == INT64_MIN ? -1 : lease_ms);
}

static void n_queue_push_async(JNIEnv *env, jclass cls, jlong handle, jlong ctx, jlong tag, jbyteArray queue,
                               jbyteArray message, jlong delay_ms)
{
    (void)cls;
    char buf[128], *cqueue, *cmsg;
    size_t len;
    if (copy_bytes_small(env, queue, buf, sizeof buf, &cqueue)) return;
    if (copy_bytes(env, message, &cmsg, &len)) {
        free_bytes(cqueue, buf);
        return;
    }
    rl_target target = op_target(ctx);
    int rc = rl_submit_queue_push(client_of(handle), cqueue, cmsg, len, delay_ms, (uint64_t)tag, &target);
    free_bytes(cqueue, buf);
    free(cmsg);
    if (rc) throw_status(env, rc);
}

/* timeout_ms 0: what is due now (pop_ready) */
static void n_queue_pop_async(JNIEnv *env, jclass cls, jlong handle, jlong ctx, jlong tag, jbyteArray queue,
                              jlong max, jlong timeout_ms)
{
    (void)cls;
    char buf[128], *cqueue;
    if (copy_bytes_small(env, queue, buf, sizeof buf, &cqueue)) return;
    rl_target target = op_target(ctx);
    /* negative max must reach the core's range check, not wrap to a huge size_t */
    size_t cmax = max < 0 ? 0 : (size_t)max;
    int rc = rl_submit_queue_pop(client_of(handle), cqueue, cmax, timeout_ms, (uint64_t)tag, &target);
    free_bytes(cqueue, buf);
    if (rc) throw_status(env, rc);
}

/* One round trip, the completion's value: live holders (max 0) or permits available */
static void n_sem_info_async(JNIEnv *env, jclass cls, jlong handle, jlong ctx, jlong tag, jbyteArray name, jlong max)
{
    (void)cls;
    char buf[128], *cname;
    if (copy_bytes_small(env, name, buf, sizeof buf, &cname)) return;
    rl_target target = op_target(ctx);
    int rc = rl_submit_semaphore_info(client_of(handle), cname, max, (uint64_t)tag, &target);
    free_bytes(cname, buf);
    if (rc) throw_status(env, rc);
}

static void n_queue_size_async(JNIEnv *env, jclass cls, jlong handle, jlong ctx, jlong tag, jbyteArray queue)
{
    (void)cls;
    char buf[128], *cqueue;
    if (copy_bytes_small(env, queue, buf, sizeof buf, &cqueue)) return;
    rl_target target = op_target(ctx);
    int rc = rl_submit_queue_size(client_of(handle), cqueue, (uint64_t)tag, &target);
    free_bytes(cqueue, buf);
    if (rc) throw_status(env, rc);
}

/* the completion's value: 1 when the message was removed */
static void n_queue_remove_async(JNIEnv *env, jclass cls, jlong handle, jlong ctx, jlong tag, jbyteArray queue,
                                 jbyteArray message)
{
    (void)cls;
    char buf[128], *cqueue, *cmsg;
    size_t len;
    if (copy_bytes_small(env, queue, buf, sizeof buf, &cqueue)) return;
    if (copy_bytes(env, message, &cmsg, &len)) {
        free_bytes(cqueue, buf);
        return;
    }
    rl_target target = op_target(ctx);
    int rc = rl_submit_queue_remove(client_of(handle), cqueue, cmsg, len, (uint64_t)tag, &target);
    free_bytes(cqueue, buf);
    free(cmsg);
    if (rc) throw_status(env, rc);
}

/* rl_cancel: the wait under tag completes with RL_ERR_CANCELLED, holding nothing */
static void n_cancel(JNIEnv *env, jclass cls, jlong handle, jlong tag)
{
    (void)cls;
    int rc = rl_cancel(client_of(handle), (uint64_t)tag);
    if (rc) throw_status(env, rc);
}

/* ---- registration -------------------------------------------------------------------------- */

static const JNINativeMethod methods[] = {
    {"semAcquire", "(J" HANDLE "Z" B "JJJ)Lio/ratelimit/NativePermit;", (void *)n_sem_acquire},
    {"semRelease", "(JZ" B B ")Z", (void *)n_sem_release},
    {"semRefresh", "(JZ" B B "J)Z", (void *)n_sem_refresh},
    {"semAvailable", "(J" B "J)J", (void *)n_sem_available},
    {"semHolders", "(J" B ")J", (void *)n_sem_holders},
    {"queuePush", "(J" B B "J)Z", (void *)n_queue_push},
    {"queuePop", "(J" HANDLE B "JJ)[[B", (void *)n_queue_pop},
    {"queueSize", "(J" B ")J", (void *)n_queue_size},
    {"queueRemove", "(J" B B ")Z", (void *)n_queue_remove},
    {"semAcquireAsync", "(JJJZ" B "JJJ)V", (void *)n_sem_acquire_async},
    {"semReleaseAsync", "(JJJZ" B B ")V", (void *)n_sem_release_async},
    {"semRefreshAsync", "(JJJZ" B B "J)V", (void *)n_sem_refresh_async},
    {"queuePushAsync", "(JJJ" B B "J)V", (void *)n_queue_push_async},
    {"queuePopAsync", "(JJJ" B "JJ)V", (void *)n_queue_pop_async},
    {"semInfoAsync", "(JJJ" B "J)V", (void *)n_sem_info_async},
    {"queueSizeAsync", "(JJJ" B ")V", (void *)n_queue_size_async},
    {"queueRemoveAsync", "(JJJ" B B ")V", (void *)n_queue_remove_async},
    {"cancel", "(JJ)V", (void *)n_cancel},
};

jint register_primitive_natives(JNIEnv *env, jclass native)
{
    jclass calls;
    if (!(g_permit = global_class(env, "io/ratelimit/NativePermit")) || !(g_byte_array = global_class(env, "[B")) ||
        !(calls = (*env)->FindClass(env, "io/ratelimit/AsyncCalls")))
        return JNI_ERR;
    g_permit_init = (*env)->GetMethodID(env, g_permit, "<init>", "(Ljava/lang/String;JJ)V");
    g_complete_op = (*env)->GetMethodID(env, calls, "completeOp", "(JIZJLjava/lang/String;J[[B[B)V");
    (*env)->DeleteLocalRef(env, calls);
    if (!g_permit_init || !g_complete_op) return JNI_ERR;
    return (*env)->RegisterNatives(env, native, methods, (jint)(sizeof methods / sizeof methods[0]));
}

void free_primitive_refs(JNIEnv *env)
{
    jclass *refs[] = {&g_permit, &g_byte_array};
    for (size_t i = 0; i < sizeof refs / sizeof refs[0]; i++) {
        if (*refs[i]) (*env)->DeleteGlobalRef(env, *refs[i]);
        *refs[i] = NULL;
    }
}
