/* Connection URLs: redis://, rediss://, unix://, redis[s]+sentinel://,
 * redis[s]+cluster://. Pure parsing: nothing here touches the network. */
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    c = tolower(c);
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* Copies [s, s+len) percent-decoded. %00 is refused: the value would end
 * there (a password cut short, an empty service or file name). */
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
            if (!d[j - 1]) {
                free(d);
                return rl_fail(RL_ERR_INVALID, "invalid Redis URL: %%00 (a NUL byte) in a user, password, "
                               "service or file name");
            }
        } else {
            d[j++] = s[i];
        }
    }
    d[j] = '\0';
    free(*out); /* a repeated query option: the last one wins */
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

/* The value of the first query option whose name says it is a secret
 * ("sentinel_password", "password", "token"...), or NULL. */
static const char *secret_value(const char *s)
{
    static const char *const secret_words[] = {"pass", "secret", "token"};
    for (const char *p = strpbrk(s, "?&"); p; p = strpbrk(p + 1, "?&")) {
        size_t nlen = strcspn(p + 1, "=&?");
        if (p[1 + nlen] != '=') continue;
        for (size_t w = 0; w < sizeof secret_words / sizeof secret_words[0]; w++) {
            size_t wlen = strlen(secret_words[w]);
            for (size_t i = 0; i + wlen <= nlen; i++)
                if (!strncasecmp(p + 1 + i, secret_words[w], wlen)) return p + 2 + nlen;
        }
    }
    return NULL;
}

int rl_url_redact(const char *url, char *out, size_t size)
{
    const char *sep = strstr(url, "://");
    if (!sep) { /* not a URL: what follows a first ':' may be anything */
        const char *colon = strchr(url, ':');
        return snprintf(out, size, "%.*s%s", colon ? (int)(colon - url + 1) : 0, url, "***");
    }
    const char *rest = sep + 3, *at = strrchr(rest, '@'), *secret = secret_value(rest);
    int scheme_len = (int)(rest - url);
    if (secret && at && secret <= at) { /* they overlap: which '@' ends the userinfo is unclear */
        return snprintf(out, size, "%.*s***", scheme_len, url);
    }
    const char *colon = at ? memchr(rest, ':', (size_t)(at - rest)) : NULL;
    const char *host = at ? at + 1 : rest, *end = secret ? secret : host + strlen(host);
    return snprintf(out, size, "%.*s%.*s%s%.*s%s", scheme_len, url, colon ? (int)(colon - rest + 1) : 0, rest,
             at ? "***@" : "", (int)(end - host), host, secret ? "***" : "");
}

/* One "host[:port]" or "[v6]:port" in [s, end). */
static int parse_addr(const char *url, const char *s, const char *end, int default_port, rl_addr *out)
{
    const char *host = s, *host_end, *port = NULL;
    long v;
    if (s >= end) return rl_fail(RL_ERR_INVALID, "invalid Redis URL '%s': no host", url);
    if (*s == '[') {
        host = s + 1;
        host_end = memchr(host, ']', (size_t)(end - host));
        if (!host_end) return rl_fail(RL_ERR_INVALID, "invalid Redis URL '%s': unclosed '['", url);
        if (host_end + 1 < end) {
            if (host_end[1] != ':') return rl_fail(RL_ERR_INVALID, "invalid Redis URL '%s': junk after ']'", url);
            port = host_end + 2;
        }
    } else {
        host_end = memchr(s, ':', (size_t)(end - s));
        if (host_end) port = host_end + 1;
        else host_end = end;
    }
    if (host_end == host) return rl_fail(RL_ERR_INVALID, "invalid Redis URL '%s': no host", url);
    for (const char *p = host; p < host_end; p++)
        if (*p == '@' || *p == '/' || *p == '?' || isspace((unsigned char)*p) || !isprint((unsigned char)*p))
            return rl_fail(RL_ERR_INVALID, "invalid Redis URL '%s': bad character in host", url);
    out->port = default_port;
    if (port) {
        if (parse_uint(port, (size_t)(end - port), 65535, &v) || v == 0)
            return rl_fail(RL_ERR_INVALID, "invalid Redis URL '%s': bad port", url);
        out->port = (int)v;
    }
    out->host = strndup(host, (size_t)(host_end - host));
    return out->host ? RL_OK : rl_fail(RL_ERR_NOMEM, "out of memory");
}

