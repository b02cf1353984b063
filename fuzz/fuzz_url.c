/* rl_url_parse on arbitrary text (parsing only: nothing connects). A parsed
 * URL is consistent with its scheme, its values are in range, and writing it
 * back as a canonical URL (every decoded field percent-encoded) parses to
 * the same rl_url; a refused one leaves nothing allocated behind. */
#include <ctype.h>

#include "fuzz.h"
#include "internal.h"

static int all_zero(const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i]) return 0;
    return 1;
}

static int same_str(const char *a, const char *b)
{
    return a == b || (a && b && !strcmp(a, b));
}

static int same_url(const rl_url *a, const rl_url *b)
{
    if (a->mode != b->mode || a->tls != b->tls || a->naddrs != b->naddrs || a->db != b->db ||
        a->tls_verify != b->tls_verify)
        return 0;
    for (int i = 0; i < a->naddrs; i++)
        if (strcmp(a->addrs[i].host, b->addrs[i].host) || a->addrs[i].port != b->addrs[i].port) return 0;
    return same_str(a->unix_path, b->unix_path) && same_str(a->user, b->user) && same_str(a->password, b->password) &&
           same_str(a->service, b->service) && same_str(a->sentinel_password, b->sentinel_password) &&
           same_str(a->sentinel_user, b->sentinel_user) &&
           same_str(a->tls_ca_file, b->tls_ca_file) && same_str(a->tls_cert_file, b->tls_cert_file) &&
           same_str(a->tls_key_file, b->tls_key_file);
}

typedef struct {
    char *s;
    size_t len, cap;
} buf;

static void put(buf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->s = realloc(b->s, b->cap);
        FUZZ_CHECK(b->s != NULL);
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static void puts_(buf *b, const char *s)
{
    put(b, s, strlen(s));
}

/* percent-encodes everything but unreserved characters */
static void put_enc(buf *b, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char e[4];
        if (isalnum(*p) || *p == '-' || *p == '.' || *p == '_' || *p == '~') {
            put(b, (const char *)p, 1);
        } else {
            snprintf(e, sizeof e, "%%%02X", *p);
            put(b, e, 3);
        }
    }
}

static void put_opt(buf *b, int *first, const char *name, const char *value)
{
    if (!value) return;
    puts_(b, *first ? "?" : "&");
    *first = 0;
    puts_(b, name);
    puts_(b, "=");
    put_enc(b, value);
}

/* The canonical spelling of u. */
static char *unparse(const rl_url *u)
{
    static const char *const schemes[3][2] = {
        {"redis://", "rediss://"},
        {"redis+sentinel://", "rediss+sentinel://"},
        {"redis+cluster://", "rediss+cluster://"},
    };
    buf b = {NULL, 0, 0};
    char num[32];
    int first = 1;
    if (u->unix_path) {
        puts_(&b, "unix://");
        puts_(&b, u->unix_path); /* taken verbatim */
    } else {
        puts_(&b, schemes[u->mode][u->tls]);
        if (u->user || u->password) {
            if (u->user) put_enc(&b, u->user);
            puts_(&b, ":");
            if (u->password) put_enc(&b, u->password);
            puts_(&b, "@");
        }
        for (int i = 0; i < u->naddrs; i++) {
            const char *h = u->addrs[i].host; /* taken verbatim */
            int bracket = strchr(h, ':') || h[0] == '[';
            if (i) puts_(&b, ",");
            if (bracket) puts_(&b, "[");
            puts_(&b, h);
            if (bracket) puts_(&b, "]");
            snprintf(num, sizeof num, ":%d", u->addrs[i].port);
            puts_(&b, num);
        }
        if (u->service) {
            puts_(&b, "/");
            put_enc(&b, u->service);
        }
    }
    if (u->db) {
        snprintf(num, sizeof num, "%d", u->db);
        put_opt(&b, &first, "db", num);
    }
    if (u->tls_verify != RL_TLS_VERIFY_DEFAULT)
        put_opt(&b, &first, "ssl_cert_reqs", u->tls_verify == RL_TLS_VERIFY_NONE ? "none" : "required");
    put_opt(&b, &first, "ssl_ca_certs", u->tls_ca_file);
    put_opt(&b, &first, "ssl_certfile", u->tls_cert_file);
    put_opt(&b, &first, "ssl_keyfile", u->tls_key_file);
    put_opt(&b, &first, "sentinel_username", u->sentinel_user);
    put_opt(&b, &first, "sentinel_password", u->sentinel_password);
    return b.s;
}

