/* Client: URL parsing, the connection pool, and running commands. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/sds.h>

#include "internal.h"

void rl_options_init(rl_options *options)
{
    rl_options defaults = RL_OPTIONS_INIT;
    *options = defaults;
}

const char *rl_client_prefix(const rl_client *client)
{
    return client->prefix;
}

/* ---- URL parsing --------------------------------------------------------- */

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    c = tolower(c);
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* Copies [s, s+len) percent-decoded. */
static int dup_decoded(const char *s, size_t len, char **out)
{
    char *d = malloc(len + 1);
    size_t j = 0;
    if (!d) return rl_fail(RL_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '%' && i + 2 < len && hexval((unsigned char)s[i + 1]) >= 0 &&
            hexval((unsigned char)s[i + 2]) >= 0) {
            d[j++] = (char)(hexval((unsigned char)s[i + 1]) * 16 + hexval((unsigned char)s[i + 2]));
            i += 2;
        } else {
            d[j++] = s[i];
        }
    }
    d[j] = '\0';
    *out = d;
    return RL_OK;
}

static int parse_uint(const char *s, size_t len, long max, long *out)
{
    long v = 0;
    if (len == 0 || len > 9) return -1;
    for (size_t i = 0; i < len; i++) {
        if (!isdigit((unsigned char)s[i])) return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v > max) return -1;
    *out = v;
    return 0;
}

static int parse_tcp_url(rl_client *c, const char *url, const char *rest)
{
    const char *end = rest + strlen(rest);
    const char *slash = strchr(rest, '/');
    const char *hostport_end = slash ? slash : end;
    const char *at = NULL;
    long v;
    int rc;

    for (const char *p = rest; p < hostport_end; p++)
        if (*p == '@') at = p; /* the last '@': passwords may contain one */
    if (strchr(rest, '?') || strchr(rest, '#'))
        return rl_fail(RL_ERR_INVALID, "invalid Redis URL '%s': query strings are not supported", url);
    if (at) {
        const char *colon = memchr(rest, ':', (size_t)(at - rest));
        if (colon) {
            if (colon > rest && (rc = dup_decoded(rest, (size_t)(colon - rest), &c->user))) return rc;
            if ((rc = dup_decoded(colon + 1, (size_t)(at - colon - 1), &c->password))) return rc;
        } else if (at > rest) {
            /* redis://secret@host: a bare userinfo is the password, as redis-py reads it */
            if ((rc = dup_decoded(rest, (size_t)(at - rest), &c->password))) return rc;
        }
        rest = at + 1;
    }
    const char *host = rest, *host_end, *port = NULL;
    if (*rest == '[') {
        host = rest + 1;
        host_end = memchr(host, ']', (size_t)(hostport_end - host));
        if (!host_end) return rl_fail(RL_ERR_INVALID, "invalid Redis URL '%s': unclosed '['", url);
        if (host_end + 1 < hostport_end) {
            if (host_end[1] != ':') return rl_fail(RL_ERR_INVALID, "invalid Redis URL '%s': junk after ']'", url);
            port = host_end + 2;
        }
    } else {
        host_end = memchr(rest, ':', (size_t)(hostport_end - rest));
        if (host_end) port = host_end + 1;
        else host_end = hostport_end;
    }
    if (host_end == host) return rl_fail(RL_ERR_INVALID, "invalid Redis URL '%s': no host", url);
    c->host = strndup(host, (size_t)(host_end - host));
    if (!c->host) return rl_fail(RL_ERR_NOMEM, "out of memory");
    c->port = 6379;
    if (port) {
        if (parse_uint(port, (size_t)(hostport_end - port), 65535, &v) || v == 0)
            return rl_fail(RL_ERR_INVALID, "invalid Redis URL '%s': bad port", url);
        c->port = (int)v;
    }
    if (slash && slash + 1 < end) {
        if (parse_uint(slash + 1, (size_t)(end - slash - 1), INT_MAX, &v))
            return rl_fail(RL_ERR_INVALID, "invalid Redis URL '%s': database must be a number", url);
        c->db = (int)v;
    }
    return RL_OK;
}

