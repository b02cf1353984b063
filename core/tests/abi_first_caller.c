/* A caller built against abi_first.h only, as a binary built against the
 * first sized ratelimit.h calls the library: plain functions, its own
 * struct sizes. Every struct it hands over is followed by bytes that are
 * not zero, and every one it gets back by a canary, so a library that
 * reads or writes past the caller's size (a struct grew without the size
 * handling) gets a bad option, a wrong decision or a broken canary. */
#include <stdio.h>
#include <string.h>

#include "abi_first.h"

#define FIXED_WINDOW 0
#define TRAILING 64

static int failed(char *why, size_t size, const char *what)
{
    snprintf(why, size, "%s (rl_errmsg: %s)", what, rl_errmsg());
    return 1;
}

static int canary_intact(const unsigned char *after)
{
    for (int i = 0; i < TRAILING; i++)
        if (after[i] != 0xA5) return 0;
    return 1;
}

int abi_first_run(const char *url, char *why, size_t why_size)
{
    struct {
        rl_options o;
        unsigned char after[TRAILING];
    } options;
    struct {
        rl_request r[3];
        unsigned char after[TRAILING];
    } requests;
    struct {
        rl_result r[3];
        unsigned char after[TRAILING];
    } results;
    rl_spec spec = {.algorithm = FIXED_WINDOW, .limit = 10, .period_ms = 3600000};
    rl_client *client = NULL;

    memset(&options, 0xFF, sizeof options);
    options.o = (rl_options){1000, 1000, 2, "abi", 0, NULL, NULL, NULL, 0, 1000, 0, 1000, NULL, 1000, 16};
    if (rl_client_open(&client, url, &options.o)) return failed(why, why_size, "rl_client_open");

    memset(&results, 0xA5, sizeof results);
    if (rl_acquire(client, "single", "one", &spec, 3, &results.r[0]) || !results.r[0].allowed ||
        results.r[0].remaining != 7 || results.r[0].granted != 3 || results.r[0].limit != 10)
        return failed(why, why_size, "rl_acquire's decision");
    if (!canary_intact((unsigned char *)&results.r[1]))
        return failed(why, why_size, "rl_acquire wrote past its result");

    /* three requests on three entities: a wrong stride reads another's
     * permits or a name out of the trailing bytes */
    memset(&requests, 0xFF, sizeof requests);
    const char *ids[3] = {"a", "b", "c"};
    for (int i = 0; i < 3; i++)
        requests.r[i] = (rl_request){.name = "batch", .id = ids[i], .spec = spec, .permits = i + 1};
    memset(&results, 0xA5, sizeof results);
    if (rl_execute(client, requests.r, 3, results.r)) return failed(why, why_size, "rl_execute");
    for (int i = 0; i < 3; i++)
        if (!results.r[i].allowed || results.r[i].remaining != 10 - (i + 1) || results.r[i].granted != i + 1)
            return failed(why, why_size, "rl_execute's decisions");
    if (!canary_intact(results.after)) return failed(why, why_size, "rl_execute wrote past its results");
    rl_client_close(client);
    return 0;
}
