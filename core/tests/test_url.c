/* URL parsing (no server): every scheme, every option, and what is refused. */
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
    CHECK(!strcmp(u.password, "pw"));
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
    if (rl_has_tls()) {
        o = (rl_options)RL_OPTIONS_INIT;
        o.tls_ca_file = "/nonexistent/ca.pem";
        CHECK_EQ(rl_client_open(&c, "rediss://127.0.0.1:1", &o), RL_ERR_INVALID);
        CHECK(strstr(rl_errmsg(), "/nonexistent/ca.pem") != NULL);
    } else {
        CHECK_EQ(rl_client_open(&c, "rediss://127.0.0.1:1", NULL), RL_ERR_INVALID);
        CHECK(strstr(rl_errmsg(), "no TLS") != NULL);
    }
    CHECK(c == NULL);
}

int main(void)
{
    test_standalone();
    test_tls();
    test_sentinel_and_cluster();
    test_refused();
    test_key_slot();
    test_options();
    return test_summary("url");
}
