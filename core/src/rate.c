/* Rate strings: "10/s", "100/minute", "5 per 30 seconds", "3/500ms", and
 * several at once: "10/second;1000/hour"; the algorithms' names; a spec's
 * rates. */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

static const struct {
    const char *name;
    int64_t ms;
} units[] = {
    {"ms", 1}, {"millisecond", 1}, {"milliseconds", 1},
    {"s", 1000}, {"sec", 1000}, {"secs", 1000}, {"second", 1000}, {"seconds", 1000},
    {"m", 60000}, {"min", 60000}, {"mins", 60000}, {"minute", 60000}, {"minutes", 60000},
    {"h", 3600000}, {"hr", 3600000}, {"hrs", 3600000}, {"hour", 3600000}, {"hours", 3600000},
    {"d", 86400000}, {"day", 86400000}, {"days", 86400000},
    {"w", 604800000}, {"week", 604800000}, {"weeks", 604800000},
    /* as the limits library counts them */
    {"mo", 2592000000}, {"month", 2592000000}, {"months", 2592000000},
    {"y", 31104000000}, {"year", 31104000000}, {"years", 31104000000},
};

static const char *skip_space(const char *p)
{
    while (isspace((unsigned char)*p)) p++;
    return p;
}

/* Reads a positive integer; returns NULL if there is none or it is too big. */
static const char *read_count(const char *p, int64_t *out)
{
    int64_t v = 0;
    if (!isdigit((unsigned char)*p)) return NULL;
    while (isdigit((unsigned char)*p)) {
        if (v > (RL_MAX_EXACT - 9) / 10) return NULL;
        v = v * 10 + (*p++ - '0');
    }
    *out = v;
    return p;
}

int rl_rate_parse(const char *text, int64_t *limit, int64_t *period_ms)
{
    const char *p, *unit;
    int64_t count, multiplier = 1;
    size_t unit_len;

    rl_clear_error();
    if (!text || !limit || !period_ms) return rl_fail(RL_ERR_INVALID, "rate and outputs must not be NULL");
    p = skip_space(text);
    if (!*p) return rl_fail(RL_ERR_INVALID, "rate is empty; expected e.g. '10/second'");
    if (*p == '-') return rl_fail(RL_ERR_INVALID, "rate '%s': the count must be positive", text);
    const char *after = read_count(p, &count);
    if (!after || count > RL_MAX_EXACT / 2) /* the limit's bound (limiter.c) */
        return isdigit((unsigned char)*p) /* digits, too many of them */
                   ? rl_fail(RL_ERR_INVALID, "rate '%s': the count is too large (max %lld)", text,
                             (long long)(RL_MAX_EXACT / 2))
                   : rl_fail(RL_ERR_INVALID, "rate '%s': expected a whole number of permits first", text);
    p = after;
    if (count == 0) return rl_fail(RL_ERR_INVALID, "rate '%s': the count must be positive", text);
    p = skip_space(p);
    if (*p == '/') {
        p++;
    } else if (!strncasecmp(p, "per", 3) && isspace((unsigned char)p[3])) {
        p += 3;
    } else {
        return rl_fail(RL_ERR_INVALID, "rate '%s': expected '/' or 'per' after the count", text);
    }
    p = skip_space(p);
    if (isdigit((unsigned char)*p)) {
        if (!(p = read_count(p, &multiplier)) || multiplier == 0)
            return rl_fail(RL_ERR_INVALID, "rate '%s': the period length must be a positive number", text);
        p = skip_space(p);
    }
    unit = p;
    while (isalpha((unsigned char)*p)) p++;
    unit_len = (size_t)(p - unit);
    if (*skip_space(p)) return rl_fail(RL_ERR_INVALID, "rate '%s': unexpected '%s' after the unit", text, skip_space(p));
    if (unit_len == 0) return rl_fail(RL_ERR_INVALID, "rate '%s': missing time unit (second, minute, hour, day, week, month)", text);
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strlen(units[i].name) == unit_len && !strncasecmp(units[i].name, unit, unit_len)) {
            if (multiplier > RL_MAX_EXACT / units[i].ms)
                return rl_fail(RL_ERR_INVALID, "rate '%s': the period is too long", text);
            *limit = count;
            *period_ms = multiplier * units[i].ms;
            return RL_OK;
        }
    }
    return rl_fail(RL_ERR_INVALID, "rate '%s': unknown time unit '%.*s' (use ms, second, minute, hour, day, week, month or year)",
                   text, (int)unit_len, unit);
}

