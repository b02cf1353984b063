/* Runs the shared conformance vectors (the JSON files in tests/vectors) through the C
 * API. With RL_VECTORS_RECORD=1 it fills in missing expectations and prints
 * the completed document instead (see make_skeleton.py). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

static test_redis redis;
static rl_client *client;
static int recording;
/* "fields": "all": results also carry granted and rate_index */
static int all_fields;

typedef struct {
    char name[32];
    char id[RL_PERMIT_ID_SIZE];
} saved_permit;
static saved_permit saved[64];
static int saved_count;

static const char *str(const cJSON *o, const char *k, const char *dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : dflt;
}

static int64_t num(const cJSON *o, const char *k, int64_t dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : dflt;
}

static const char *error_name(int rc)
{
    switch (rc) {
    case RL_ERR_INVALID: return "invalid";
    case RL_ERR_CONNECTION: return "connection";
    case RL_ERR_TIMEOUT: return "timeout";
    case RL_ERR_REDIS: return "redis";
    default: return "other";
    }
}

static char where[256];

static void mismatch(const char *what, const char *got, const char *want)
{
    test_failures++;
    fprintf(stderr, "%s: %s: got %s, expected %s\n", where, what, got, want);
}

/* Compares actual against step.expect, or records it. */
static void settle(cJSON *step, cJSON *actual)
{
    cJSON *expect = cJSON_GetObjectItemCaseSensitive(step, "expect");
    test_checks++;
    if (!expect) {
        if (recording) cJSON_AddItemToObject(step, "expect", actual);
        else {
            mismatch("expect", "a result", "no expectation in the file");
            cJSON_Delete(actual);
        }
        return;
    }
    if (!cJSON_Compare(actual, expect, 1)) {
        char *a = cJSON_PrintUnformatted(actual), *e = cJSON_PrintUnformatted(expect);
        mismatch("result", a, e);
        free(a);
        free(e);
    }
    cJSON_Delete(actual);
}

static void settle_error(cJSON *step, int rc)
{
    const char *want = str(step, "expect_error", NULL);
    test_checks++;
    if (!want) {
        char got[600];
        snprintf(got, sizeof got, "error %s (%s)", error_name(rc), rl_errmsg());
        mismatch("status", got, "success");
    } else if (strcmp(want, error_name(rc))) {
        mismatch("error", error_name(rc), want);
    }
}

static int expects_error(cJSON *step, int rc)
{
    if (rc != RL_OK) {
        settle_error(step, rc);
        return 1;
    }
    if (str(step, "expect_error", NULL)) {
        test_checks++;
        mismatch("status", "success", str(step, "expect_error", ""));
        return 1;
    }
    return 0;
}

/* A spec object: name, algorithm, limit, period_ms, burst, and optionally
 * more [{limit, period_ms, burst}], initial_tokens, scope. */
static void read_spec(const cJSON *j, rl_spec *spec)
{
    const cJSON *rate;
    memset(spec, 0, sizeof *spec);
    if (rl_algorithm_parse(str(j, "algorithm", ""), &spec->algorithm)) spec->algorithm = (rl_algorithm)-1;
    spec->limit = num(j, "limit", 0);
    spec->period_ms = num(j, "period_ms", 0);
    spec->burst = num(j, "burst", 0);
    cJSON_ArrayForEach(rate, cJSON_GetObjectItemCaseSensitive(j, "more")) {
        if (spec->more_count < RL_MAX_RATES - 1)
            spec->more[spec->more_count] = (rl_rate){num(rate, "limit", 0), num(rate, "period_ms", 0), num(rate, "burst", 0)};
        spec->more_count++;
    }
    spec->initial_tokens = num(j, "initial_tokens", 0);
    spec->scope = !strcmp(str(j, "scope", "overall"), "per_client") ? RL_SCOPE_PER_CLIENT : RL_SCOPE_OVERALL;
}

/* The same schema back, defaults left out. */
static cJSON *write_spec(const rl_spec *spec)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "algorithm", rl_algorithm_name(spec->algorithm));
    cJSON_AddNumberToObject(j, "limit", (double)spec->limit);
    cJSON_AddNumberToObject(j, "period_ms", (double)spec->period_ms);
    cJSON_AddNumberToObject(j, "burst", (double)spec->burst);
    if (spec->more_count) {
        cJSON *more = cJSON_AddArrayToObject(j, "more");
        for (size_t i = 0; i < spec->more_count; i++) {
            cJSON *r = cJSON_CreateObject();
            cJSON_AddNumberToObject(r, "limit", (double)spec->more[i].limit);
            cJSON_AddNumberToObject(r, "period_ms", (double)spec->more[i].period_ms);
            cJSON_AddNumberToObject(r, "burst", (double)spec->more[i].burst);
            cJSON_AddItemToArray(more, r);
        }
    }
    if (spec->initial_tokens) cJSON_AddNumberToObject(j, "initial_tokens", (double)spec->initial_tokens);
    if (spec->scope == RL_SCOPE_PER_CLIENT) cJSON_AddStringToObject(j, "scope", "per_client");
    return j;
}

