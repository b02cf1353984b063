/* Rate strings are parsed once, in C, for every binding. */
#include <string.h>

#include "harness.h"

static void ok(const char *text, int64_t limit, int64_t period)
{
    int64_t l = 0, p = 0;
    CHECK_OK(rl_parse_rate(text, &l, &p));
    CHECK_EQ(l, limit);
    CHECK_EQ(p, period);
}

static void bad(const char *text, const char *mentions)
{
    int64_t l = 0, p = 0;
    CHECK_EQ(rl_parse_rate(text, &l, &p), RL_ERR_INVALID);
    if (!strstr(rl_errmsg(), mentions)) {
        fprintf(stderr, "rate '%s': message '%s' does not mention '%s'\n", text, rl_errmsg(), mentions);
        test_failures++;
    }
}

int main(void)
{
    ok("10/s", 10, 1000);
    ok("10/second", 10, 1000);
    ok("100/minute", 100, 60000);
    ok("5 per 30 seconds", 5, 30000);
    ok("1000/hour", 1000, 3600000);
    ok("10/day", 10, 86400000);
    ok("3/500ms", 3, 500);
    ok("  7 / 2 minutes ", 7, 120000);
    ok("1 PER HOUR", 1, 3600000);
    bad("", "empty");
    bad("ten/second", "whole number");
    bad("0/s", "positive");
    bad("-5/s", "positive");
    bad("10", "'/' or 'per'");
    bad("10/", "unit");
    bad("10/fortnight", "fortnight");
    bad("10/0s", "positive");
    bad("10/s extra", "extra");
    bad("99999999999999999999/s", "whole number");
    bad("1.5/s", "'/' or 'per'");
    CHECK_EQ(rl_parse_rate(NULL, NULL, NULL), RL_ERR_INVALID);

    rl_algorithm a;
    CHECK_OK(rl_algorithm_parse("sliding_window", &a));
    CHECK_EQ(a, RL_SLIDING_WINDOW);
    CHECK_EQ(rl_algorithm_parse("bogus", &a), RL_ERR_INVALID);
    CHECK(strcmp(rl_algorithm_name(RL_GCRA), "gcra") == 0);
    CHECK(rl_algorithm_name((rl_algorithm)42) == NULL);
    CHECK_EQ(rl_version_number(), RL_VERSION_NUMBER);
    CHECK(strcmp(rl_strerror(RL_ERR_TIMEOUT), "timed out") == 0);
    CHECK(rl_script_count() >= 8);
    return test_summary("rate");
}
