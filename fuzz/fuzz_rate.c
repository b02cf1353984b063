/* rl_rate_parse on arbitrary text. On success the rate is in range and its
 * canonical spellings parse to the same rate; on failure the outputs are
 * untouched and a message says why. */
#include <inttypes.h>

#include "fuzz.h"
#include "internal.h"

/* text (fmt with limit and n) must parse to limit per period */
static void reparse(const char *fmt, int64_t limit, int64_t n, int64_t period)
{
    char text[96];
    int64_t l = 0, p = 0;
    snprintf(text, sizeof text, fmt, limit, n);
    FUZZ_CHECK(rl_rate_parse(text, &l, &p) == RL_OK);
    FUZZ_CHECK(l == limit && p == period);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_cstr(data, size);
    int64_t limit = -7, period = -7;
    int rc = rl_rate_parse(text, &limit, &period);
    if (rc != RL_OK) {
        FUZZ_CHECK(rc == RL_ERR_INVALID);
        FUZZ_CHECK(rl_errmsg()[0] != '\0');
        FUZZ_CHECK(limit == -7 && period == -7);
    } else {
        FUZZ_CHECK(rl_errmsg()[0] == '\0');
        FUZZ_CHECK(limit >= 1 && limit <= RL_MAX_EXACT);
        FUZZ_CHECK(period >= 1 && period <= RL_MAX_EXACT);
        /* the count is the leading number, as written */
        char *end;
        FUZZ_CHECK(strtoll(text, &end, 10) == limit);
        reparse("%" PRId64 "/%" PRId64 "ms", limit, period, period);
        reparse(" %" PRId64 " PER %" PRId64 " milliseconds ", limit, period, period);
        if (period % 1000 == 0) reparse("%" PRId64 " per %" PRId64 " s", limit, period / 1000, period);
    }
    FUZZ_CHECK(rl_rate_parse(text, NULL, &period) == RL_ERR_INVALID);
    free(text);
    return 0;
}
