/* URL parsing (no server): every scheme, every option, and what is refused. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "internal.h"

static void test_standalone(void)
{
    rl_url u;
    CHECK_OK(rl_url_parse("redis://127.0.0.1", &u));
    CHECK_EQ(u.mode, RL_MODE_STANDALONE);
    CHECK_EQ(u.naddrs, 1);
    CHECK(!strcmp(u.addrs[0].host, "127.0.0.1"));
    CHECK_EQ(u.addrs[0].port, 6379);
    CHECK_EQ(u.tls, 0);
    rl_url_free(&u);

    CHECK_OK(rl_url_parse("redis://us%40er:p%3Ass@w@[::1]:7000/3", &u));
    CHECK(!strcmp(u.user, "us@er"));
    CHECK(!strcmp(u.password, "p:ss@w"));
    CHECK(!strcmp(u.addrs[0].host, "::1"));
    CHECK_EQ(u.addrs[0].port, 7000);
    CHECK_EQ(u.db, 3);
    rl_url_free(&u);

    CHECK_OK(rl_url_parse("redis://secret@h/0?db=5", &u));
    CHECK(u.user == NULL);
    CHECK(!strcmp(u.password, "secret"));
    CHECK_EQ(u.db, 5);
    rl_url_free(&u);

    CHECK_OK(rl_url_parse("unix:///tmp/r.sock?db=2", &u));
    CHECK(!strcmp(u.unix_path, "/tmp/r.sock"));
    CHECK_EQ(u.db, 2);
    rl_url_free(&u);
}

static void test_tls(void)
{
    rl_url u;
    CHECK_OK(rl_url_parse("rediss://:pw@cache.example.com:6380/1?ssl_cert_reqs=none&ssl_ca_certs=/a%20b/ca.pem"
                          "&ssl_certfile=/c.pem&ssl_keyfile=/k.pem", &u));
    CHECK_EQ(u.tls, 1);
    CHECK_EQ(u.addrs[0].port, 6380);
    CHECK_EQ(u.tls_verify, RL_TLS_VERIFY_NONE);
    CHECK(!strcmp(u.tls_ca_file, "/a b/ca.pem"));
    CHECK(!strcmp(u.tls_cert_file, "/c.pem"));
    CHECK(!strcmp(u.tls_key_file, "/k.pem"));
    CHECK(!strcmp(u.password, "pw"));
    rl_url_free(&u);
    CHECK_OK(rl_url_parse("rediss://h?ssl_cert_reqs=required", &u));
    CHECK_EQ(u.tls_verify, RL_TLS_VERIFY_REQUIRED);
    rl_url_free(&u);
}

static void test_sentinel_and_cluster(void)
{
    rl_url u;
    CHECK_OK(rl_url_parse("redis+sentinel://:pw@10.0.0.1:26379,10.0.0.2,[::1]:5000/mymaster/4?sentinel_password=sp",
                          &u));
    CHECK_EQ(u.mode, RL_MODE_SENTINEL);
    CHECK_EQ(u.naddrs, 3);
    CHECK_EQ(u.addrs[1].port, 26379);
    CHECK(!strcmp(u.addrs[2].host, "::1"));
    CHECK_EQ(u.addrs[2].port, 5000);
    CHECK(!strcmp(u.service, "mymaster"));
    CHECK_EQ(u.db, 4);
    CHECK(!strcmp(u.sentinel_password, "sp"));
    CHECK(u.sentinel_user == NULL);
    CHECK(!strcmp(u.password, "pw"));
    rl_url_free(&u);
    CHECK_OK(rl_url_parse("redis+sentinel://s:1/m?sentinel_username=watcher&sentinel_password=p%40ss", &u));
    CHECK(!strcmp(u.sentinel_user, "watcher"));
    CHECK(!strcmp(u.sentinel_password, "p@ss"));
    rl_url_free(&u);

    CHECK_OK(rl_url_parse("rediss+sentinel://s1:1,s2:2/svc", &u));
    CHECK_EQ(u.tls, 1);
    CHECK_EQ(u.db, 0);
    rl_url_free(&u);

    CHECK_OK(rl_url_parse("redis+cluster://user:pw@127.0.0.1:7000,127.0.0.1:7001", &u));
    CHECK_EQ(u.mode, RL_MODE_CLUSTER);
    CHECK_EQ(u.naddrs, 2);
    CHECK(!strcmp(u.user, "user"));
    rl_url_free(&u);
    CHECK_OK(rl_url_parse("rediss+cluster://127.0.0.1:7000/0", &u));
    CHECK_EQ(u.tls, 1);
    rl_url_free(&u);
}

static void test_refused(void)
{
    const char *bad[] = {
        "", "http://x", "redis://", "redis://host:notaport", "redis://host:70000", "redis://host:0",
        "redis://host/db", "unix://relative", "unix:///x?db=z", "redis://[::1", "redis://[::1]x",
        "redis://a:1,b:2",                     /* several hosts need sentinel or cluster */
        "redis://h?ssl_ca_certs=/x",           /* TLS options need rediss */
        "rediss://h?ssl_cert_reqs=maybe", "rediss://h?ssl_ca_certs=", "redis://h?nosuch=1", "redis://h?db",
        "redis+sentinel://s:1",                /* no service */
        "redis+sentinel://s:1/",               /* empty service */
        "redis+sentinel://s:1/svc/x",          /* db must be a number */
        "redis://h?sentinel_password=x",       /* only for sentinel */
        "redis+cluster://h:1/2",               /* a cluster has database 0 only */
        "redis+cluster://h:1,,h:2", "redis+cluster://,", "redis://h#frag", "redis://h st", "redis+sentinels://h/s",
        /* %00 would cut the value short (found by fuzz/fuzz_url) */
        "redis://:pa%00ss@h", "redis://u%00:p@h", "redis+sentinel://s:1/%00", "rediss://h?ssl_ca_certs=%00",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rl_url u;
        int rc = rl_url_parse(bad[i], &u);
        CHECK_EQ(rc, RL_ERR_INVALID);
        if (rc != RL_ERR_INVALID) fprintf(stderr, "  accepted: %s\n", bad[i]);
        CHECK(strlen(rl_errmsg()) > 0);
        if (rc == RL_OK) rl_url_free(&u);
    }
    rl_url u;
    CHECK_EQ(rl_url_parse(NULL, &u), RL_ERR_INVALID);
}

