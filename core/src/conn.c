/* Connections: connecting (TCP, unix, TLS), authenticating, SIGPIPE-safe
 * I/O, the pool per server, and pacing reconnects while a server is down. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h> /* access */

#include <hiredis/sds.h>

#include "internal.h"

#ifdef RL_HAVE_TLS
#include <hiredis/hiredis_ssl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#endif

int rl_tls_supported(void)
{
#ifdef RL_HAVE_TLS
    return 1;
#else
    return 0;
#endif
}

int rl_has_tls(void)
{
    return rl_tls_supported();
}

const char *rl_tls_version(void)
{
#ifdef RL_HAVE_TLS
    /* the library linked in, not the headers compiled against */
    return OpenSSL_version(OPENSSL_VERSION);
#else
    return NULL;
#endif
}

/* ---- backoff ----------------------------------------------------------- */

#define BACKOFF_FIRST_MS 25

/* RL_OK: go ahead (this caller probes); else fail fast with the last error. */
int rl_backoff_check(rl_backoff *b, int64_t now)
{
    if (b->failures == 0) return RL_OK;
    if (now >= b->retry_at_ms && !b->probing) {
        b->probing = 1;
        return RL_OK;
    }
    return rl_fail(b->status, "%s (Redis unreachable; next attempt in %lld ms)", b->message,
                   (long long)(b->retry_at_ms > now ? b->retry_at_ms - now : 0));
}

void rl_backoff_failed(rl_backoff *b, int status, int64_t now, int max_ms)
{
    int64_t pause = BACKOFF_FIRST_MS;
    unsigned int jitter = 0;
    for (int i = 1; i < b->failures && pause < max_ms; i++) pause *= 2;
    if (pause > max_ms) pause = max_ms;
    /* jitter in [pause/2, pause]: clients that lost Redis together do not
     * all come back in the same millisecond */
    if (rl_random_bytes(&jitter, sizeof jitter)) jitter = (unsigned int)now * 2654435761u;
    pause = pause / 2 + (int64_t)(jitter % (unsigned int)(pause / 2 + 1));
    b->failures++;
    b->probing = 0;
    b->retry_at_ms = now + pause;
    b->status = status;
    snprintf(b->message, sizeof b->message, "%s", rl_errmsg());
}

void rl_backoff_ok(rl_backoff *b)
{
    b->failures = 0;
    b->probing = 0;
}

void rl_backoff_record(rl_backoff *b, int status, int max_ms)
{
    if (status == RL_ERR_CONNECTION || status == RL_ERR_TIMEOUT) rl_backoff_failed(b, status, rl_now_ms(), max_ms);
    else rl_backoff_ok(b);
}

/* ---- I/O without SIGPIPE ----------------------------------------------- */

static struct timeval ms_to_tv(int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    return tv;
}

int rl_conn_error(rl_conn *conn, const char *what)
{
    int err = errno;
    redisContext *ctx = conn ? conn->ctx : NULL;
    if (!ctx) return rl_fail(RL_ERR_NOMEM, "%s: out of memory", what);
#ifdef REDIS_ERR_TIMEOUT
    if (ctx->err == REDIS_ERR_TIMEOUT) return rl_fail(RL_ERR_TIMEOUT, "%s: timed out (%s)", what, ctx->errstr);
#endif
    if (ctx->err == REDIS_ERR_IO &&
        (err == EAGAIN || err == EWOULDBLOCK || err == ETIMEDOUT || err == EINPROGRESS ||
         strstr(ctx->errstr, "temporarily unavailable") || strstr(ctx->errstr, "timed out") ||
         strstr(ctx->errstr, "timeout")))
        return rl_fail(RL_ERR_TIMEOUT, "%s: timed out (%s)", what, ctx->errstr);
    if (ctx->err == REDIS_ERR_PROTOCOL) return rl_fail(RL_ERR_PROTOCOL, "%s: protocol error (%s)", what, ctx->errstr);
    if (ctx->err == REDIS_ERR_OOM) return rl_fail(RL_ERR_NOMEM, "%s: out of memory", what);
    return rl_fail(RL_ERR_CONNECTION, "%s: %s", what, ctx->err ? ctx->errstr : "connection lost");
}

