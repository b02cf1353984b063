/* Links against the installed library and checks header and library agree. */
#include <ratelimit.h>
#include <stdio.h>

int main(void)
{
    int64_t limit, period;
    if (rl_version_number() != RL_VERSION_NUMBER) return 1;
    if (rl_rate_parse("5 per 30 seconds", &limit, &period) || limit != 5 || period != 30000) return 1;
    /* the header's macro calls rl_requests_validate_sized: exported too */
    rl_request request = {.name = "n", .id = "i", .spec = {.algorithm = RL_GCRA, .limit = 10, .period_ms = 1000},
                          .permits = 1};
    if (rl_requests_validate(&request, 1)) return 1;
    puts("installed package works");
    return 0;
}
