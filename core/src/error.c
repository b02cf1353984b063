#include <stdio.h>
#include <string.h>

#include "internal.h"

static __thread char last_error[512];
/* the parts of the last error when it was a number out of range */
static __thread struct {
    int set;
    char param[64];
    char context[64];
    int64_t value, min, max;
} last_range;

const char *rl_strerror(int status)
{
    switch (status) {
    case RL_OK: return "ok";
    case RL_ERR_INVALID: return "invalid argument";
    case RL_ERR_CONNECTION: return "cannot reach Redis";
    case RL_ERR_TIMEOUT: return "timed out";
    case RL_ERR_PROTOCOL: return "unexpected reply from Redis";
    case RL_ERR_REDIS: return "Redis returned an error";
    case RL_ERR_NOMEM: return "out of memory";
    case RL_ERR_CLOSED: return "client is closed";
    case RL_ERR_CANCELLED: return "wait cancelled";
    case RL_ERR_BACKLOG: return "too many requests in flight: the server is behind";
    default: return "unknown status";
    }
}

const char *rl_errmsg(void)
{
    return last_error;
}

int rl_fail(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    last_range.set = 0;
    return status;
}

int rl_fail_range(const char *param, const char *context, int64_t value, int64_t min, int64_t max)
{
    if (!context) context = "";
    if (value > max)
        rl_fail(RL_ERR_INVALID, "%s is too large%s%s (max %lld, got %lld)", param, *context ? " " : "", context,
                (long long)max, (long long)value);
    else
        rl_fail(RL_ERR_INVALID, "%s must be in %lld..%lld (got %lld)", param, (long long)min, (long long)max,
                (long long)value);
    snprintf(last_range.param, sizeof last_range.param, "%s", param);
    snprintf(last_range.context, sizeof last_range.context, "%s", context);
    last_range.value = value;
    last_range.min = min;
    last_range.max = max;
    last_range.set = 1;
    return RL_ERR_INVALID;
}

int rl_errrange(rl_range_error *out)
{
    if (!last_range.set || !last_error[0]) return 0;
    if (out) {
        out->param = last_range.param;
        out->context = last_range.context;
        out->value = last_range.value;
        out->min = last_range.min;
        out->max = last_range.max;
    }
    return 1;
}

void rl_clear_error(void)
{
    last_error[0] = '\0';
    last_range.set = 0;
}

int rl_version_number(void)
{
    return RL_VERSION_NUMBER;
}

/* ---- the argument checks every layer makes ---- */

int rl_check_name(const char *what, const char *value)
{
    if (!value || !*value) return rl_fail(RL_ERR_INVALID, "%s must not be empty", what);
    if (strlen(value) > 1024) return rl_fail(RL_ERR_INVALID, "%s is longer than 1024 bytes", what);
    return RL_OK;
}

int rl_check_id(const char *id)
{
    if (!id || !*id) return rl_fail(RL_ERR_INVALID, "id must not be empty");
    if (strlen(id) > RL_ID_MAX) return rl_fail(RL_ERR_INVALID, "id is longer than %d bytes", RL_ID_MAX);
    return RL_OK;
}

int rl_check_range(const char *what, int64_t value, int64_t min, int64_t max)
{
    return value < min || value > max ? rl_fail_range(what, NULL, value, min, max) : RL_OK;
}