/* A plain socket is written by rl_socket_send (platform.h): a peer that
 * hung up must not kill a program that does not ignore SIGPIPE (hiredis
 * writes with plain send/write). OpenSSL writes for itself: around TLS I/O
 * rl_sigpipe_block and rl_sigpipe_restore. */

/* Writes the output buffer of a plain socket; dontwait (the I/O thread):
 * only what the socket takes now. */
static int flush_plain(redisContext *ctx, int dontwait)
{
    size_t len;
    while (!ctx->err && (len = sdslen(ctx->obuf)) > 0) {
        ssize_t n = rl_socket_send(ctx->fd, ctx->obuf, len, dontwait);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (dontwait && (errno == EAGAIN || errno == EWOULDBLOCK)) return REDIS_OK;
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

/* TLS: hiredis writes through OpenSSL; until done, or once when non-blocking. */
static int flush_tls(rl_conn *conn, int until_done)
{
    rl_sigpipe_guard g;
    int done = 0, rc;
    rl_sigpipe_block(&g);
    do rc = redisBufferWrite(conn->ctx, &done);
    while (rc == REDIS_OK && !done && until_done);
    rl_sigpipe_restore(&g);
    return rc;
}

int rl_conn_flush(rl_conn *conn)
{
    return conn->ssl ? flush_tls(conn, 1) : flush_plain(conn->ctx, 0);
}

int rl_conn_flush_some(rl_conn *conn)
{
    return conn->ssl ? flush_tls(conn, 0) : flush_plain(conn->ctx, 1);
}

int rl_conn_buffer_read(rl_conn *conn)
{
    if (!conn->ssl) return redisBufferRead(conn->ctx);
    rl_sigpipe_guard g;
    rl_sigpipe_block(&g);
    int rc = redisBufferRead(conn->ctx);
    rl_sigpipe_restore(&g);
    return rc;
}

int rl_conn_read(rl_conn *conn, void **reply)
{
    if (!conn->ssl) return redisGetReply(conn->ctx, reply);
    rl_sigpipe_guard g;
    rl_sigpipe_block(&g);
    int rc = redisGetReply(conn->ctx, reply);
    rl_sigpipe_restore(&g);
    return rc;
}

/* The socket's timeout bounds each read, not the reply: one that trickles in
 * (a few bytes per read) would hold a call far past command_timeout_ms. So
 * once less than that timeout is left, the socket's timeout shrinks to what
 * is left (and is put back after): the common call, whose reply comes in one
 * read, costs no system call more. */
int rl_conn_read_by(rl_conn *conn, void **reply, int64_t read_by_ms, int timeout_ms)
{
    redisContext *ctx = conn->ctx;
    int lowered = 0, rc;
    *reply = NULL;
    for (;;) {
        if ((rc = rl_reader_get_reply(ctx->reader, reply)) != REDIS_OK) { /* as redisGetReplyFromReader */
            ctx->err = ctx->reader->err;
            snprintf(ctx->errstr, sizeof ctx->errstr, "%s", ctx->reader->errstr);
            break;
        }
        if (*reply) break;
        int64_t left = read_by_ms - rl_now_ms();
        if (left <= 0) {
#ifdef REDIS_ERR_TIMEOUT
            ctx->err = REDIS_ERR_TIMEOUT;
#else
            ctx->err = REDIS_ERR_IO;
#endif
            snprintf(ctx->errstr, sizeof ctx->errstr, "timed out: no whole reply within %d ms", timeout_ms);
            errno = ETIMEDOUT;
            rc = REDIS_ERR;
            break;
        }
        if (left < timeout_ms - 5) {
            rl_socket_rcvtimeo(ctx->fd, (int)left);
            lowered = 1;
        }
        if ((rc = rl_conn_buffer_read(conn)) != REDIS_OK) break;
    }
    if (lowered && !ctx->err) {
        rl_socket_rcvtimeo(ctx->fd, timeout_ms);
    }
    return rc;
}

redisReply *rl_command(rl_conn *conn, int argc, const char **argv, const size_t *lens)
{
    void *reply = NULL;
    if (rl_append_command(conn->ctx, argc, argv, lens) != REDIS_OK || rl_conn_flush(conn) != REDIS_OK ||
        rl_conn_read(conn, &reply) != REDIS_OK)
        return NULL;
    return reply;
}

static int simple_command(rl_conn *conn, int argc, const char **argv, const char *what)
{
    redisReply *r = rl_command(conn, argc, argv, NULL);
    int rc = RL_OK;
    if (!r) return rl_conn_error(conn, what);
    if (r->type == REDIS_REPLY_ERROR) rc = rl_fail(RL_ERR_REDIS, "%s: %s", what, r->str);
    rl_reply_free(r);
    return rc;
}

/* ---- TLS -------------------------------------------------------------- */

#ifdef RL_HAVE_TLS
static int tls_fail(const char *what, const char *file)
{
    unsigned long e = ERR_peek_last_error();
    char reason[256];
    ERR_error_string_n(e, reason, sizeof reason);
    ERR_clear_error();
    return rl_fail(RL_ERR_INVALID, "TLS: cannot %s '%s': %s", what, file, e ? reason : strerror(errno));
}

static pthread_once_t openssl_once = PTHREAD_ONCE_INIT;
static void openssl_init(void)
{
    redisInitOpenSSL();
}

/* Without ssl_ca_certs servers are verified against SSL_CERT_FILE or
 * SSL_CERT_DIR when set, else OpenSSL's default file and directory (ours:
 * /etc/ssl/cert.pem, /etc/ssl/certs), else the distribution's bundle, found
 * where Go's crypto/x509 looks, so a verified rediss:// works on Fedora too.
 * On Windows the roots of its ROOT certificate store come before those files
 * (which Windows does not have; under Wine, the host's).
 * OpenSSL never reads the macOS keychain: there /etc/ssl/cert.pem is the
 * system's roots as macOS ships them, and a CA only in the keychain (a
 * company's, a self-signed one) needs ssl_ca_certs, which every refusal names.
 * Nothing to verify with at all is an error here, not a refusal later. */
#define SYSTEM_ROOTS "the Windows certificate store (ROOT)" /* the only rl_system_roots there is */

static void add_root(void *store, const unsigned char *der, size_t len)
{
    X509 *cert = len <= LONG_MAX ? d2i_X509(NULL, &der, (long)len) : NULL;
    if (cert) X509_STORE_add_cert(store, cert); /* one it cannot parse: not a root OpenSSL could use */
    X509_free(cert);
}

static int load_system_store(rl_client *c, SSL_CTX *ctx)
{
    static const char *const bundles[] = {
        "/etc/ssl/certs/ca-certificates.crt", /* Debian, Ubuntu, Alpine, Arch */
        "/etc/pki/tls/certs/ca-bundle.crt",   /* Fedora, RHEL, CentOS */
        "/etc/ssl/ca-bundle.pem",             /* openSUSE */
        "/etc/ssl/cert.pem",                  /* Alpine, macOS */
    };
    const char *env_file = getenv(X509_get_default_cert_file_env());
    const char *env_dir = getenv(X509_get_default_cert_dir_env());
    const char *trust = env_file ? env_file : env_dir;
    if (trust && access(trust, R_OK) != 0)
        return rl_fail(RL_ERR_INVALID, "TLS: %s=%s cannot be read (%s): set it to a CA file, or pass ssl_ca_certs",
                       env_file ? X509_get_default_cert_file_env() : X509_get_default_cert_dir_env(), trust,
                       strerror(errno));
    if (SSL_CTX_set_default_verify_paths(ctx) != 1) return tls_fail("load CA certificates from", "the system store");
    if (!trust && access(X509_get_default_cert_file(), R_OK) == 0) trust = X509_get_default_cert_file();
    if (!trust) {
        int roots = rl_system_roots(add_root, SSL_CTX_get_cert_store(ctx));
        ERR_clear_error(); /* a root already there (X509_STORE_add_cert's duplicate) is no failure */
        if (roots > 0) trust = SYSTEM_ROOTS;
    }
    for (size_t i = 0; !trust && i < sizeof bundles / sizeof *bundles; i++) {
        if (access(bundles[i], R_OK) != 0) continue;
        if (SSL_CTX_load_verify_locations(ctx, bundles[i], NULL) != 1)
            return tls_fail("load CA certificates from", bundles[i]);
        trust = bundles[i];
    }
    if (!trust && access(X509_get_default_cert_dir(), R_OK) == 0) trust = X509_get_default_cert_dir();
    if (!trust)
        return rl_fail(RL_ERR_INVALID, "TLS: no CA certificates to verify the server with (none in %s, %s, %s nor "
                       "%s): pass ssl_ca_certs=/path/to/ca.pem, or set SSL_CERT_FILE",
                       X509_get_default_cert_file(), X509_get_default_cert_dir(), bundles[0], bundles[1]);
    if (!(c->tls_trust = strdup(trust))) return rl_fail(RL_ERR_NOMEM, "out of memory");
    return RL_OK;
}

int rl_tls_setup(rl_client *c)
{
    const rl_url *u = &c->url;
    SSL_CTX *ctx;
    if (!u->tls) return RL_OK;
    pthread_once(&openssl_once, openssl_init);
    if (!(ctx = SSL_CTX_new(TLS_client_method()))) return rl_fail(RL_ERR_NOMEM, "TLS: cannot create a context");
    c->tls = ctx;
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    if (u->tls_verify == RL_TLS_VERIFY_NONE) {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    } else {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
        if (!u->tls_ca_file) {
            int rc = load_system_store(c, ctx);
            if (rc) return rc;
        } else if (SSL_CTX_load_verify_locations(ctx, u->tls_ca_file, NULL) != 1) {
            return tls_fail("load CA certificates from", u->tls_ca_file);
        }
    }
    if (u->tls_key_file && !u->tls_cert_file)
        return rl_fail(RL_ERR_INVALID, "TLS: a client key (ssl_keyfile) needs a certificate (ssl_certfile)");
    if (u->tls_cert_file) {
        const char *key = u->tls_key_file ? u->tls_key_file : u->tls_cert_file;
        if (SSL_CTX_use_certificate_chain_file(ctx, u->tls_cert_file) != 1)
            return tls_fail("load the client certificate", u->tls_cert_file);
        if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) return tls_fail("load the client key", key);
        if (SSL_CTX_check_private_key(ctx) != 1) return tls_fail("match the client key with", u->tls_cert_file);
    }
    return RL_OK;
}

void rl_tls_free(rl_client *c)
{
    SSL_CTX_free(c->tls);
    c->tls = NULL;
    free(c->tls_trust);
    c->tls_trust = NULL;
}

/* The handshake on a connected socket: SNI and host-name check = the host
 * we connected to, as a browser would. */
static int tls_start(rl_client *c, rl_conn *conn, const char *host, const char *where)
{
    unsigned char ip[16];
    int is_ip = inet_pton(AF_INET, host, ip) == 1 || inet_pton(AF_INET6, host, ip) == 1;
    SSL *ssl = SSL_new(c->tls);
    if (!ssl) return rl_fail(RL_ERR_NOMEM, "TLS: cannot create a session");
    if (!is_ip) SSL_set_tlsext_host_name(ssl, host); /* SNI takes names only */
    if (c->url.tls_verify != RL_TLS_VERIFY_NONE) {
        int ok = is_ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host) : SSL_set1_host(ssl, host);
        if (ok != 1) {
            SSL_free(ssl);
            return rl_fail(RL_ERR_INVALID, "TLS: cannot check host name '%s'", host);
        }
    }
    ERR_clear_error();
    if (redisInitiateSSL(conn->ctx, ssl) != REDIS_OK) {
        long verify = SSL_get_verify_result(ssl);
        if (verify != X509_V_OK) c->certificate_refused = 1;
        int rc = verify != X509_V_OK
                     ? rl_fail(RL_ERR_CONNECTION, "%s: TLS certificate verify failed: %s%s%s%s", where,
                               X509_verify_cert_error_string(verify),
                               c->tls_trust ? " (no ssl_ca_certs, so checked against " : "",
                               c->tls_trust ? c->tls_trust : "",
                               c->tls_trust ? ": a CA of your own, or one in the macOS keychain only, needs "
                                              "ssl_ca_certs=/path/to/ca.pem)" : "")
                     : rl_fail(RL_ERR_CONNECTION, "%s: TLS handshake failed: %s", where, conn->ctx->errstr);
        SSL_free(ssl); /* hiredis owns it only once the handshake succeeded */
        ERR_clear_error();
        return rc;
    }
    conn->ssl = ssl;
    return RL_OK;
}
#else
int rl_tls_setup(rl_client *c)
{
    if (c->url.tls)
        return rl_fail(RL_ERR_INVALID,
                       "this build of ratelimit has no TLS (built against hiredis without hiredis_ssl, or with "
                       "RL_TLS=0), so rediss:// URLs cannot work: use a build with TLS (the ratelimit-core wheels and "
                       "the jar have it), or rebuild from source with hiredis >= 1.0, hiredis_ssl and OpenSSL "
                       "(Debian 12: scripts/hiredis.sh builds them; Ubuntu 24.04, Debian 13: apt-get install "
                       "libhiredis-dev libssl-dev) and without RL_TLS=0 / -DRL_TLS=OFF");
    return RL_OK;
}

