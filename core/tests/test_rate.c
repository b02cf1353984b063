/* Rate strings are parsed once, in C, for every binding. */
#include <string.h>

#include "harness.h"

static void ok(const char *text, int64_t limit, int64_t period)
{
    int64_t l = 0, p = 0;
    CHECK_OK(rl_rate_parse(text, &l, &p));
    CHECK_EQ(l, limit);
    CHECK_EQ(p, period);
}

static void bad(const char *text, const char *mentions)
{
    int64_t l = 0, p = 0;
    CHECK_EQ(rl_rate_parse(text, &l, &p), RL_ERR_INVALID);
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
    bad("99999999999999999999/s", "too large (max 4503599627370496)");
    bad("4503599627370497/s", "too large (max 4503599627370496)"); /* the limit's bound: as a limiter says */
    ok("4503599627370496/s", 4503599627370496LL, 1000);
    /* specs print their rates as users write them, and those parse back */
    const int64_t periods[] = {1, 500, 1000, 1500, 30000, 60000, 90000, 3600000, 7200000, 86400000,
                               604800000, 1209600000, 2592000000, 31104000000};
    const char *texts[] = {"1ms", "500ms", "second", "1500ms", "30 seconds", "minute", "90 seconds", "hour",
                           "2 hours", "day", "week", "2 weeks", "30 days", "360 days"};
    for (size_t i = 0; i < sizeof periods / sizeof periods[0]; i++) {
        char text[64], want[64];
        int64_t limit = 0, period = 0;
        rl_spec one = {.algorithm = RL_GCRA, .limit = 7, .period_ms = periods[i]};
        rl_spec_format(&one, text, sizeof text);
        snprintf(want, sizeof want, "gcra 7/%s", texts[i]);
        CHECK(strcmp(text, want) == 0);
        CHECK_OK(rl_rate_parse(text + strlen("gcra "), &limit, &period));
        CHECK_EQ(limit, 7);
        CHECK_EQ(period, periods[i]);
    }
    rl_spec two = {.algorithm = RL_GCRA, .limit = 10, .period_ms = 1000, .burst = 20, .more_count = 1,
                   .more = {{.limit = 1000, .period_ms = 3600000}}};
    char spec_text[128];
    rl_spec_format(&two, spec_text, sizeof spec_text);
    CHECK(strcmp(spec_text, "gcra 10/second burst 20;1000/hour") == 0);
    /* a number out of range keeps its parts for the bindings (rl_errrange) */
    rl_range_error range;
    rl_spec zero_period = {.algorithm = RL_GCRA, .limit = 10};
    CHECK_EQ(rl_spec_validate(&zero_period), RL_ERR_INVALID);
    CHECK(rl_errrange(&range) && strcmp(range.param, "period_ms") == 0 && range.value == 0 && range.min == 1);
    rl_spec huge_burst = {.algorithm = RL_GCRA, .limit = 10, .period_ms = 1000, .burst = (int64_t)1 << 50};
    CHECK_EQ(rl_spec_validate(&huge_burst), RL_ERR_INVALID);
    CHECK(rl_errrange(&range) && strcmp(range.param, "burst") == 0 && strcmp(range.context, "for this rate") == 0);
    CHECK(strstr(rl_errmsg(), "burst is too large for this rate (max ") != NULL);
    CHECK_EQ(rl_rate_parse("x", &zero_period.limit, &zero_period.period_ms), RL_ERR_INVALID);
    CHECK(!rl_errrange(&range)); /* not a range error: no parts */
    bad("1.5/s", "'/' or 'per'");
    CHECK_EQ(rl_rate_parse(NULL, NULL, NULL), RL_ERR_INVALID);

    rl_algorithm a;
    CHECK_OK(rl_algorithm_parse("sliding_window", &a));
    CHECK_EQ(a, RL_SLIDING_WINDOW);
    CHECK_EQ(rl_algorithm_parse("bogus", &a), RL_ERR_INVALID);
    CHECK(strcmp(rl_algorithm_name(RL_GCRA), "gcra") == 0);
    CHECK(rl_algorithm_name((rl_algorithm)42) == NULL);
    CHECK_EQ(rl_version_number(), RL_VERSION_NUMBER);
    CHECK(strcmp(rl_strerror(RL_ERR_TIMEOUT), "timed out") == 0);
    /* one script decides for every algorithm; the rest are primitives */
    CHECK_EQ(rl_script_count(), 4);
    const char *name, *sha;
    CHECK_OK(rl_script_info(2, &name, &sha));
    CHECK(strcmp(name, "limit") == 0 && strlen(sha) == 40);

    /* the limits library's week, month (30 days) and year (360 days) */
    ok("2/week", 2, 7LL * 86400000);
    ok("3 per month", 3, 30LL * 86400000);
    ok("1/2 years", 1, 2LL * 360 * 86400000);

    /* several rates at once, as the limits library writes them */
    rl_spec spec = {.algorithm = RL_GCRA};
    CHECK_OK(rl_rates_parse("10/second;1000/hour", &spec));
    CHECK_EQ(spec.limit, 10);
    CHECK_EQ(spec.period_ms, 1000);
    CHECK_EQ(spec.more_count, 1);
    CHECK_EQ(spec.more[0].limit, 1000);
    CHECK_EQ(spec.more[0].period_ms, 3600000);
    CHECK_OK(rl_rates_parse("1/s, 5/minute | 100/day", &spec));
    CHECK_EQ(spec.more_count, 2);
    CHECK_EQ(spec.more[1].period_ms, 86400000);
    CHECK_OK(rl_rates_parse("7/hour", &spec));
    CHECK_EQ(spec.more_count, 0);
    CHECK_EQ(rl_rates_parse("10/second;", &spec), RL_ERR_INVALID);
    CHECK_EQ(rl_rates_parse("1/s;1/s;1/s;1/s;1/s;1/s;1/s;1/s;1/s", &spec), RL_ERR_INVALID);
    CHECK(strstr(rl_errmsg(), "at most 8") != NULL);

    /* the old names, kept for callers written against them */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    int64_t limit = 0, period = 0;
    CHECK_OK(rl_parse_rate("3/500ms", &limit, &period));
    CHECK(limit == 3 && period == 500);
    CHECK_OK(rl_parse_rates("7/hour", &spec));
    CHECK_EQ(spec.limit, 7);
    CHECK_EQ(rl_has_tls(), rl_tls_supported());
#pragma GCC diagnostic pop
    return test_summary("rate");
}