static int parse_unix_url(rl_client *c, const char *url, const char *rest)
{
    const char *q = strchr(rest, '?');
    size_t len = q ? (size_t)(q - rest) : strlen(rest);
    long v;
    if (len == 0 || rest[0] != '/')
        return rl_fail(RL_ERR_INVALID, "invalid Redis URL '%s': expected unix:///absolute/path", url);
    c->unix_path = strndup(rest, len);
    if (!c->unix_path) return rl_fail(RL_ERR_NOMEM, "out of memory");
    if (q) {
        if (strncmp(q + 1, "db=", 3) || parse_uint(q + 4, strlen(q + 4), INT_MAX, &v))
            return rl_fail(RL_ERR_INVALID, "invalid Redis URL '%s': only ?db=N is supported", url);
        c->db = (int)v;
    }
    return RL_OK;
}

static int parse_url(rl_client *c, const char *url)
{
    if (!url || !*url) return rl_fail(RL_ERR_INVALID, "Redis URL is empty");
    if (!strncmp(url, "redis://", 8)) return parse_tcp_url(c, url, url + 8);
    if (!strncmp(url, "unix://", 7)) return parse_unix_url(c, url, url + 7);
    if (!strncmp(url, "rediss://", 9))
        return rl_fail(RL_ERR_INVALID, "invalid Redis URL '%s': TLS (rediss://) is not supported", url);
    return rl_fail(RL_ERR_INVALID, "invalid Redis URL '%s': expected redis:// or unix://", url);
}

/* ---- connections ----------------------------------------------------------- */

static struct timeval ms_to_tv(int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    return tv;
}

int rl_conn_error(redisContext *ctx, const char *what)
{
    int err = errno;
    if (!ctx) return rl_fail(RL_ERR_NOMEM, "%s: out of memory", what);
    if (ctx->err == REDIS_ERR_IO &&
        (err == EAGAIN || err == EWOULDBLOCK || err == ETIMEDOUT || err == EINPROGRESS ||
         strstr(ctx->errstr, "temporarily unavailable") || strstr(ctx->errstr, "timed out")))
        return rl_fail(RL_ERR_TIMEOUT, "%s: timed out (%s)", what, ctx->errstr);
    if (ctx->err == REDIS_ERR_PROTOCOL)
        return rl_fail(RL_ERR_PROTOCOL, "%s: protocol error (%s)", what, ctx->errstr);
    if (ctx->err == REDIS_ERR_OOM) return rl_fail(RL_ERR_NOMEM, "%s: out of memory", what);
    return rl_fail(RL_ERR_CONNECTION, "%s: %s", what, ctx->err ? ctx->errstr : "connection lost");
}

/* hiredis 0.14 flushes with write(2): a peer that hung up would raise SIGPIPE
 * and kill a program that does not ignore it. We send the output buffer
 * ourselves with MSG_NOSIGNAL and leave only the reading to hiredis. */
static int flush_output(redisContext *ctx)
{
    size_t len;
    while (!ctx->err && (len = sdslen(ctx->obuf)) > 0) {
        ssize_t n = send(ctx->fd, ctx->obuf, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) continue;
            int err = errno;
            ctx->err = REDIS_ERR_IO;
            snprintf(ctx->errstr, sizeof ctx->errstr, "%s", strerror(err));
            errno = err;
            return REDIS_ERR;
        }
        if ((size_t)n < len) {
            sdsrange(ctx->obuf, (int)n, -1);
        } else {
            sdsfree(ctx->obuf);
            if (!(ctx->obuf = sdsempty())) ctx->err = REDIS_ERR_OOM;
        }
    }
    return ctx->err ? REDIS_ERR : REDIS_OK;
}

redisReply *rl_command(redisContext *ctx, int argc, const char **argv, const size_t *lens)
{
    void *reply = NULL;
    if (redisAppendCommandArgv(ctx, argc, argv, lens) != REDIS_OK || flush_output(ctx) != REDIS_OK ||
        redisGetReply(ctx, &reply) != REDIS_OK)
        return NULL;
    return reply;
}