/* A rate as users write it and rl_rate_parse reads it back: "4/minute",
 * "5/30 seconds", "3/500ms" (the largest unit up to a week that divides the
 * period; months and years print as days). */
int rl_format_rate(char *buf, size_t size, int64_t limit, int64_t period_ms)
{
    static const struct {
        const char *one, *many;
        int64_t ms;
    } by[] = {{"week", "weeks", 604800000}, {"day", "days", 86400000}, {"hour", "hours", 3600000},
              {"minute", "minutes", 60000}, {"second", "seconds", 1000}};
    for (size_t i = 0; i < sizeof by / sizeof by[0]; i++) {
        if (period_ms % by[i].ms) continue;
        int64_t n = period_ms / by[i].ms;
        if (n == 1) return snprintf(buf, size, "%lld/%s", (long long)limit, by[i].one);
        return snprintf(buf, size, "%lld/%lld %s", (long long)limit, (long long)n, by[i].many);
    }
    return snprintf(buf, size, "%lld/%lldms", (long long)limit, (long long)period_ms);
}

int rl_rates_parse(const char *text, rl_spec *spec)
{
    int64_t limits[RL_MAX_RATES], periods[RL_MAX_RATES];
    size_t n = 0;
    int rc;

    rl_clear_error();
    if (!text || !spec) return rl_fail(RL_ERR_INVALID, "rates and spec must not be NULL");
    for (const char *p = text;;) {
        const char *end = p + strcspn(p, ";,|");
        char one[128];
        if ((size_t)(end - p) >= sizeof one) return rl_fail(RL_ERR_INVALID, "rate '%.*s...' is too long", 40, p);
        memcpy(one, p, (size_t)(end - p));
        one[end - p] = '\0';
        if (n == RL_MAX_RATES) return rl_fail(RL_ERR_INVALID, "'%s': at most %d rates", text, RL_MAX_RATES);
        if ((rc = rl_rate_parse(one, &limits[n], &periods[n]))) return rc;
        n++;
        if (!*end) break;
        p = end + 1;
    }
    spec->limit = limits[0];
    spec->period_ms = periods[0];
    spec->more_count = n - 1;
    for (size_t i = 1; i < n; i++) {
        spec->more[i - 1].limit = limits[i];
        spec->more[i - 1].period_ms = periods[i];
        spec->more[i - 1].burst = 0;
    }
    return RL_OK;
}

/* the old names (ratelimit.h, "old names") */
int rl_parse_rate(const char *text, int64_t *limit, int64_t *period_ms)
{
    return rl_rate_parse(text, limit, period_ms);
}

int rl_parse_rates(const char *text, rl_spec *spec)
{
    return rl_rates_parse(text, spec);
}

const char *const rl_algorithm_names[RL_ALGORITHM_COUNT] = {
    "fixed_window", "sliding_log", "sliding_window", "token_bucket", "leaky_bucket", "gcra",
};

const char *rl_algorithm_name(rl_algorithm algorithm)
{
    if ((int)algorithm < 0 || algorithm >= RL_ALGORITHM_COUNT) return NULL;
    return rl_algorithm_names[algorithm];
}

int rl_algorithm_parse(const char *name, rl_algorithm *out)
{
    for (int i = 0; name && i < RL_ALGORITHM_COUNT; i++) {
        if (!strcmp(name, rl_algorithm_names[i])) {
            *out = (rl_algorithm)i;
            return RL_OK;
        }
    }
    return rl_fail(RL_ERR_INVALID, "unknown algorithm '%s' (expected fixed_window, sliding_log, "
                   "sliding_window, token_bucket, leaky_bucket or gcra)", name ? name : "(null)");
}

/* Every rate of a spec, the first one first; returns how many. */
size_t rl_spec_rates(const rl_spec *spec, rl_rate *out)
{
    size_t n = spec->more_count < RL_MAX_RATES ? spec->more_count + 1 : RL_MAX_RATES;
    out[0].limit = spec->limit;
    out[0].period_ms = spec->period_ms;
    out[0].burst = spec->burst;
    for (size_t i = 1; i < n; i++) out[i] = spec->more[i - 1];
    return n;
}