void rl_tls_free(rl_client *c)
{
    (void)c;
}
#endif

/* ---- connecting ----------------------------------------------------------- */

void rl_conn_close(rl_conn *conn)
{
    if (!conn) return;
    redisFree(conn->ctx);
    free(conn);
}

void rl_conn_abandon(rl_conn *conn)
{
    /* OpenSSL's locks may be held by a thread that did not come along: a TLS
     * connection is left unfreed. Closing our copy of the socket leaves the
     * parent's open. */
    if (conn->ssl) {
        rl_socket_close(conn->ctx->fd);
        rl_fork_leave(conn);
    } else {
        rl_conn_close(conn);
    }
}

int rl_conn_open_data(rl_client *c, rl_node *node, rl_conn **out)
{
    return rl_conn_open(c, node, c->url.password, c->url.user, c->url.db, out);
}

int rl_conn_open(rl_client *c, rl_node *node, const char *password, const char *user, int db, rl_conn **out)
{
    struct timeval connect_tv = ms_to_tv(c->options.connect_timeout_ms);
    char where[300];
    rl_conn *conn = calloc(1, sizeof *conn);
    int rc;

    *out = NULL;
    if (!conn) return rl_fail(RL_ERR_NOMEM, "out of memory");
    if (rl_net_init() < 0) {
        free(conn);
        return rl_fail(RL_ERR_CONNECTION, "cannot start the network (Winsock)");
    }
    conn->node = node;
    if (node->port == 0) snprintf(where, sizeof where, "connect to %s", node->host);
    else if (strchr(node->host, ':')) snprintf(where, sizeof where, "connect to [%s]:%d", node->host, node->port);
    else snprintf(where, sizeof where, "connect to %s:%d", node->host, node->port);
    conn->ctx = node->port == 0 ? redisConnectUnixWithTimeout(node->host, connect_tv)
                                : redisConnectWithTimeout(node->host, node->port, connect_tv);
    if (!conn->ctx || conn->ctx->err) {
        rc = rl_conn_error(conn, where);
        goto fail;
    }
    rl_socket_nosigpipe(conn->ctx->fd);
    rl_reply_use(conn->ctx->reader);
#if HIREDIS_MAJOR >= 1
    redisSetPushCallback(conn->ctx, NULL); /* its default frees with freeReplyObject (RESP3 only: never here) */
#endif
#ifdef RL_HAVE_TLS
    if (c->tls) {
        /* the handshake is bounded by the connect timeout */
        if (redisSetTimeout(conn->ctx, connect_tv) != REDIS_OK) {
            rc = rl_conn_error(conn, where);
            goto fail;
        }
        if ((rc = tls_start(c, conn, node->host, where))) goto fail;
    }
#endif
    if (redisSetTimeout(conn->ctx, ms_to_tv(c->options.command_timeout_ms)) != REDIS_OK) {
        rc = rl_conn_error(conn, "set timeout");
        goto fail;
    }
    if (node->port != 0) redisEnableKeepAlive(conn->ctx);
    if (password) {
        const char *with_user[3] = {"AUTH", user, password};
        const char *without_user[2] = {"AUTH", password};
        if ((rc = user ? simple_command(conn, 3, with_user, "authenticate")
                       : simple_command(conn, 2, without_user, "authenticate")))
            goto fail;
    }
    if (db) {
        char db_text[16];
        snprintf(db_text, sizeof db_text, "%d", db);
        const char *select[2] = {"SELECT", db_text};
        if ((rc = simple_command(conn, 2, select, "select database"))) goto fail;
    }
    *out = conn;
    return RL_OK;
fail:
    rl_conn_close(conn);
    return rc;
}