static int simple_command(redisContext *ctx, int argc, const char **argv, const char *what)
{
    redisReply *r = rl_command(ctx, argc, argv, NULL);
    int rc = RL_OK;
    if (!r) return rl_conn_error(ctx, what);
    if (r->type == REDIS_REPLY_ERROR) rc = rl_fail(RL_ERR_REDIS, "%s: %s", what, r->str);
    freeReplyObject(r);
    return rc;
}

static int connect_one(rl_client *c, redisContext **out)
{
    struct timeval tv = ms_to_tv(c->options.connect_timeout_ms);
    redisContext *ctx = c->unix_path ? redisConnectUnixWithTimeout(c->unix_path, tv)
                                     : redisConnectWithTimeout(c->host, c->port, tv);
    int rc;
    if (!ctx || ctx->err) {
        char where[300];
        if (c->unix_path) snprintf(where, sizeof where, "connect to %s", c->unix_path);
        else snprintf(where, sizeof where, "connect to %s:%d", c->host, c->port);
        rc = rl_conn_error(ctx, where);
        redisFree(ctx);
        return rc;
    }
    if (redisSetTimeout(ctx, ms_to_tv(c->options.command_timeout_ms)) != REDIS_OK) {
        rc = rl_conn_error(ctx, "set timeout");
        redisFree(ctx);
        return rc;
    }
    if (!c->unix_path) redisEnableKeepAlive(ctx);
    if (c->password) {
        const char *with_user[3] = {"AUTH", c->user, c->password};
        const char *without_user[2] = {"AUTH", c->password};
        if ((rc = c->user ? simple_command(ctx, 3, with_user, "authenticate")
                          : simple_command(ctx, 2, without_user, "authenticate"))) {
            redisFree(ctx);
            return rc;
        }
    }
    if (c->db) {
        char db[16];
        snprintf(db, sizeof db, "%d", c->db);
        const char *select[2] = {"SELECT", db};
        if ((rc = simple_command(ctx, 2, select, "select database"))) {
            redisFree(ctx);
            return rc;
        }
    }
    *out = ctx;
    return RL_OK;
}

int rl_conn_open_dedicated(rl_client *client, redisContext **out)
{
    return connect_one(client, out);
}

/* An idle connection whose peer hung up (Redis restarted) reads EOF at once;
 * spotting that here costs one syscall and no round trip, and means the
 * command we are about to send is never lost to a stale socket. */
