/* What bindings and tools use instead of the core's private header: keys for
 * every scope and rate and read back, a batch checked whole, raw commands.
 * Public API only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static void test_key_build_and_parse(void)
{
    rl_client *c;
    rl_options o = RL_OPTIONS_INIT;
    char key[512];
    rl_key_parts parts;
    o.on_error = RL_ON_ERROR_ALLOW; /* no server: only its prefix and id */
    o.client_id = "pod-a";
    CHECK_OK(rl_client_open(&c, "redis://127.0.0.1:1", &o));

    CHECK(rl_key_build(c, "api", "u:1", RL_GCRA, RL_SCOPE_OVERALL, 0, key, sizeof key) > 0);
    CHECK(!strcmp(key, "rl:{api:u:1}:gcra"));
    char same[512];
    rl_key(c, "api", "u:1", RL_GCRA, same, sizeof same);
    CHECK(!strcmp(key, same));
    CHECK(rl_key_build(c, "sms:eu", "a b", RL_TOKEN_BUCKET, RL_SCOPE_PER_CLIENT, 2, key, sizeof key) > 0);
    CHECK(!strcmp(key, "rl:{sms%3Aeu:a%20b%Ppod-a}:token_bucket:3"));
    CHECK_EQ(rl_key_parse("rl", key, strlen(key), &parts), 1);
    CHECK_EQ(parts.kind, RL_KEY_STATE);
    CHECK(!strcmp(parts.name, "sms:eu") && !strcmp(parts.id, "a b") && !strcmp(parts.client_id, "pod-a"));
    CHECK_EQ(parts.algorithm, RL_TOKEN_BUCKET);
    CHECK_EQ(parts.rate, 2);
    rl_key_parts_free(&parts);
    CHECK_EQ(rl_key_build(c, "api", "u", RL_GCRA, RL_SCOPE_OVERALL, RL_MAX_RATES, key, sizeof key), RL_ERR_INVALID);
    CHECK_EQ(rl_key_build(c, "", "u", RL_GCRA, RL_SCOPE_OVERALL, 0, key, sizeof key), RL_ERR_INVALID);

    CHECK_EQ(rl_key_parse("rl", "rl:config:a%3Ab", 15, &parts), 1);
    CHECK(parts.kind == RL_KEY_CONFIG && !strcmp(parts.name, "a:b"));
    rl_key_parts_free(&parts);
    CHECK_EQ(rl_key_parse("rl", "rl:{jobs}:delay_queue", 21, &parts), 1);
    CHECK(parts.kind == RL_KEY_OTHER && !strcmp(parts.name, "jobs") && !strcmp(parts.suffix, "delay_queue"));
    rl_key_parts_free(&parts);
    CHECK_EQ(rl_key_parse("rl", "other:{a:b}:gcra", 16, &parts), 0);
    CHECK_EQ(rl_key_parse("rl", "rl:plain", 8, &parts), 0);
    rl_key_parts_free(&parts);
    rl_client_close(c);
}

static void test_requests_validate(void)
{
    rl_request reqs[3];
    memset(reqs, 0, sizeof reqs);
    for (int i = 0; i < 3; i++) {
        reqs[i].name = "api";
        reqs[i].id = "u";
        reqs[i].permits = 1;
        reqs[i].spec.algorithm = RL_GCRA;
        reqs[i].spec.limit = 10;
        reqs[i].spec.period_ms = 1000;
    }
    CHECK_OK(rl_requests_validate(reqs, 3));
    reqs[2].stored_spec = 1; /* its spec is unknown here: name, id and permits */
    reqs[2].spec.limit = 0;
    CHECK_OK(rl_requests_validate(reqs, 3));
    reqs[1].lease_ms = RL_LEASE_MAX_MS + 1;
    CHECK_EQ(rl_requests_validate(reqs, 3), RL_ERR_INVALID);
    CHECK(!strncmp(rl_errmsg(), "request 1: ", 11));
    CHECK_EQ(rl_requests_validate(reqs, RL_EXECUTE_MAX + 1), RL_ERR_INVALID);
}

static void test_command_run(void)
{
    test_redis r = {0};
    rl_client *c;
    rl_reply *reply;
    redis_start(&r);
    c = open_client(&r, NULL);
    const char *set[] = {"SET", "k", "v"}, *get[] = {"GET", "k"}, *bad[] = {"NOSUCH"}, *mget[] = {"MGET", "k", "x"};
    size_t set_lens[] = {3, 1, 1}, get_lens[] = {3, 1}, bad_lens[] = {6}, mget_lens[] = {4, 1, 1};
    CHECK_OK(rl_command_run(c, rl_key_slot("k", 1), 3, set, set_lens, &reply));
    CHECK_EQ(rl_reply_kind(reply), RL_REPLY_STATUS);
    rl_reply_free(reply);
    CHECK_OK(rl_command_run(c, -1, 2, get, get_lens, &reply));
    size_t len;
    CHECK(rl_reply_kind(reply) == RL_REPLY_STRING && !memcmp(rl_reply_str(reply, &len), "v", 1) && len == 1);
    rl_reply_free(reply);
    CHECK_OK(rl_command_run(c, -1, 3, mget, mget_lens, &reply));
    CHECK_EQ(rl_reply_count(reply), 2);
    CHECK_EQ(rl_reply_kind(rl_reply_at(reply, 1)), RL_REPLY_NIL);
    CHECK(rl_reply_at(reply, 2) == NULL);
    rl_reply_free(reply);
    CHECK_EQ(rl_command_run(c, -1, 1, bad, bad_lens, &reply), RL_ERR_REDIS);
    CHECK(reply == NULL && strstr(rl_errmsg(), "NOSUCH"));
    CHECK_EQ(rl_command_run(c, -1, 0, bad, bad_lens, &reply), RL_ERR_INVALID);
    int slots[4];
    CHECK_EQ(rl_client_masters(c, slots, 4), 1);
    CHECK_EQ(slots[0], -1);
    rl_client_close(c);
    redis_stop(&r);
}

int main(void)
{
    test_key_build_and_parse();
    test_requests_validate();
    test_command_run();
    return test_summary("keys");
}
