/* Structs that grow (ratelimit.h): a caller built against the first sized
 * ABI (abi_first.h) runs with today's library; a caller of a newer header
 * (larger structs, simulated by passing larger sizes) is served when the
 * fields this library does not know are zero and refused when not, its
 * results' unknown fields zeroed; no size smaller than the first is taken. */
#include <string.h>

#include "harness.h"

int abi_first_run(const char *url, char *why, size_t why_size);

static test_redis redis;

/* a struct of a newer header: today's, then a field this library lacks */
typedef struct {
    rl_options o;
    int64_t future;
} newer_options;
typedef struct {
    rl_request r;
    int64_t future;
} newer_request;
typedef struct {
    rl_result r;
    int64_t future;
} newer_result;
typedef struct {
    rl_completion c;
    int64_t future;
} newer_completion;

static const rl_spec spec = {.algorithm = RL_GCRA, .limit = 10, .period_ms = 3600000};

static void first_abi(void)
{
    char why[300] = "";
    int rc = abi_first_run(redis.url, why, sizeof why);
    if (rc) fprintf(stderr, "the first ABI's caller: %s\n", why);
    CHECK_EQ(rc, 0);
}

static void newer_header(void)
{
    newer_options options = {.o = RL_OPTIONS_INIT, .future = 1};
    rl_client *client = NULL;
    CHECK_EQ(rl_client_open_sized(&client, redis.url, &options.o, sizeof options), RL_ERR_INVALID);
    CHECK(strstr(rl_errmsg(), "does not know") != NULL);
    CHECK(client == NULL);
    options.future = 0;
    CHECK_OK(rl_client_open_sized(&client, redis.url, &options.o, sizeof options));

    newer_result result;
    memset(&result, 0x55, sizeof result);
    CHECK_OK(rl_acquire_sized(client, "newer", "single", &spec, 2, &result.r, sizeof result));
    CHECK(result.r.allowed && result.r.remaining == 8 && result.future == 0);

    newer_request requests[3];
    memset(requests, 0, sizeof requests);
    newer_result results[3];
    rl_outcome outcomes[3];
    const char *ids[3] = {"a", "b", "c"};
    for (int i = 0; i < 3; i++)
        requests[i].r = (rl_request){.name = "newer", .id = ids[i], .spec = spec, .permits = i + 1};
    memset(results, 0x55, sizeof results);
    CHECK_OK(rl_execute_each_sized(client, &requests[0].r, 3, &results[0].r, outcomes, sizeof *requests,
                                   sizeof *results));
    for (int i = 0; i < 3; i++) {
        CHECK(results[i].r.allowed && results[i].r.remaining == 10 - (i + 1) && results[i].future == 0);
        CHECK_EQ(outcomes[i].status, RL_OK);
    }
    int decided = 1; /* a request without a lease is never decided from one */
    CHECK_OK(rl_decide_from_lease_sized(client, &requests[0].r, &result.r, &decided, sizeof *requests, sizeof result));
    CHECK_EQ(decided, 0);
    rl_wait no_wait = {0};
    memset(&result, 0x55, sizeof result);
    CHECK_OK(rl_acquire_wait_sized(client, &requests[0].r, &no_wait, &result.r, sizeof *requests, sizeof result));
    CHECK(result.r.allowed && result.r.remaining == 8 && result.future == 0);
    memset(&result, 0x55, sizeof result);
    CHECK_OK(rl_peek_sized(client, "newer", "a", &spec, 1, &result.r, sizeof result));
    CHECK(result.r.allowed && result.r.remaining == 8 && result.future == 0);

    /* a field set that this library cannot honour refuses the batch whole */
    requests[1].future = 7;
    CHECK_EQ(rl_execute_each_sized(client, &requests[0].r, 3, &results[0].r, outcomes, sizeof *requests,
                                   sizeof *results),
             RL_ERR_INVALID);
    CHECK(strstr(outcomes[0].error, "request 1 sets a field") != NULL);
    CHECK_EQ(rl_requests_validate_sized(&requests[0].r, 3, sizeof *requests), RL_ERR_INVALID);
    requests[1].future = 0;
    CHECK_OK(rl_requests_validate_sized(&requests[0].r, 3, sizeof *requests));
    /* smaller than any header's */
    CHECK_EQ(rl_execute_each_sized(client, &requests[0].r, 3, &results[0].r, NULL, sizeof(rl_request) - 8,
                                   sizeof *results),
             RL_ERR_INVALID);

    /* the asynchronous path: a request in, a completion out */
    rl_completions *queue;
    CHECK_OK(rl_completions_open(&queue));
    rl_target target = {.queue = queue};
    CHECK_OK(rl_submit_sized(client, &requests[0].r, 42, &target, sizeof *requests));
    newer_completion done[2];
    memset(done, 0x55, sizeof done);
    size_t got = 0;
    for (int64_t end = now_ms() + 5000; got == 0 && now_ms() < end; sleep_ms(1))
        got = rl_completions_take_sized(queue, &done[0].c, 2, sizeof *done);
    CHECK_EQ(got, 1);
    CHECK_EQ(done[0].c.tag, 42);
    CHECK_EQ(done[0].c.status, RL_OK);
    CHECK(done[0].c.result.allowed && done[0].c.result.remaining == 7 && done[0].future == 0);
    CHECK_OK(rl_submit_acquire_wait_sized(client, &requests[0].r, 1000, 43, &target, sizeof *requests));
    memset(done, 0x55, sizeof done);
    got = 0;
    for (int64_t end = now_ms() + 5000; got == 0 && now_ms() < end; sleep_ms(1))
        got = rl_completions_take_sized(queue, &done[0].c, 2, sizeof *done);
    CHECK_EQ(got, 1);
    CHECK_EQ(done[0].c.tag, 43);
    CHECK(done[0].c.result.allowed && done[0].c.result.remaining == 6 && done[0].future == 0);
    rl_client_close(client);
    rl_completions_close(queue);
}

int main(void)
{
    redis_start(&redis);
    first_abi();
    newer_header();
    redis_stop(&redis);
    return test_summary("abi");
}
