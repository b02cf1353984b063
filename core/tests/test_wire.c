/* What goes on the wire and comes back, against hiredis's own (no server):
 * replies read into one block (reply.c, and its fast path for integers)
 * equal hiredis's reader's, whole or fed byte by byte; commands formatted by
 * hand equal redisFormatCommandArgv's; keys built into a command's own text
 * (or allocated past it) equal rl_format_key's. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#define RL_HIREDIS_REPLIES /* hiredis's own replies, to compare with */
#include "internal.h"
#include <hiredis/sds.h>

static int same_reply(const redisReply *a, const redisReply *b)
{
    if (!a || !b) return a == b;
    if (a->type != b->type || a->integer != b->integer || a->len != b->len || a->elements != b->elements) return 0;
    if ((a->str == NULL) != (b->str == NULL) || (a->str && memcmp(a->str, b->str, a->len + 1))) return 0;
#if HIREDIS_MAJOR >= 1
    if (a->type == REDIS_REPLY_VERB && memcmp(a->vtype, b->vtype, 4)) return 0;
#endif
    for (size_t i = 0; i < a->elements; i++)
        if (!same_reply(a->element[i], b->element[i])) return 0;
    return 1;
}

/* Every reply of input, read by a reader of ours fed step bytes at a time
 * (0: all at once), equals hiredis's; returns the replies read (-1: an error,
 * which hiredis must report too). */
static int read_all(const char *input, size_t len, size_t step)
{
    redisReader *theirs = redisReaderCreate(), *ours = redisReaderCreate();
    rl_reply_use(ours);
    int count = 0, failed = redisReaderFeed(theirs, input, len) != REDIS_OK;
    void *expected[16];
    int expected_n = 0;
    while (!failed && expected_n < 16) {
        void *r = NULL;
        if (redisReaderGetReply(theirs, &r) != REDIS_OK) failed = 1;
        if (!r) break;
        expected[expected_n++] = r;
    }
    size_t fed = 0;
    for (;;) {
        size_t n = step && len - fed > step ? step : len - fed;
        if (n && redisReaderFeed(ours, input + fed, n) != REDIS_OK) break;
        fed += n;
        void *r = NULL;
        int rc;
        while ((rc = rl_reader_get_reply(ours, &r)) == REDIS_OK && r) {
            if (count >= expected_n || !same_reply(r, expected[count])) {
                fprintf(stderr, "  reply %d of %.*s differs (step %zu)\n", count, (int)len, input, step);
                CHECK(0);
            }
            count++;
            rl_reply_free(r);
        }
        if (rc != REDIS_OK) {
            CHECK(failed); /* hiredis refuses it too */
            count = -1;
            break;
        }
        if (fed == len) break;
    }
    if (count >= 0) CHECK_EQ(count, expected_n);
    for (int i = 0; i < expected_n; i++) freeReplyObject(expected[i]);
    redisReaderFree(theirs);
    redisReaderFree(ours);
    return count;
}

static void test_replies(void)
{
    static const char *inputs[] = {
        /* a limiter's reply, twice, then an integer */
        "*8\r\n:1\r\n:10\r\n:9\r\n:-1\r\n:100\r\n:0\r\n:1\r\n:0\r\n*8\r\n:0\r\n:10\r\n:0\r\n:99\r\n:100\r\n:0\r\n:0\r\n:0\r\n:42\r\n",
        ":-9223372036854775808\r\n:9223372036854775807\r\n:123456789012345678\r\n:-123456789012345678\r\n",
        ":0\r\n:-0\r\n", ":01\r\n", ":+1\r\n", ":\r\n", ":1x\r\n", "*1\r\n:1x\r\n", "*2\r\n:1\r\n", /* half */
        "*0\r\n", "*-1\r\n", "*65\r\n" /* more than the fast path takes */, "*01\r\n:1\r\n",
        "*2\r\n$3\r\nfoo\r\n:5\r\n", "*2\r\n*8\r\n:1\r\n:2\r\n:3\r\n:4\r\n:5\r\n:6\r\n:7\r\n:8\r\n-WRONGTYPE bad\r\n",
        "+OK\r\n", "-NOSCRIPT No matching script\r\n", "$-1\r\n", "$0\r\n\r\n", "*3\r\n$1\r\na\r\n*0\r\n$-1\r\n",
        "*1\r\n*1\r\n*1\r\n:7\r\n", "*2\r\n*0\r\n:1\r\n", "*1025\r\n",
        /* a batch of two decisions */
        "*2\r\n*8\r\n:1\r\n:10\r\n:9\r\n:-1\r\n:100\r\n:0\r\n:1\r\n:0\r\n*8\r\n:0\r\n:10\r\n:0\r\n:99\r\n:100\r\n:0\r\n:0\r\n:1\r\n",
#if HIREDIS_MAJOR >= 1
        ",3.5\r\n", "#t\r\n", "_\r\n", "=8\r\ntxt:abcd\r\n", "%1\r\n+a\r\n:1\r\n",
#endif
    };
    for (size_t i = 0; i < sizeof inputs / sizeof *inputs; i++) {
        size_t len = strlen(inputs[i]);
        for (size_t step = 0; step <= len; step++) read_all(inputs[i], len, step);
    }
    /* 64 integers (the fast path's most), and a big reply over many blocks */
    char big[64 * 24 + 16], *p = big;
    p += sprintf(p, "*64\r\n");
    for (int i = 0; i < 64; i++) p += sprintf(p, ":%d\r\n", i * 1000 - 5);
    CHECK_EQ(read_all(big, strlen(big), 0), 1);
    CHECK_EQ(read_all(big, strlen(big), 7), 1);
    /* a batch of 1,000 decisions (more than its first guess of room) */
    char *batch = malloc(1000 * 64 * 12 + 16);
    p = batch + sprintf(batch, "*1000\r\n");
    for (int i = 0; i < 1000; i++) {
        p += sprintf(p, i % 3 ? "*8\r\n" : "*64\r\n");
        for (int k = 0; k < (i % 3 ? 8 : 64); k++) p += sprintf(p, ":%d\r\n", i - k);
    }
    CHECK_EQ(read_all(batch, (size_t)(p - batch), 0), 1);
    CHECK_EQ(read_all(batch, (size_t)(p - batch), 1000), 1);
    free(batch);
    size_t size = 2000 * 40 + 100000 + 64;
    char *huge = malloc(size);
    p = huge + sprintf(huge, "*2001\r\n");
    for (int i = 0; i < 2000; i++) p += sprintf(p, i % 2 ? "$5\r\nv%04d\r\n" : ":%d\r\n", i);
    p += sprintf(p, "$100000\r\n");
    memset(p, 'x', 100000);
    p += 100000;
    p += sprintf(p, "\r\n");
    CHECK_EQ(read_all(huge, (size_t)(p - huge), 0), 1);
    CHECK_EQ(read_all(huge, (size_t)(p - huge), 4093), 1);
    free(huge);
    /* what was read is dropped from the buffer, as hiredis does */
    redisReader *r = redisReaderCreate();
    rl_reply_use(r);
    for (int i = 0; i < 1000; i++) {
        const char *one = "*8\r\n:1\r\n:10\r\n:9\r\n:-1\r\n:100\r\n:0\r\n:1\r\n:0\r\n";
        void *got = NULL;
        CHECK_EQ(redisReaderFeed(r, one, strlen(one)), REDIS_OK);
        CHECK_EQ(rl_reader_get_reply(r, &got), REDIS_OK);
        CHECK(got != NULL && ((redisReply *)got)->elements == 8);
        rl_reply_free(got);
    }
    CHECK(r->len < 2048);
    redisReaderFree(r);
}

