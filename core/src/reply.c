/* Replies read on our connections. hiredis's reader allocates one object per
 * element (a limiter's 8-integer reply: ten mallocs and ten frees, a third
 * of a pipelined decision's client instructions); ours put a whole reply in
 * one block, with more blocks chained only for big replies. Same redisReply
 * structs, so every decoder reads them as before; freed with rl_reply_free
 * (the root only: its elements go with it), never freeReplyObject. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/sds.h>

#include "internal.h"

/* A limiter's reply (root, 8 element pointers, 8 integers) fits the first. */
#define FIRST_BLOCK 1024

typedef struct block {
    struct block *next;
} block;

typedef struct {
    block *more;  /* blocks past the first, newest first */
    char *free_at;
    size_t left;
    size_t grown; /* the size of the last block added */
    redisReply root;
} head;

#define ALIGN(n) (((n) + 15) & ~(size_t)15)

static head *head_of(redisReply *root)
{
    return (head *)((char *)root - offsetof(head, root));
}

/* size bytes in root's blocks; NULL: no memory */
static void *take(head *h, size_t size)
{
    size = ALIGN(size);
    if (size > h->left) {
        /* doubling up to 64 KB; a bigger piece (a long string) gets its own size */
        size_t want = h->grown * 2 < 65536 ? h->grown * 2 : 65536;
        if (want < size) want = size;
        block *b = malloc(ALIGN(sizeof *b) + want);
        if (!b) return NULL;
        b->next = h->more;
        h->more = b;
        h->grown = want < 65536 ? want : 65536;
        h->free_at = (char *)b + ALIGN(sizeof *b);
        h->left = want;
    }
    void *p = h->free_at;
    h->free_at += size;
    h->left -= size;
    return p;
}

/* A reply's first block of size bytes (its head, then room); NULL: no memory */
static head *new_head(size_t size)
{
    head *h = malloc(size);
    if (!h) return NULL;
    h->more = NULL;
    h->free_at = (char *)h + ALIGN(sizeof(head));
    h->left = size - ALIGN(sizeof(head));
    h->grown = size;
    return h;
}

/* A new reply object for task (extra: bytes it will need besides), hung
 * into its parent; the first of a reply starts its block. */
static redisReply *new_object(const redisReadTask *task, int type, size_t extra)
{
    redisReply *r;
    const redisReadTask *top = task;
    while (top->parent) top = top->parent;
    if (top == task) {
        size_t size = ALIGN(sizeof(head)) + extra;
        if (size < FIRST_BLOCK) size = FIRST_BLOCK;
        head *h = new_head(size);
        if (!h) return NULL;
        r = &h->root;
    } else if (!(r = take(head_of(top->obj), sizeof *r))) {
        return NULL;
    }
    memset(r, 0, sizeof *r);
    r->type = type;
    if (task->parent) ((redisReply *)task->parent->obj)->element[task->idx] = r;
    return r;
}

/* len bytes of text (a NUL after them) in r's reply */
static char *text_for(const redisReadTask *task, redisReply *r, const char *text, size_t len)
{
    const redisReadTask *top = task;
    while (top->parent) top = top->parent;
    char *s = take(head_of(top == task ? r : top->obj), len + 1);
    if (!s) return NULL;
    memcpy(s, text, len);
    s[len] = '\0';
    return s;
}

static void *create_string(const redisReadTask *task, char *str, size_t len)
{
    redisReply *r = new_object(task, task->type, ALIGN(len + 1));
    if (!r) return NULL;
#ifdef REDIS_REPLY_VERB
    if (task->type == REDIS_REPLY_VERB && len >= 4) { /* "txt:" before the text */
        memcpy(r->vtype, str, 3);
        r->vtype[3] = '\0';
        str += 4;
        len -= 4;
    }
#endif
    if (!(r->str = text_for(task, r, str, len))) return NULL;
    r->len = len;
    return r;
}