/* "h1:p1,h2:p2" */
static int parse_addr_list(rl_url *u, const char *url, const char *s, const char *end, int default_port)
{
    size_t n = 1;
    int rc;
    for (const char *p = s; p < end; p++) n += *p == ',';
    if (n > 64) return rl_fail(RL_ERR_INVALID, "invalid Redis URL '%s': more than 64 hosts", url);
    u->addrs = calloc(n, sizeof *u->addrs);
    if (!u->addrs) return rl_fail(RL_ERR_NOMEM, "out of memory");
    while (s <= end) {
        const char *comma = memchr(s, ',', (size_t)(end - s));
        const char *item_end = comma ? comma : end;
        if ((rc = parse_addr(url, s, item_end, default_port, &u->addrs[u->naddrs]))) return rc;
        u->naddrs++;
        if (!comma) break;
        s = comma + 1;
    }
    return RL_OK;
}

static int parse_db(const char *url, const char *s, size_t len, int *db)
{
    long v;
    if (parse_uint(s, len, INT_MAX, &v))
        return rl_fail(RL_ERR_INVALID, "invalid Redis URL '%s': database must be a number", url);
    *db = (int)v;
    return RL_OK;
}

static int set_verify(rl_url *u, const char *url, const char *v, size_t len)
{
    if (len == 8 && !strncasecmp(v, "required", 8)) u->tls_verify = RL_TLS_VERIFY_REQUIRED;
    else if (len == 4 && !strncasecmp(v, "none", 4)) u->tls_verify = RL_TLS_VERIFY_NONE;
    else
        return rl_fail(RL_ERR_INVALID, "invalid Redis URL '%s': ssl_cert_reqs must be required or none", url);
    return RL_OK;
}

/* ?name=value&... ; option names as redis-py spells them. */
static int parse_query(rl_url *u, const char *url, const char *q)
{
    int after_secret = 0; /* an '&' in a secret would make the rest look like options */
    while (*q) {
        const char *amp = strchr(q, '&');
        const char *end = amp ? amp : q + strlen(q);
        const char *eq = memchr(q, '=', (size_t)(end - q));
        int rc;
        if (!eq) return rl_fail(RL_ERR_INVALID, "invalid Redis URL '%s': option without '=' in the query", url);
        size_t nlen = (size_t)(eq - q), vlen = (size_t)(end - eq - 1);
        const char *v = eq + 1;
#define OPT(s) (nlen == sizeof(s) - 1 && !strncmp(q, s, nlen))
        if (OPT("ssl_cert_reqs") || OPT("ssl_ca_certs") || OPT("ssl_certfile") || OPT("ssl_keyfile")) {
            if (!u->tls)
                return rl_fail(RL_ERR_INVALID, "invalid Redis URL '%s': %.*s needs a rediss:// URL", url, (int)nlen, q);
            if (vlen == 0) return rl_fail(RL_ERR_INVALID, "invalid Redis URL '%s': %.*s is empty", url, (int)nlen, q);
            rc = OPT("ssl_cert_reqs") ? set_verify(u, url, v, vlen)
                 : OPT("ssl_ca_certs") ? dup_decoded(v, vlen, &u->tls_ca_file)
                 : OPT("ssl_certfile") ? dup_decoded(v, vlen, &u->tls_cert_file)
                                       : dup_decoded(v, vlen, &u->tls_key_file);
        } else if (OPT("sentinel_password") || OPT("sentinel_username")) {
            if (u->mode != RL_MODE_SENTINEL)
                return rl_fail(RL_ERR_INVALID, "invalid Redis URL '%s': %.*s needs redis+sentinel://", url, (int)nlen, q);
            after_secret |= OPT("sentinel_password");
            rc = dup_decoded(v, vlen, OPT("sentinel_password") ? &u->sentinel_password : &u->sentinel_user);
        } else if (OPT("db")) {
            rc = parse_db(url, v, vlen, &u->db);
        } else if (after_secret) {
            return rl_fail(RL_ERR_INVALID, "invalid Redis URL '%s': an unknown option after sentinel_password (not "
                           "shown: it may be the rest of the password, whose '&' must then be percent-encoded: %%26)",
                           url);
        } else {
            return rl_fail(RL_ERR_INVALID, "invalid Redis URL '%s': unknown option '%.*s' (known: db, ssl_cert_reqs, "
                           "ssl_ca_certs, ssl_certfile, ssl_keyfile, sentinel_username, sentinel_password)", url,
                           (int)nlen, q);
        }
#undef OPT
        if (rc) return rc;
        q = amp ? amp + 1 : end;
    }
    return RL_OK;
}