static void config_step(cJSON *step, const char *op)
{
    const char *name = str(step, "name", "");
    cJSON *a = cJSON_CreateObject();
    rl_spec spec;
    int flag = 0, rc;
    if (!strcmp(op, "config_set")) {
        read_spec(cJSON_GetObjectItemCaseSensitive(step, "spec"), &spec);
        flag = 1;
        rc = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(step, "if_absent"))
                 ? rl_config_set_if_absent(client, name, &spec, &flag)
                 : rl_config_set(client, name, &spec);
        cJSON_AddBoolToObject(a, "set", flag);
    } else if (!strcmp(op, "config_get")) {
        rc = rl_config_get(client, name, &spec, &flag);
        cJSON_AddBoolToObject(a, "found", flag);
        if (rc == RL_OK && flag) cJSON_AddItemToObject(a, "spec", write_spec(&spec));
    } else {
        rc = rl_config_delete(client, name, &flag);
        cJSON_AddBoolToObject(a, "deleted", flag);
    }
    if (expects_error(step, rc)) {
        cJSON_Delete(a);
        return;
    }
    settle(step, a);
}

static void limiter_step(const cJSON *spec_json, cJSON *step, const char *op)
{
    rl_request req;
    rl_result res;
    memset(&req, 0, sizeof req);
    /* a step's own spec replaces the case's (a rate change) */
    if (cJSON_GetObjectItemCaseSensitive(step, "spec")) spec_json = cJSON_GetObjectItemCaseSensitive(step, "spec");
    req.name = str(spec_json, "name", "");
    req.id = str(step, "id", "");
    read_spec(spec_json, &req.spec);
    req.stored_spec = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(step, "stored"));
    req.permits = num(step, "permits", 1);
    req.now_ms = num(step, "now_ms", 0);
    req.max_wait_ms = num(step, "max_wait_ms", 0);
    if (!strcmp(op, "reset")) {
        expects_error(step, rl_reset(client, req.name, req.id, req.stored_spec ? NULL : &req.spec));
        return;
    }
    req.op = !strcmp(op, "peek")             ? RL_OP_PEEK
             : !strcmp(op, "reserve")        ? RL_OP_RESERVE
             : !strcmp(op, "acquire_up_to")  ? RL_OP_ACQUIRE_UP_TO
             : !strcmp(op, "refund")         ? RL_OP_REFUND
             : !strcmp(op, "acquire")        ? RL_OP_ACQUIRE
                                             : (rl_op)-1;
    if (expects_error(step, rl_execute(client, &req, 1, &res))) return;
    cJSON *a = cJSON_CreateObject();
    cJSON_AddBoolToObject(a, "allowed", res.allowed);
    cJSON_AddNumberToObject(a, "limit", (double)res.limit);
    cJSON_AddNumberToObject(a, "remaining", (double)res.remaining);
    cJSON_AddNumberToObject(a, "retry_after_ms", (double)res.retry_after_ms);
    cJSON_AddNumberToObject(a, "reset_after_ms", (double)res.reset_after_ms);
    cJSON_AddNumberToObject(a, "wait_ms", (double)res.wait_ms);
    if (all_fields) {
        cJSON_AddNumberToObject(a, "granted", (double)res.granted);
        cJSON_AddNumberToObject(a, "rate_index", res.rate_index);
    }
    settle(step, a);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void keys_step(cJSON *step)
{
    redisContext *c = redis_raw(&redis);
    redisReply *all = redisCommand(c, "KEYS *");
    char **names = calloc(all->elements + 1, sizeof *names);
    for (size_t i = 0; i < all->elements; i++) names[i] = all->element[i]->str;
    qsort(names, all->elements, sizeof *names, cmp_str);
    cJSON *actual = cJSON_CreateArray();
    for (size_t i = 0; i < all->elements; i++) {
        redisReply *type = redisCommand(c, "TYPE %s", names[i]);
        long long pttl = redis_int(c, "PTTL %s", names[i]);
        cJSON *k = cJSON_CreateObject();
        cJSON_AddStringToObject(k, "key", names[i]);
        cJSON_AddStringToObject(k, "type", type->str);
        cJSON_AddNumberToObject(k, "pttl", (double)pttl);
        cJSON_AddItemToArray(actual, k);
        freeReplyObject(type);
        test_checks++;
        /* stored specs live until deleted; everything else expires */
        if (pttl < 0 && !strstr(names[i], ":config:")) mismatch(names[i], "a key without TTL", "every key to expire");
    }
    cJSON *expect = cJSON_GetObjectItemCaseSensitive(step, "expect_keys");
    if (!expect && recording) {
        cJSON *rec = cJSON_CreateArray(), *k;
        cJSON_ArrayForEach(k, actual) {
            int64_t pttl = num(k, "pttl", 0);
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "key", str(k, "key", ""));
            cJSON_AddStringToObject(e, "type", str(k, "type", ""));
            cJSON_AddNumberToObject(e, "pttl_min", (double)(pttl < 0 ? pttl : pttl > 2000 ? pttl - 2000 : 1));
            cJSON_AddNumberToObject(e, "pttl_max", (double)(pttl < 0 ? pttl : pttl + 10));
            cJSON_AddItemToArray(rec, e);
        }
        cJSON_AddItemToObject(step, "expect_keys", rec);
    } else {
        int n = cJSON_GetArraySize(expect), m = cJSON_GetArraySize(actual);
        test_checks++;
        if (n != m) {
            char *a = cJSON_PrintUnformatted(actual);
            char want[32];
            snprintf(want, sizeof want, "%d keys", n);
            mismatch("keys", a, want);
            free(a);
        }
        for (int i = 0; i < n && i < m; i++) {
            cJSON *e = cJSON_GetArrayItem(expect, i), *a = cJSON_GetArrayItem(actual, i);
            int64_t pttl = num(a, "pttl", -3);
            test_checks++;
            if (strcmp(str(e, "key", "?"), str(a, "key", "")) || strcmp(str(e, "type", "?"), str(a, "type", "")) ||
                pttl < num(e, "pttl_min", 0) || pttl > num(e, "pttl_max", 0)) {
                char *as = cJSON_PrintUnformatted(a), *es = cJSON_PrintUnformatted(e);
                mismatch("key", as, es);
                free(as);
                free(es);
            }
        }
    }
    cJSON_Delete(actual);
    free(names);
    freeReplyObject(all);
    redisFree(c);
}