/* An idle connection whose peer hung up (Redis restarted) reads EOF at once;
 * spotting that here costs one syscall and no round trip, and means the
 * command we are about to send is never lost to a stale socket. */
static int still_open(rl_conn *conn)
{
    char byte;
    ssize_t n;
    if (conn->ctx->err) return 0;
    n = rl_socket_peek(conn->ctx->fd, &byte);
    if (n < 0) return errno == EAGAIN;
    if (n == 0 || !conn->ssl) return 0; /* EOF, or bytes nobody asked for */
#ifdef RL_HAVE_TLS
    /* TLS records arrive unasked (session tickets, close_notify): let
     * OpenSSL read them without blocking, and see what is left */
    int was = rl_socket_nonblocking(conn->ctx->fd, 1);
    if (was < 0) return 0;
    rl_sigpipe_guard g;
    rl_sigpipe_block(&g);
    int got = SSL_peek(conn->ssl, &byte, 1);
    int err = got > 0 ? SSL_ERROR_NONE : SSL_get_error(conn->ssl, got);
    rl_sigpipe_restore(&g);
    ERR_clear_error();
    rl_socket_nonblocking(conn->ctx->fd, was);
    return got <= 0 && err == SSL_ERROR_WANT_READ;
#else
    return 0;
#endif
}