/* No message quotes a password: the URLs of tests/vectors/url_secrets.txt
 * (shared with Python and Java), opened for real (raise policy). */
static void test_no_password_in_messages(void)
{
    FILE *f = fopen(RL_ROOT "/tests/vectors/url_secrets.txt", "r");
    CHECK(f != NULL);
    if (!f) return;
    rl_options o = RL_OPTIONS_INIT;
    o.on_error = RL_ON_ERROR_RAISE;
    o.connect_timeout_ms = 300;
    char line[1024], url[512], shown[512];
    int cases = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        shown[0] = '\0';
        if (sscanf(line, "%511s %511s", url, shown) < 1) continue;
        cases++;
        rl_client *c = NULL;
        int rc = rl_client_open(&c, url, &o);
        const char *msg = rl_errmsg();
        CHECK(rc != RL_OK);
        int leaked = strstr(msg, "S3cr") || strstr(msg, "Xy9z") || strstr(msg, "T0p") || strstr(msg, "Qw8k");
        char quoted[520];
        snprintf(quoted, sizeof quoted, "'%s'", shown);
        int as_expected = !shown[0] || strstr(msg, quoted);
        CHECK(!leaked && as_expected);
        if (leaked || !as_expected) fprintf(stderr, "  %s\n  -> %s\n", url, msg);
        rl_client_close(c);
    }
    fclose(f);
    CHECK(cases >= 9);
}

static void test_key_slot(void)
{
    /* values from CLUSTER KEYSLOT */
    CHECK_EQ(rl_key_slot("foo", 3), 12182);
    CHECK_EQ(rl_key_slot("{user1000}.following", 20), rl_key_slot("user1000", 8));
    CHECK_EQ(rl_key_slot("foo{}{bar}", 10), rl_key_slot("foo{}{bar}", 10)); /* empty tag: whole key */
    CHECK_EQ(rl_key_slot("123456789", 9), 0x31C3 & 16383);
}

static void test_options(void)
{
    rl_client *c = NULL;
    rl_options o = RL_OPTIONS_INIT;
    o.tls_ca_file = "/x.pem";
    CHECK_EQ(rl_client_open(&c, "redis://127.0.0.1:1", &o), RL_ERR_INVALID); /* TLS option, plain URL */
    o = (rl_options)RL_OPTIONS_INIT;
    o.reconnect_max_ms = -1;
    CHECK_EQ(rl_client_open(&c, "redis://127.0.0.1:1", &o), RL_ERR_INVALID);
    o = (rl_options)RL_OPTIONS_INIT;
    o.tls_verify = (rl_tls_verify)7;
    CHECK_EQ(rl_client_open(&c, "redis://127.0.0.1:1", &o), RL_ERR_INVALID);
    if (rl_tls_supported()) {
        o = (rl_options)RL_OPTIONS_INIT;
        o.tls_ca_file = "/nonexistent/ca.pem";
        CHECK_EQ(rl_client_open(&c, "rediss://127.0.0.1:1", &o), RL_ERR_INVALID);
        CHECK(strstr(rl_errmsg(), "/nonexistent/ca.pem") != NULL);
        CHECK(rl_tls_version() && !strncmp(rl_tls_version(), "OpenSSL ", 8));
    } else {
        CHECK_EQ(rl_client_open(&c, "rediss://127.0.0.1:1", NULL), RL_ERR_INVALID);
        CHECK(strstr(rl_errmsg(), "no TLS") != NULL);
        /* and names the way out */
        CHECK(strstr(rl_errmsg(), "scripts/hiredis.sh") != NULL && strstr(rl_errmsg(), "RL_TLS") != NULL);
        CHECK(rl_tls_version() == NULL);
    }
    CHECK(c == NULL);
}

