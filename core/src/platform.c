/* Platform differences (platform.h). */
#include <time.h>

#include "platform.h"

/* Linux: CLOCK_MONOTONIC stops while suspended, CLOCK_BOOTTIME does not.
 * macOS: CLOCK_MONOTONIC counts sleep (mach_continuous_time; its
 * CLOCK_UPTIME_RAW is the one that stops). */
#ifdef CLOCK_BOOTTIME
#define RL_CLOCK CLOCK_BOOTTIME
#else
#define RL_CLOCK CLOCK_MONOTONIC
#endif

int64_t rl_now_ms(void)
{
    struct timespec ts;
    clock_gettime(RL_CLOCK, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