#if HIREDIS_MAJOR >= 1
static void *create_array(const redisReadTask *task, size_t elements)
#else
static void *create_array(const redisReadTask *task, int elements)
#endif
{
    size_t n = (size_t)elements;
    if (n > SIZE_MAX / 2 / sizeof(redisReply *)) return NULL;
    /* a short array's elements too (a limiter's integers) */
    size_t extra = ALIGN(n * sizeof(redisReply *)) + (n <= 64 ? n * ALIGN(sizeof(redisReply)) : 0);
    redisReply *r = new_object(task, task->type, extra);
    if (!r) return NULL;
    if (n) {
        const redisReadTask *top = task;
        while (top->parent) top = top->parent;
        if (!(r->element = take(head_of(top == task ? r : top->obj), n * sizeof *r->element))) return NULL;
        memset(r->element, 0, n * sizeof *r->element);
    }
    r->elements = n;
    return r;
}

static void *create_integer(const redisReadTask *task, long long value)
{
    redisReply *r = new_object(task, REDIS_REPLY_INTEGER, 0);
    if (r) r->integer = value;
    return r;
}

static void *create_nil(const redisReadTask *task)
{
    return new_object(task, REDIS_REPLY_NIL, 0);
}

#if HIREDIS_MAJOR >= 1
static void *create_double(const redisReadTask *task, double value, char *str, size_t len)
{
    redisReply *r = new_object(task, REDIS_REPLY_DOUBLE, ALIGN(len + 1));
    if (!r) return NULL;
    r->dval = value;
    if (!(r->str = text_for(task, r, str, len))) return NULL;
    r->len = len;
    return r;
}

static void *create_bool(const redisReadTask *task, int value)
{
    redisReply *r = new_object(task, REDIS_REPLY_BOOL, 0);
    if (r) r->integer = value != 0;
    return r;
}
#endif