static char **sort_tags;
static int by_tag(const void *a, const void *b)
{
    return strcmp(sort_tags[*(const size_t *)a], sort_tags[*(const size_t *)b]);
}

static void check_tag(const char *name, const char *id, const char *want)
{
    char *tag = rl_entity_tag(name, id, NULL);
    CHECK(tag && !strcmp(tag, want));
    if (tag && strcmp(tag, want)) fprintf(stderr, "  tag(%s, %s) = %s, want %s\n", name, id ? id : "-", tag, want);
    free(tag);
}

static void test_keys(void)
{
    char hex[65];
    rl_sha256_hex("abc", 3, hex);
    CHECK(!strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
    rl_sha256_hex("", 0, hex);
    CHECK(!strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
    rl_sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, hex);
    CHECK(!strcmp(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"));

    /* readable when nothing needs escaping */
    check_tag("sms", "user-42", "sms:user-42");
    check_tag("login", "2001:db8::1", "login:2001:db8::1");
    check_tag("db", NULL, "db");
    /* the pair the old format merged, and ids that moved the hash tag */
    check_tag("sms:vip", "alice", "sms%3Avip:alice");
    check_tag("sms", "vip:alice", "sms:vip:alice");
    check_tag("n", "{x}", "n:%7Bx%7D");
    check_tag("n", "}{", "n:%7D%7B");
    check_tag("n", "a%b c", "n:a%25b%20c");
    check_tag("n", "\xff\xfe", "n:\xff\xfe");
    /* long ids are hashed: %H is never an escape */
    char *long_id = malloc(65537);
    memset(long_id, 'x', 65536);
    long_id[65536] = '\0';
    char want[80] = "n:%H";
    rl_sha256_hex(long_id, 65536, want + 4);
    check_tag("n", long_id, want);
    free(long_id);

    /* hostile pairs never share a tag, and no tag holds a brace */
    const char *parts[] = {"a", ":", "a:", ":a", "{", "}", "{a}", "%", "%3A", "%7B", "a%3Ab", "", "\x01", "%H"};
    size_t n = sizeof parts / sizeof parts[0], count = 0;
    char *tags[14 * 14 * 14 * 14];
    char names[14 * 14 * 14 * 14][8], ids[14 * 14 * 14 * 14][8];
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < n; b++)
            for (size_t c2 = 0; c2 < n; c2++)
                for (size_t d = 0; d < n; d++) {
                    snprintf(names[count], sizeof names[count], "%s%s", parts[a], parts[b]);
                    snprintf(ids[count], sizeof ids[count], "%s%s", parts[c2], parts[d]);
                    tags[count] = rl_entity_tag(names[count], ids[count], NULL);
                    CHECK(strpbrk(tags[count], "{}") == NULL);
                    count++;
                }
    /* sorted by tag, equal tags sit side by side */
    size_t *order = malloc(count * sizeof *order);
    for (size_t i = 0; i < count; i++) order[i] = i;
    sort_tags = tags;
    qsort(order, count, sizeof *order, by_tag);
    long collisions = 0;
    for (size_t k = 1; k < count; k++) {
        size_t i = order[k - 1], j = order[k];
        if (!strcmp(tags[i], tags[j]) && (strcmp(names[i], names[j]) || strcmp(ids[i], ids[j]))) collisions++;
    }
    CHECK_EQ(collisions, 0);
    free(order);
    for (size_t i = 0; i < count; i++) free(tags[i]);

    /* a prefix may not move the hash tag */
    rl_client *c = NULL;
    rl_options o = RL_OPTIONS_INIT;
    o.key_prefix = "app{1}";
    CHECK_EQ(rl_client_open(&c, "redis://127.0.0.1:1", &o), RL_ERR_INVALID);
}

/* rl_url_redact is public: what the core's messages show, for a binding's logs */
static void test_redact_api(void)
{
    char small[16], buf[128];
    const char *url = "redis://:s3cret@127.0.0.1:6379/0";
    int n = rl_url_redact(url, buf, sizeof buf);
    CHECK(strcmp(buf, "redis://:***@127.0.0.1:6379/0") == 0);
    CHECK_EQ(n, (long long)strlen(buf));
    CHECK_EQ(rl_url_redact(url, small, sizeof small), n); /* snprintf's contract */
    CHECK_EQ(strlen(small), sizeof small - 1);
}

int main(void)
{
    test_redact_api();
    test_standalone();
    test_tls();
    test_sentinel_and_cluster();
    test_refused();
    test_no_password_in_messages();
    test_key_slot();
    test_options();
    test_keys();
    return test_summary("url");
}
