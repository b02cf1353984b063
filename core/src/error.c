#include <stdio.h>
#include <string.h>

#include "internal.h"

static __thread char last_error[512];

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
    return status;
}

void rl_clear_error(void)
{
    last_error[0] = '\0';
}

int rl_version_number(void)
{
    return RL_VERSION_NUMBER;
}