/* ---- nodes and pools ------------------------------------------------------ */

rl_node *rl_node_for(rl_client *c, const char *host, int port)
{
    rl_node *node = NULL;
    pthread_mutex_lock(&c->topology);
    for (int i = 0; i < c->node_count; i++) {
        if (c->nodes[i]->port == port && !strcmp(c->nodes[i]->host, host)) {
            node = c->nodes[i];
            goto out;
        }
    }
    if (c->node_count == c->node_cap) {
        int cap = c->node_cap ? c->node_cap * 2 : 4;
        rl_node **grown = realloc(c->nodes, (size_t)cap * sizeof *grown);
        if (!grown) goto out;
        c->nodes = grown;
        c->node_cap = cap;
    }
    node = calloc(1, sizeof *node);
    if (!node || !(node->host = strdup(host)) ||
        !(node->idle = calloc((size_t)c->options.pool_size, sizeof *node->idle))) {
        if (node) free(node->host);
        free(node);
        node = NULL;
        goto out;
    }
    node->port = port;
    pthread_mutex_init(&node->mutex, NULL);
    pthread_cond_init(&node->available, NULL);
    c->nodes[c->node_count++] = node;
out:
    pthread_mutex_unlock(&c->topology);
    if (!node) rl_fail(RL_ERR_NOMEM, "out of memory");
    return node;
}