static void test_commands(void)
{
    static const int64_t ints[] = {0,         1,          -1,         9,          10,        -10,       99,
                                   100,       999,        1000,       1000000000, INT64_MAX, INT64_MIN, 1234567890123456789,
                                   -99999999, 4294967296, 1000000000000000000};
    rl_cmd cmd;
    rl_cmd_init(&cmd);
    rl_cmd_cstr(&cmd, "EVALSHA");
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++) {
        char want[32];
        snprintf(want, sizeof want, "%" PRId64, ints[i]);
        rl_cmd_int(&cmd, ints[i]);
        CHECK(!strcmp(cmd.argv[cmd.argc - 1], want));
        CHECK_EQ(cmd.lens[cmd.argc - 1], strlen(want));
    }
    /* and an argument of every length to 1100 (headers of 1 to 4 digits) */
    char *text = malloc(1100);
    memset(text, 'k', 1100);
    redisContext out = {0}, *ctx = &out; /* only its output buffer */
    out.obuf = sdsempty();
    for (size_t n = 0; n <= 1100; n += n < 120 ? 1 : 97) {
        rl_cmd_str(&cmd, text, n);
        char *theirs = NULL;
        long long len = redisFormatCommandArgv(&theirs, cmd.argc, cmd.argv, cmd.lens);
        sdsclear(ctx->obuf);
        CHECK_EQ(rl_append_command(ctx, cmd.argc, cmd.argv, cmd.lens), REDIS_OK);
        CHECK_EQ((long long)sdslen(ctx->obuf), len);
        CHECK(!memcmp(ctx->obuf, theirs, (size_t)len));
        redisFreeCommand(theirs);
        cmd.argc--;
    }
    sdsfree(out.obuf);
    free(text);
    rl_cmd_free(&cmd);
}

static void test_keys_in_commands(void)
{
    rl_client *c;
    rl_options o = RL_OPTIONS_INIT;
    o.on_error = RL_ON_ERROR_ALLOW; /* no server: only its prefix and id */
    o.client_id = "0123456789abcdef0123456789abcdef";
    CHECK_OK(rl_client_open(&c, "redis://127.0.0.1:1", &o));
    char *long_id = malloc(300);
    memset(long_id, 'i', 299);
    long_id[299] = '\0';
    const char *ids[] = {"u", "user:42 {x}%", long_id, "10.0.0.1"};
    rl_cmd cmd;
    rl_cmd_init(&cmd);
    /* many keys: the first in the command's text, later ones past it allocated */
    for (int k = 0; k < 24; k++) {
        const char *id = ids[k % 4], *owner = k % 3 ? NULL : o.client_id;
        char suffix[16];
        snprintf(suffix, sizeof suffix, "gcra:%d", k);
        rl_cmd_entity_key(&cmd, c, k % 5 ? "api" : "sms:eu", id, owner, suffix);
        CHECK(!cmd.failed);
        char *tag = rl_entity_tag(k % 5 ? "api" : "sms:eu", id, owner);
        char want[1024];
        snprintf(want, sizeof want, "rl:{%s}:%s", tag, suffix);
        free(tag);
        CHECK(!strcmp(cmd.argv[k], want));
        CHECK_EQ(cmd.lens[k], strlen(want));
        if (k == 0) CHECK_EQ(cmd.slot, rl_key_slot(want, strlen(want)));
    }
    CHECK(cmd.text_used <= sizeof cmd.text);
    CHECK(cmd.owned[23] != NULL); /* past the text */
    rl_cmd_free(&cmd);
    free(long_id);
    rl_client_close(c);
}

int main(void)
{
    test_replies();
    test_commands();
    test_keys_in_commands();
    return test_summary("wire");
}