static const char *permit_ref(const cJSON *step)
{
    const char *ref = str(step, "permit", "");
    for (int i = 0; i < saved_count; i++)
        if (!strcmp(saved[i].name, ref)) return saved[i].id;
    return ref; /* a literal (unknown) id */
}

static void save_permit(const cJSON *step, const rl_permit *p)
{
    const char *as = str(step, "save_as", NULL);
    if (!as || saved_count >= 64) return;
    snprintf(saved[saved_count].name, sizeof saved[0].name, "%s", as);
    snprintf(saved[saved_count].id, sizeof saved[0].id, "%s", p->id);
    saved_count++;
}

static void primitive_step(cJSON *step, const char *op)
{
    const char *name = str(step, "name", str(step, "queue", ""));
    rl_wait wait = {num(step, "timeout_ms", 0), NULL, NULL};
    rl_permit p;
    int done = 0, rc;
    int64_t count = 0;
    cJSON *a = cJSON_CreateObject();
    if (!strcmp(op, "semaphore_acquire") || !strcmp(op, "lock_acquire")) {
        rc = op[0] == 's' ? rl_semaphore_acquire(client, name, num(step, "permits_max", 0), num(step, "lease_ms", 0), &wait, &p)
                          : rl_lock_acquire(client, name, num(step, "lease_ms", 0), &wait, &p);
        if (!rc) {
            save_permit(step, &p);
            cJSON_AddBoolToObject(a, "acquired", p.acquired);
        }
    } else if (!strcmp(op, "semaphore_release")) {
        if (!(rc = rl_semaphore_release(client, name, permit_ref(step), &done))) cJSON_AddBoolToObject(a, "done", done);
    } else if (!strcmp(op, "semaphore_refresh")) {
        if (!(rc = rl_semaphore_refresh(client, name, permit_ref(step), num(step, "lease_ms", 0), &done)))
            cJSON_AddBoolToObject(a, "done", done);
    } else if (!strcmp(op, "lock_release")) {
        if (!(rc = rl_lock_release(client, name, permit_ref(step), &done))) cJSON_AddBoolToObject(a, "done", done);
    } else if (!strcmp(op, "lock_extend")) {
        if (!(rc = rl_lock_extend(client, name, permit_ref(step), num(step, "lease_ms", 0), &done)))
            cJSON_AddBoolToObject(a, "done", done);
    } else if (!strcmp(op, "semaphore_holders")) {
        if (!(rc = rl_semaphore_holders(client, name, &count))) cJSON_AddNumberToObject(a, "count", (double)count);
    } else if (!strcmp(op, "semaphore_available")) {
        if (!(rc = rl_semaphore_available(client, name, num(step, "permits_max", 0), &count)))
            cJSON_AddNumberToObject(a, "count", (double)count);
    } else if (!strcmp(op, "queue_push")) {
        const char *m = str(step, "message", "");
        if (!(rc = rl_queue_push(client, name, m, strlen(m), num(step, "delay_ms", 0), &done)))
            cJSON_AddBoolToObject(a, "added", done);
    } else if (!strcmp(op, "queue_remove")) {
        const char *m = str(step, "message", "");
        if (!(rc = rl_queue_remove(client, name, m, strlen(m), &done))) cJSON_AddBoolToObject(a, "done", done);
    } else if (!strcmp(op, "queue_size")) {
        if (!(rc = rl_queue_size(client, name, &count))) cJSON_AddNumberToObject(a, "count", (double)count);
    } else if (!strcmp(op, "queue_pop_ready")) {
        rl_messages m;
        if (!(rc = rl_queue_pop_ready(client, name, (size_t)num(step, "max", 0), &m))) {
            cJSON *list = cJSON_AddArrayToObject(a, "messages");
            for (size_t i = 0; i < m.count; i++) cJSON_AddItemToArray(list, cJSON_CreateString(m.items[i]));
            rl_messages_free(&m);
        }
    } else if (!strcmp(op, "sleep")) {
        sleep_ms(num(step, "ms", 0));
        cJSON_Delete(a);
        return;
    } else {
        mismatch("op", op, "a known operation");
        cJSON_Delete(a);
        return;
    }
    if (expects_error(step, rc)) {
        cJSON_Delete(a);
        return;
    }
    settle(step, a);
}