void rl_node_free(rl_node *node)
{
    for (int i = 0; i < node->idle_count; i++) rl_conn_close(node->idle[i]);
    free(node->idle);
    free(node->host);
    pthread_cond_destroy(&node->available);
    pthread_mutex_destroy(&node->mutex);
    free(node);
}

struct timespec rl_realtime_after(int ms)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += ms / 1000;
    t.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

static int wait_for_slot(rl_client *c, rl_node *node)
{
    struct timespec deadline = rl_realtime_after(c->options.command_timeout_ms);
    while (node->idle_count == 0 && node->open_count >= c->options.pool_size) {
        if (pthread_cond_timedwait(&node->available, &node->mutex, &deadline) == ETIMEDOUT &&
            node->idle_count == 0 && node->open_count >= c->options.pool_size)
            return rl_fail(RL_ERR_TIMEOUT, "all %d pooled connections to %s stayed busy for %d ms",
                           c->options.pool_size, node->host, c->options.command_timeout_ms);
    }
    return RL_OK;
}

void rl_node_answered(rl_node *node, int in_time)
{
    pthread_mutex_lock(&node->mutex);
    node->behind = !in_time;
    pthread_mutex_unlock(&node->mutex);
}

int rl_conn_get(rl_client *c, rl_node *node, rl_conn **out)
{
    rl_conn *conn = NULL;
    int rc;
    pthread_mutex_lock(&node->mutex);
    /* a server that is behind gets one call at a time: more would only
     * lengthen its queue, whose scripts run after their callers gave up */
    if (node->behind && node->open_count > node->idle_count) {
        pthread_mutex_unlock(&node->mutex);
        return rl_fail(RL_ERR_BACKLOG, "not sent: %s:%d is behind (a call timed out waiting for its reply) and has "
                       "a call in flight", node->host, node->port);
    }
    if ((rc = wait_for_slot(c, node))) {
        pthread_mutex_unlock(&node->mutex);
        return rc;
    }
    while (node->idle_count > 0) {
        conn = node->idle[--node->idle_count];
        if (still_open(conn)) break;
        rl_conn_close(conn); /* stale (Redis restarted): try the next one */
        conn = NULL;
        node->open_count--;
    }
    if (conn) {
        pthread_mutex_unlock(&node->mutex);
        *out = conn;
        return RL_OK;
    }
    /* connecting: while the server is down, fail fast between attempts */
    if ((rc = rl_backoff_check(&node->backoff, rl_now_ms()))) {
        pthread_mutex_unlock(&node->mutex);
        return rc;
    }
    node->open_count++;
    pthread_mutex_unlock(&node->mutex);

    rc = rl_conn_open_data(c, node, &conn);

    pthread_mutex_lock(&node->mutex);
    rl_backoff_record(&node->backoff, rc, c->options.reconnect_max_ms);
    if (rc) {
        node->open_count--;
        pthread_cond_signal(&node->available);
    }
    pthread_mutex_unlock(&node->mutex);
    if (rc == RL_OK) *out = conn;
    return rc;
}

void rl_conn_put(rl_client *c, rl_conn *conn)
{
    rl_node *node = conn->node;
    pthread_mutex_lock(&node->mutex);
    if (conn->ctx->err || node->idle_count >= c->options.pool_size) {
        rl_conn_close(conn); /* broken: the next call connects afresh */
        node->open_count--;
    } else {
        node->idle[node->idle_count++] = conn;
    }
    pthread_cond_signal(&node->available);
    pthread_mutex_unlock(&node->mutex);
}
