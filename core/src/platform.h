/* What differs between the platforms the core runs on (Linux glibc and
 * musl, macOS), behind one interface; platform.c is the only file of the
 * core that names a platform. Not installed. */
#ifndef RL_PLATFORM_H
#define RL_PLATFORM_H

#include <stdint.h>

/* The core's clock for every deadline (timeouts, lease validity, remembered
 * denials, idle give-backs), in ms: monotonic, and it goes on while the
 * machine is suspended, as Redis's clock does (a lease counted on a clock
 * that stops would outlive its booking in Redis). */
int64_t rl_now_ms(void);

#endif