static void check_parsed(const char *url, const rl_url *u)
{
    size_t url_len = strlen(url);
    const char *fields[] = {u->unix_path,     u->user,           u->password,      u->service,
                            u->sentinel_user, u->sentinel_password, u->tls_ca_file, u->tls_cert_file,
                            u->tls_key_file};
    FUZZ_CHECK(u->mode == RL_MODE_STANDALONE || u->mode == RL_MODE_SENTINEL || u->mode == RL_MODE_CLUSTER);
    FUZZ_CHECK(u->tls == 0 || u->tls == 1);
    FUZZ_CHECK(!strncmp(url, u->tls ? "rediss" : (u->unix_path ? "unix://" : "redis"), u->tls ? 6 : 5));
    FUZZ_CHECK((u->mode == RL_MODE_SENTINEL) == (strstr(url, "+sentinel://") == url + 5 + u->tls));
    FUZZ_CHECK((u->mode == RL_MODE_CLUSTER) == (strstr(url, "+cluster://") == url + 5 + u->tls));
    FUZZ_CHECK(u->db >= 0);
    FUZZ_CHECK(u->mode != RL_MODE_CLUSTER || u->db == 0);
    if (u->unix_path) {
        FUZZ_CHECK(!strncmp(url, "unix://", 7) && u->unix_path[0] == '/');
        FUZZ_CHECK(u->mode == RL_MODE_STANDALONE && !u->tls && u->naddrs == 0 && !u->addrs);
        FUZZ_CHECK(!u->user && !u->password);
    } else {
        FUZZ_CHECK(u->naddrs >= 1 && u->naddrs <= 64 && u->addrs);
        FUZZ_CHECK(u->mode != RL_MODE_STANDALONE || u->naddrs == 1);
        for (int i = 0; i < u->naddrs; i++) {
            const char *h = u->addrs[i].host;
            FUZZ_CHECK(h && h[0]);
            for (const unsigned char *p = (const unsigned char *)h; *p; p++)
                FUZZ_CHECK(isgraph(*p) && *p != '@' && *p != '/' && *p != '?' && *p != '#' && *p != ',');
            FUZZ_CHECK(u->addrs[i].port >= 1 && u->addrs[i].port <= 65535);
        }
    }
    /* only a sentinel URL names a service; user only with a password */
    FUZZ_CHECK((u->mode == RL_MODE_SENTINEL) == (u->service != NULL));
    FUZZ_CHECK(!u->service || u->service[0]);
    FUZZ_CHECK(!u->sentinel_password || u->mode == RL_MODE_SENTINEL);
    FUZZ_CHECK(!u->sentinel_user || u->sentinel_password);
    FUZZ_CHECK(!u->user || u->password);
    FUZZ_CHECK(u->tls || (!u->tls_ca_file && !u->tls_cert_file && !u->tls_key_file &&
                          u->tls_verify == RL_TLS_VERIFY_DEFAULT));
    FUZZ_CHECK(u->tls_verify >= RL_TLS_VERIFY_DEFAULT && u->tls_verify <= RL_TLS_VERIFY_NONE);
    /* an empty file name from a URL would be opened as a path */
    FUZZ_CHECK(!u->tls_ca_file || u->tls_ca_file[0]);
    FUZZ_CHECK(!u->tls_cert_file || u->tls_cert_file[0]);
    FUZZ_CHECK(!u->tls_key_file || u->tls_key_file[0]);
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        FUZZ_CHECK(!fields[i] || strlen(fields[i]) <= url_len);
}

static size_t occurrences(const char *s, const char *part)
{
    size_t n = 0;
    for (const char *p = strstr(s, part); p; p = strstr(p + 1, part)) n++;
    return n;
}