static int still_open(redisContext *ctx)
{
    char byte;
    ssize_t n;
    if (ctx->err) return 0;
    n = recv(ctx->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

/* A child process must not talk on its parent's sockets (gunicorn,
 * multiprocessing): the first call after fork() forgets them. */
static void forget_parent_connections(rl_client *c)
{
    pid_t me = getpid();
    pid_t seen = __atomic_load_n(&c->pid, __ATOMIC_ACQUIRE);
    if (seen == me) return;
    if (seen != 0 && __atomic_compare_exchange_n(&c->pid, &seen, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        /* the parent's threads may have held the mutex at fork time */
        pthread_mutex_init(&c->mutex, NULL);
        pthread_cond_init(&c->available, NULL);
        /* closing the child's copies of the sockets leaves the parent's open */
        for (int i = 0; i < c->idle_count; i++) redisFree(c->idle[i]);
        c->idle_count = 0;
        c->open_count = 0;
        __atomic_store_n(&c->pid, me, __ATOMIC_RELEASE);
        return;
    }
    while (__atomic_load_n(&c->pid, __ATOMIC_ACQUIRE) != me) sched_yield();
}

int64_t rl_monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int rl_conn_get(rl_client *c, redisContext **out)
{
    redisContext *ctx = NULL;
    int rc;
    forget_parent_connections(c);
    pthread_mutex_lock(&c->mutex);
    if (c->idle_count == 0 && c->open_count >= c->options.pool_size) {
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += c->options.command_timeout_ms / 1000;
        deadline.tv_nsec += (long)(c->options.command_timeout_ms % 1000) * 1000000L;
        if (deadline.tv_nsec >= 1000000000L) {
            deadline.tv_sec++;
            deadline.tv_nsec -= 1000000000L;
        }
        while (c->idle_count == 0 && c->open_count >= c->options.pool_size) {
            if (pthread_cond_timedwait(&c->available, &c->mutex, &deadline) == ETIMEDOUT &&
                c->idle_count == 0 && c->open_count >= c->options.pool_size) {
                pthread_mutex_unlock(&c->mutex);
                return rl_fail(RL_ERR_TIMEOUT, "all %d pooled connections stayed busy for %d ms",
                               c->options.pool_size, c->options.command_timeout_ms);
            }
        }
    }
    if (c->idle_count > 0) ctx = c->idle[--c->idle_count];
    else c->open_count++;
    pthread_mutex_unlock(&c->mutex);

    if (ctx && still_open(ctx)) {
        *out = ctx;
        return RL_OK;
    }
    redisFree(ctx);
    rc = connect_one(c, &ctx);
    if (rc) {
        pthread_mutex_lock(&c->mutex);
        c->open_count--;
        pthread_cond_signal(&c->available);
        pthread_mutex_unlock(&c->mutex);
        return rc;
    }
    *out = ctx;
    return RL_OK;
}

void rl_conn_put(rl_client *c, redisContext *ctx)
{
    pthread_mutex_lock(&c->mutex);
    if (ctx->err || c->idle_count >= c->options.pool_size) {
        redisFree(ctx); /* broken: the next call connects afresh */
        c->open_count--;
    } else {
        c->idle[c->idle_count++] = ctx;
    }
    pthread_cond_signal(&c->available);
    pthread_mutex_unlock(&c->mutex);
}

/* ---- open / close ------------------------------------------------------------ */

static void free_client(rl_client *c)
{
    for (int i = 0; i < c->idle_count; i++) redisFree(c->idle[i]);
    free(c->idle);
    free(c->host);
    free(c->unix_path);
    free(c->user);
    free(c->password);
    free(c->prefix);
    pthread_cond_destroy(&c->available);
    pthread_mutex_destroy(&c->mutex);
    free(c);
}

int rl_client_open(rl_client **out, const char *url, const rl_options *options)
{
    rl_options defaults = RL_OPTIONS_INIT;
    rl_client *c;
    redisContext *first;
    int rc;

    rl_clear_error();
    if (!out) return rl_fail(RL_ERR_INVALID, "out must not be NULL");
    *out = NULL;
    if (!options) options = &defaults;
    if (options->connect_timeout_ms <= 0 || options->command_timeout_ms <= 0)
        return rl_fail(RL_ERR_INVALID, "timeouts must be positive (got connect %d ms, command %d ms)",
                       options->connect_timeout_ms, options->command_timeout_ms);
    if (options->pool_size <= 0 || options->pool_size > 1024)
        return rl_fail(RL_ERR_INVALID, "pool_size must be in 1..1024 (got %d)", options->pool_size);
    if (options->on_error < RL_ON_ERROR_RAISE || options->on_error > RL_ON_ERROR_DENY)
        return rl_fail(RL_ERR_INVALID, "on_error must be RAISE, ALLOW or DENY");
    if (!options->key_prefix || !*options->key_prefix)
        return rl_fail(RL_ERR_INVALID, "key_prefix must not be empty");
    if (strlen(options->key_prefix) > 256) return rl_fail(RL_ERR_INVALID, "key_prefix is longer than 256 bytes");

    c = calloc(1, sizeof *c);
    if (!c) return rl_fail(RL_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&c->mutex, NULL);
    pthread_cond_init(&c->available, NULL);
    c->options = *options;
    c->pid = getpid();
    c->prefix = strdup(options->key_prefix);
    c->options.key_prefix = c->prefix;
    c->idle = calloc((size_t)options->pool_size, sizeof *c->idle);
    if (!c->prefix || !c->idle) {
        free_client(c);
        return rl_fail(RL_ERR_NOMEM, "out of memory");
    }
    if ((rc = parse_url(c, url)) || (rc = connect_one(c, &first))) {
        free_client(c);
        return rc;
    }
    c->idle[c->idle_count++] = first;
    c->open_count = 1;
    *out = c;
    return RL_OK;
}

void rl_client_close(rl_client *client)
{
    if (client) free_client(client);
}

/* ---- commands ----------------------------------------------------------------- */

void rl_cmd_init(rl_cmd *cmd)
{
    cmd->argc = 0;
    cmd->failed = 0;
    cmd->script = -1;
}

void rl_cmd_free(rl_cmd *cmd)
{
    for (int i = 0; i < cmd->argc; i++) free(cmd->owned[i]);
    cmd->argc = 0;
}

static void push_arg(rl_cmd *cmd, const char *s, size_t len, char *owned)
{
    if (cmd->argc >= RL_CMD_MAX_ARGS || !s) {
        free(owned);
        cmd->failed = 1;
        return;
    }
    cmd->argv[cmd->argc] = s;
    cmd->lens[cmd->argc] = len;
    cmd->owned[cmd->argc] = owned;
    cmd->argc++;
}

void rl_cmd_str(rl_cmd *cmd, const char *s, size_t len)
{
    push_arg(cmd, s, len, NULL);
}

void rl_cmd_cstr(rl_cmd *cmd, const char *s)
{
    push_arg(cmd, s, s ? strlen(s) : 0, NULL);
}

void rl_cmd_int(rl_cmd *cmd, int64_t value)
{
    if (cmd->argc >= RL_CMD_MAX_ARGS) {
        cmd->failed = 1;
        return;
    }
    char *s = cmd->ints[cmd->argc];
    int n = snprintf(s, sizeof cmd->ints[0], "%lld", (long long)value);
    push_arg(cmd, s, (size_t)n, NULL);
}

int rl_format_key(char *buf, size_t size, const rl_client *client, const char *tag, const char *suffix)
{
    return snprintf(buf, size, "%s:{%s}:%s", client->prefix, tag, suffix);
}

void rl_cmd_key(rl_cmd *cmd, const rl_client *client, const char *tag, const char *suffix)
{
    size_t len = (size_t)rl_format_key(NULL, 0, client, tag, suffix) + 1;
    char *s = malloc(len);
    if (!s) {
        cmd->failed = 1;
        return;
    }
    push_arg(cmd, s, (size_t)rl_format_key(s, len, client, tag, suffix), s);
}

void rl_cmd_script(rl_cmd *cmd, int script, int nkeys)
{
    cmd->script = script;
    rl_cmd_cstr(cmd, "EVALSHA");
    rl_cmd_cstr(cmd, rl_scripts[script].sha1);
    rl_cmd_int(cmd, nkeys);
}

static int is_noscript(const redisReply *r)
{
    return r && r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "NOSCRIPT", 8);
}

static void free_replies(redisReply **replies, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (replies[i]) freeReplyObject(replies[i]);
        replies[i] = NULL;
    }
}

static int send_and_read(redisContext *ctx, rl_cmd *cmds, size_t n, redisReply **replies)
{
    for (size_t i = 0; i < n; i++) {
        if (redisAppendCommandArgv(ctx, cmds[i].argc, cmds[i].argv, cmds[i].lens) != REDIS_OK) {
            /* half a pipeline sits in the output buffer: never reuse */
            if (!ctx->err) ctx->err = REDIS_ERR_OOM;
            return rl_conn_error(ctx, "send command");
        }
    }
    if (flush_output(ctx) != REDIS_OK) return rl_conn_error(ctx, "send command");
    for (size_t i = 0; i < n; i++) {
        void *r = NULL;
        if (redisGetReply(ctx, &r) != REDIS_OK) {
            free_replies(replies, n);
            /* a pipeline cut short leaves replies in flight: never reuse */
            if (!ctx->err) ctx->err = REDIS_ERR_IO;
            return rl_conn_error(ctx, "read reply");
        }
        replies[i] = r;
    }
    return RL_OK;
}

/* NOSCRIPT means the script did not run: load it and send that call again. */
static int reload_scripts(redisContext *ctx, rl_cmd *cmds, size_t n, redisReply **replies)
{
    int loaded[RL_SCRIPT_COUNT] = {0};
    for (size_t i = 0; i < n; i++) {
        if (!is_noscript(replies[i]) || loaded[cmds[i].script]) continue;
        const rl_script_def *def = &rl_scripts[cmds[i].script];
        const char *argv[3] = {"SCRIPT", "LOAD", def->text};
        size_t lens[3] = {6, 4, def->length};
        redisReply *r = rl_command(ctx, 3, argv, lens);
        if (!r) return rl_conn_error(ctx, "SCRIPT LOAD");
        int bad = r->type != REDIS_REPLY_STRING || strcmp(r->str, def->sha1) != 0;
        int rc = bad ? rl_fail(RL_ERR_REDIS, "SCRIPT LOAD %s: %s", def->name,
                               r->type == REDIS_REPLY_ERROR ? r->str : "unexpected SHA1")
                     : RL_OK;
        freeReplyObject(r);
        if (rc) return rc;
        loaded[cmds[i].script] = 1;
    }
    for (size_t i = 0; i < n; i++) {
        if (!is_noscript(replies[i])) continue;
        freeReplyObject(replies[i]);
        replies[i] = NULL;
        int rc = send_and_read(ctx, &cmds[i], 1, &replies[i]);
        if (rc) return rc;
    }
    return RL_OK;
}

int rl_run_on(rl_client *client, redisContext *ctx, rl_cmd *cmds, size_t n, redisReply **replies)
{
    int rc;
    (void)client;
    for (size_t i = 0; i < n; i++) {
        replies[i] = NULL;
        if (cmds[i].failed) return rl_fail(RL_ERR_NOMEM, "out of memory building a command");
    }
    if ((rc = send_and_read(ctx, cmds, n, replies))) return rc;
    if ((rc = reload_scripts(ctx, cmds, n, replies))) {
        free_replies(replies, n);
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        if (replies[i]->type == REDIS_REPLY_ERROR) {
            rc = rl_fail(RL_ERR_REDIS, "%s", replies[i]->str);
            free_replies(replies, n);
            return rc;
        }
    }
    return RL_OK;
}

int rl_run(rl_client *client, rl_cmd *cmds, size_t n, redisReply **replies)
{
    redisContext *ctx;
    int rc;
    if (!client) return rl_fail(RL_ERR_INVALID, "client must not be NULL");
    if ((rc = rl_conn_get(client, &ctx))) return rc;
    rc = rl_run_on(client, ctx, cmds, n, replies);
    rl_conn_put(client, ctx);
    return rc;
}

int rl_reply_int(const redisReply *r, size_t index, int64_t *out)
{
    if (!r || r->type != REDIS_REPLY_ARRAY || index >= r->elements ||
        r->element[index]->type != REDIS_REPLY_INTEGER)
        return rl_fail(RL_ERR_PROTOCOL, "unexpected reply shape from a script");
    *out = r->element[index]->integer;
    return RL_OK;
}

int rl_check_name(const char *what, const char *value)
{
    if (!value || !*value) return rl_fail(RL_ERR_INVALID, "%s must not be empty", what);
    if (strlen(value) > 1024) return rl_fail(RL_ERR_INVALID, "%s is longer than 1024 bytes", what);
    return RL_OK;
}

int rl_check_range(const char *what, int64_t value, int64_t min, int64_t max)
{
    if (value < min || value > max)
        return rl_fail(RL_ERR_INVALID, "%s must be in %lld..%lld (got %lld)", what, (long long)min,
                       (long long)max, (long long)value);
    return RL_OK;
}

int rl_sleep(int64_t ms, const rl_wait *wait)
{
    int64_t end = rl_monotonic_ms() + ms;
    for (;;) {
        if (wait && wait->cancel && wait->cancel(wait->cancel_ctx))
            return rl_fail(RL_ERR_CANCELLED, "wait cancelled");
        int64_t left = end - rl_monotonic_ms();
        if (left <= 0) return RL_OK;
        if (left > 50) left = 50;
        struct timespec ts = {0, (long)left * 1000000L};
        nanosleep(&ts, NULL);
    }
}
