/* Rate strings: "10/s", "100/minute", "5 per 30 seconds", "3/500ms". */
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

int rl_parse_rate(const char *text, int64_t *limit, int64_t *period_ms)
{
    const char *p, *unit;
    int64_t count, multiplier = 1;
    size_t unit_len;

    rl_clear_error();
    if (!text || !limit || !period_ms) return rl_fail(RL_ERR_INVALID, "rate and outputs must not be NULL");
    p = skip_space(text);
    if (!*p) return rl_fail(RL_ERR_INVALID, "rate is empty; expected e.g. '10/second'");
    if (*p == '-') return rl_fail(RL_ERR_INVALID, "rate '%s': the count must be positive", text);
    if (!(p = read_count(p, &count)))
        return rl_fail(RL_ERR_INVALID, "rate '%s': expected a whole number of permits first", text);
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
    if (unit_len == 0) return rl_fail(RL_ERR_INVALID, "rate '%s': missing time unit (second, minute, hour, day)", text);
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strlen(units[i].name) == unit_len && !strncasecmp(units[i].name, unit, unit_len)) {
            if (multiplier > RL_MAX_EXACT / units[i].ms)
                return rl_fail(RL_ERR_INVALID, "rate '%s': the period is too long", text);
            *limit = count;
            *period_ms = multiplier * units[i].ms;
            return RL_OK;
        }
    }
    return rl_fail(RL_ERR_INVALID, "rate '%s': unknown time unit '%.*s' (use ms, second, minute, hour or day)",
                   text, (int)unit_len, unit);
}