/* Whether the message for url quotes secret, which shows once in url: a
 * message whose fixed text holds the same characters (a password
 * "sentinel_password"...) quotes them as well with the secret replaced. */
static int quoted(const char *url, const char *secret)
{
    rl_url u;
    if (rl_url_parse(url, &u) == RL_OK) {
        rl_url_free(&u);
        return 0;
    }
    if (!strstr(rl_errmsg(), secret)) return 0;
    char *other = strdup(url);
    FUZZ_CHECK(other != NULL);
    memset(other + (strstr(url, secret) - url), 'x', strlen(secret));
    int in_text = rl_url_parse(other, &u) != RL_OK && strstr(rl_errmsg(), secret);
    if (!in_text && rl_url_parse(other, &u) == RL_OK) rl_url_free(&u);
    free(other);
    return !in_text;
}

/* The '@' that ends url's userinfo (the authority's last), or NULL: a match
 * of the password that ends at another '@' (a user "@@@@:" followed by a
 * password starting with '@') is not the password in its own place. */
static const char *userinfo_end(const char *url)
{
    const char *start = strstr(url, "://"), *at = NULL;
    if (!start) return NULL;
    for (const char *p = start + 3; *p && !strchr("/?#", *p); p++)
        if (*p == '@') at = p;
    return at;
}

/* url parsed with this password: spoilt (a '#', an unknown option, a bad
 * port...), its message must not quote it. Only where the secret is written
 * in url as itself, in its own place (before the host's '@', or after its
 * option's '='): a percent-decoded one ("%40jj" is "@jj") may match the
 * host or another part, which messages do show. */
static void check_secret_kept(const char *url, const char *secret, int in_userinfo)
{
    static const char *const spoilers[] = {"#", "?nosuch=1", "&nosuch=1", ":99999", "/x", "&sentinel_password=%00"};
    if (!secret || strlen(secret) < 4) return;
    const char *at = strstr(url, secret);
    if (!at || occurrences(url, secret) != 1) return;
    if (in_userinfo ? at + strlen(secret) != userinfo_end(url) : (at == url || at[-1] != '=')) return;
    for (size_t i = 0; i < sizeof spoilers / sizeof spoilers[0]; i++) {
        size_t len = strlen(url) + strlen(spoilers[i]) + 1;
        char *spoilt = malloc(len);
        FUZZ_CHECK(spoilt != NULL);
        snprintf(spoilt, len, "%s%s", url, spoilers[i]);
        if (occurrences(spoilt, secret) == 1 && quoted(spoilt, secret)) {
            fprintf(stderr, "the message for '%s' quotes its password\n", spoilt);
            FUZZ_CHECK(!"no password in messages");
        }
        free(spoilt);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *url = fuzz_cstr(data, size);
    rl_url u, again;
    memset(&u, 0xA5, sizeof u); /* parsing sets every field */
    int rc = rl_url_parse(url, &u);
    if (rc != RL_OK) {
        FUZZ_CHECK(rc == RL_ERR_INVALID || rc == RL_ERR_NOMEM);
        FUZZ_CHECK(rl_errmsg()[0] != '\0');
        FUZZ_CHECK(all_zero(&u, sizeof u)); /* nothing left to free */
    } else {
        check_parsed(url, &u);
        check_secret_kept(url, u.password, 1);
        check_secret_kept(url, u.sentinel_password, 0);
        char *canonical = unparse(&u);
        if (strlen(canonical) <= 4096) {
            if (rl_url_parse(canonical, &again) != RL_OK) {
                fprintf(stderr, "canonical form '%s' of '%s' refused: %s\n", canonical, url, rl_errmsg());
                FUZZ_CHECK(!"canonical form parses");
            }
            if (!same_url(&u, &again)) {
                fprintf(stderr, "canonical form '%s' of '%s' parses differently\n", canonical, url);
                FUZZ_CHECK(!"canonical form parses to the same URL");
            }
            rl_url_free(&again);
        }
        free(canonical);
        rl_url_free(&u);
        FUZZ_CHECK(all_zero(&u, sizeof u));
    }
    free(url);
    return 0;
}