/* [[user]:password@] at the start of [s, end); moves *s past it. */
static int parse_userinfo(rl_url *u, const char **s, const char *end)
{
    const char *at = NULL;
    int rc;
    for (const char *p = *s; p < end; p++)
        if (*p == '@') at = p; /* the last '@': passwords may contain one */
    if (!at) return RL_OK;
    const char *colon = memchr(*s, ':', (size_t)(at - *s));
    if (colon) {
        if (colon > *s && (rc = dup_decoded(*s, (size_t)(colon - *s), &u->user))) return rc;
        if ((rc = dup_decoded(colon + 1, (size_t)(at - colon - 1), &u->password))) return rc;
    } else if (at > *s) {
        /* redis://secret@host: a bare userinfo is the password, as redis-py reads it */
        if ((rc = dup_decoded(*s, (size_t)(at - *s), &u->password))) return rc;
    }
    *s = at + 1;
    return RL_OK;
}

static int parse_network(rl_url *u, const char *url, const char *rest)
{
    const char *q = strchr(rest, '?');
    const char *end = q ? q : rest + strlen(rest);
    const char *slash = memchr(rest, '/', (size_t)(end - rest));
    const char *hosts_end = slash ? slash : end;
    int rc;

    if (strchr(rest, '#'))
        return rl_fail(RL_ERR_INVALID, "invalid Redis URL '%s': '#' must be percent-encoded (%%23), in a password too", url);
    const char *at = strrchr(rest, '@');
    if (at && at > hosts_end) /* the userinfo would end inside the path or the query */
        return rl_fail(RL_ERR_INVALID, "invalid Redis URL '%s': '/' and '?' in a user name or password, and '@' after "
                       "the host, must be percent-encoded (%%2F, %%3F, %%40)", url);
    if ((rc = parse_userinfo(u, &rest, hosts_end))) return rc;
    if (u->mode == RL_MODE_STANDALONE) {
        if (memchr(rest, ',', (size_t)(hosts_end - rest)))
            return rl_fail(RL_ERR_INVALID, "invalid Redis URL '%s': several hosts need redis+sentinel:// or "
                           "redis+cluster://", url);
        if ((rc = parse_addr_list(u, url, rest, hosts_end, 6379))) return rc;
    } else {
        if ((rc = parse_addr_list(u, url, rest, hosts_end, u->mode == RL_MODE_SENTINEL ? 26379 : 6379))) return rc;
    }
    /* the path: /db, /service_name[/db] for sentinel */
    if (slash && slash + 1 < end) {
        const char *p = slash + 1;
        if (u->mode == RL_MODE_SENTINEL) {
            const char *next = memchr(p, '/', (size_t)(end - p));
            const char *svc_end = next ? next : end;
            if (svc_end == p) return rl_fail(RL_ERR_INVALID, "invalid Redis URL '%s': no service name", url);
            if ((rc = dup_decoded(p, (size_t)(svc_end - p), &u->service))) return rc;
            p = next ? next + 1 : end;
        }
        if (p < end && (rc = parse_db(url, p, (size_t)(end - p), &u->db))) return rc;
    }
    if (u->mode == RL_MODE_SENTINEL && !u->service)
        return rl_fail(RL_ERR_INVALID, "invalid Redis URL '%s': expected redis+sentinel://host:port[,...]/service_name",
                       url);
    if (q && (rc = parse_query(u, url, q + 1))) return rc;
    if (u->sentinel_user && !u->sentinel_password)
        return rl_fail(RL_ERR_INVALID, "invalid Redis URL '%s': sentinel_username needs sentinel_password", url);
    if (u->mode == RL_MODE_CLUSTER && u->db != 0)
        return rl_fail(RL_ERR_INVALID, "invalid Redis URL '%s': Redis Cluster has only database 0", url);
    return RL_OK;
}