static void run_case(cJSON *c, int index)
{
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(c, "spec");
    cJSON *step;
    int i = 0;
    redis_flush(&redis);
    saved_count = 0;
    cJSON_ArrayForEach(step, cJSON_GetObjectItemCaseSensitive(c, "steps")) {
        const char *op = str(step, "op", "");
        snprintf(where, sizeof where, "case %d '%s' step %d (%s)", index, str(c, "name", "?"), i++, op);
        if (!strcmp(op, "keys")) keys_step(step);
        else if (!strncmp(op, "config_", 7)) config_step(step, op);
        else if (spec) limiter_step(spec, step, op);
        else primitive_step(step, op);
    }
}

static cJSON *load(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    rewind(f);
    char *text = malloc((size_t)size + 1);
    if (fread(text, 1, (size_t)size, f) != (size_t)size) exit(2);
    text[size] = '\0';
    fclose(f);
    cJSON *doc = cJSON_Parse(text);
    free(text);
    if (!doc) {
        fprintf(stderr, "%s: invalid JSON\n", path);
        exit(2);
    }
    return doc;
}

int main(int argc, char **argv)
{
    rl_options o = RL_OPTIONS_INIT;
    recording = getenv("RL_VECTORS_RECORD") && !strcmp(getenv("RL_VECTORS_RECORD"), "1");
    if (argc < 2) {
        fprintf(stderr, "usage: run_vectors FILE.json...\n");
        return 2;
    }
    redis_start(&redis);
    for (int f = 1; f < argc; f++) {
        cJSON *doc = load(argv[f]), *c;
        o.key_prefix = str(doc, "prefix", "rl");
        o.client_id = str(doc, "client_id", NULL);
        all_fields = !strcmp(str(doc, "fields", ""), "all");
        client = open_client(&redis, &o);
        int index = 0;
        cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(doc, "cases")) run_case(c, index++);
        rl_client_close(client);
        if (recording) {
            char *out = cJSON_Print(doc);
            puts(out);
            free(out);
        }
        cJSON_Delete(doc);
    }
    redis_stop(&redis);
    if (recording) return test_failures ? 1 : 0;
    return test_summary("vectors");
}