void rl_reply_free(void *reply)
{
    if (!reply) return;
    head *h = head_of(reply);
    for (block *b = h->more, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    free(h);
}

/* bytes a copy of r takes after the head */
static size_t copy_size(const redisReply *r)
{
    size_t size = ALIGN(sizeof *r) + (r->str ? ALIGN(r->len + 1) : 0) + ALIGN(r->elements * sizeof *r->element);
    for (size_t i = 0; i < r->elements; i++)
        if (r->element[i]) size += copy_size(r->element[i]);
    return size;
}

static redisReply *copy_into(head *h, redisReply *to, const redisReply *r)
{
    *to = *r;
    to->element = NULL;
    if (r->str) to->str = memcpy(take(h, r->len + 1), r->str, r->len + 1);
    if (r->elements) to->element = take(h, r->elements * sizeof *to->element);
    for (size_t i = 0; i < r->elements; i++)
        to->element[i] = r->element[i] ? copy_into(h, take(h, sizeof *r), r->element[i]) : NULL;
    return to;
}

redisReply *rl_reply_copy(const redisReply *r)
{
    head *h = new_head(ALIGN(sizeof(head)) + copy_size(r));
    if (!h) return NULL;
    return copy_into(h, &h->root, r);
}

static redisReplyObjectFunctions functions = {
    .createString = create_string,
    .createArray = create_array,
    .createInteger = create_integer,
#if HIREDIS_MAJOR >= 1
    .createDouble = create_double,
    .createBool = create_bool,
#endif
    .createNil = create_nil,
    .freeObject = rl_reply_free,
};

void rl_reply_use(redisReader *reader)
{
    reader->fn = &functions;
}

/* ---- the common replies without the general reader ---------------------- */

/* A canonical integer line ("0", or an optional '-' then 1 to 18 digits
 * without a leading zero: no overflow) ending in CRLF, starting at p; its end
 * past the CRLF, or NULL (anything else: the general reader decides). */
static inline const char *int_line(const char *p, const char *end, long long *out)
{
    int negative = p < end && *p == '-';
    p += negative;
    const char *digits = p, *limit = end - p > 19 ? p + 19 : end;
    unsigned long long v = 0;
    for (unsigned d; p < limit && (d = (unsigned)(unsigned char)*p - '0') < 10; p++) v = v * 10 + d;
    size_t n = (size_t)(p - digits);
    if (n == 0 || n > 18 || (*digits == '0' && (n > 1 || negative)) || end - p < 2 || p[0] != '\r' || p[1] != '\n')
        return NULL;
    *out = negative ? -(long long)v : (long long)v;
    return p + 2;
}

/* The n items of an array at p, whole before end, into *to (what it holds
 * taken from h): integers, or (depth 0) arrays of 1 to 64 integers. Returns
 * the end of their text; NULL for anything else. */
static const char *fast_array(head *h, redisReply *to, size_t n, const char *p, const char *end, int depth)
{
    long long v;
    redisReply **element = take(h, n * sizeof *element), *items = take(h, n * sizeof *items);
    if (!element || !items) return NULL;
    to->type = REDIS_REPLY_ARRAY;
    to->elements = n;
    to->element = element;
    for (size_t i = 0; i < n; i++) {
        redisReply *e = element[i] = &items[i];
        memset(e, 0, sizeof *e);
        if (p == end) return NULL;
        if (*p == ':') {
            if (!(p = int_line(p + 1, end, &v))) return NULL;
            e->type = REDIS_REPLY_INTEGER;
            e->integer = v;
        } else if (*p != '*' || depth || !(p = int_line(p + 1, end, &v)) || v < 1 || v > 64 ||
                   !(p = fast_array(h, e, (size_t)v, p, end, 1))) {
            return NULL;
        }
    }
    return p;
}

/* The replies of limit.lua whole in [p, end): an integer, an array of
 * integers (a decision's), or an array of up to 1024 of those (a batch's).
 * The reply, *used its bytes; NULL for anything else (the general reader
 * decides). */
static redisReply *fast_reply(const char *p, const char *end, size_t *used)
{
    long long v;
    const char *after;
    if (p == end || (*p != ':' && *p != '*') || !(after = int_line(p + 1, end, &v))) return NULL;
    int array = *p == '*';
    if (array && (v < 1 || v > 1024)) return NULL;
    /* room for all of it, as far as the first element tells */
    size_t n = array ? (size_t)v : 0, each = ALIGN(sizeof(redisReply)) + 8;
    if (after < end && *after == '*') each += 8 * each;
    head *h = new_head(ALIGN(sizeof(head)) + n * each + 32);
    if (!h) return NULL;
    memset(&h->root, 0, sizeof h->root);
    if (!array) {
        h->root.type = REDIS_REPLY_INTEGER;
        h->root.integer = v;
    } else if (!(after = fast_array(h, &h->root, n, after, end, 0))) {
        rl_reply_free(&h->root);
        return NULL;
    }
    *used = (size_t)(after - p);
    return &h->root;
}

int rl_reader_get_reply(redisReader *reader, void **reply)
{
    size_t used;
    redisReply *r;
    *reply = NULL;
    /* only between replies, on a reader of ours */
    int between = !reader->err && reader->ridx == -1 && !reader->reply && reader->fn == &functions;
    /* nothing to read: hiredis would start a reply (and stay mid-reply) */
    if (between && reader->pos == reader->len) return REDIS_OK;
    if (!between || !(r = fast_reply(reader->buf + reader->pos, reader->buf + reader->len, &used)))
        return redisReaderGetReply(reader, reply);
    reader->pos += used;
    /* as hiredis does: drop what was read once it is 1 KB */
    if (reader->pos >= 1024) {
        sdsrange(reader->buf, (ssize_t)reader->pos, -1);
        reader->pos = 0;
        reader->len = sdslen(reader->buf);
    }
    *reply = r;
    return REDIS_OK;
}