static int parse_unix(rl_url *u, const char *url, const char *rest)
{
    const char *q = strchr(rest, '?');
    size_t len = q ? (size_t)(q - rest) : strlen(rest);
    if (len == 0 || rest[0] != '/')
        return rl_fail(RL_ERR_INVALID, "invalid Redis URL '%s': expected unix:///absolute/path", url);
    u->unix_path = strndup(rest, len);
    if (!u->unix_path) return rl_fail(RL_ERR_NOMEM, "out of memory");
    return q ? parse_query(u, url, q + 1) : RL_OK;
}

void rl_url_free(rl_url *u)
{
    for (int i = 0; i < u->naddrs; i++) free(u->addrs[i].host);
    free(u->addrs);
    free(u->unix_path);
    free(u->user);
    free(u->password);
    free(u->service);
    free(u->sentinel_password);
    free(u->sentinel_user);
    free(u->tls_ca_file);
    free(u->tls_cert_file);
    free(u->tls_key_file);
    memset(u, 0, sizeof *u);
}

int rl_url_parse(const char *url, rl_url *u)
{
    static const struct {
        const char *scheme;
        rl_mode mode;
        int tls;
    } schemes[] = {
        {"redis://", RL_MODE_STANDALONE, 0},        {"rediss://", RL_MODE_STANDALONE, 1},
        {"redis+sentinel://", RL_MODE_SENTINEL, 0}, {"rediss+sentinel://", RL_MODE_SENTINEL, 1},
        {"redis+cluster://", RL_MODE_CLUSTER, 0},   {"rediss+cluster://", RL_MODE_CLUSTER, 1},
    };
    int rc;
    char shown[300]; /* what messages quote: no password */
    memset(u, 0, sizeof *u);
    if (!url || !*url) return rl_fail(RL_ERR_INVALID, "Redis URL is empty");
    if (strlen(url) > 4096) return rl_fail(RL_ERR_INVALID, "Redis URL is longer than 4096 bytes");
    rl_url_redact(url, shown, sizeof shown);
    if (!strncmp(url, "unix://", 7)) {
        rc = parse_unix(u, shown, url + 7);
    } else {
        size_t i = 0, count = sizeof schemes / sizeof schemes[0];
        while (i < count && strncmp(url, schemes[i].scheme, strlen(schemes[i].scheme))) i++;
        if (i == count)
            return rl_fail(RL_ERR_INVALID, "invalid Redis URL '%s': expected redis://, rediss://, unix://, "
                           "redis+sentinel:// or redis+cluster://", shown);
        u->mode = schemes[i].mode;
        u->tls = schemes[i].tls;
        rc = parse_network(u, shown, url + strlen(schemes[i].scheme));
    }
    if (rc) rl_url_free(u);
    return rc;
}
