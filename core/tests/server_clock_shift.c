/* Preloaded into a test's redis-server (LD_PRELOAD): its wall clock
 * (gettimeofday, CLOCK_REALTIME) runs the int64 ms held in the file
 * RL_TEST_CLOCK_SHIFT_FILE names ahead, read at every call, so a test steps
 * Redis's clock while it runs. libfaketime would do, but it clashes with
 * jemalloc, which Debian's redis-server uses (libfaketime issue 130). The
 * real clock comes from the system call: dlsym could allocate, and jemalloc
 * reads the clock while it starts. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static const volatile int64_t *shift_ms;

static int64_t shift(void)
{
    if (!shift_ms) {
        const char *path = getenv("RL_TEST_CLOCK_SHIFT_FILE");
        int fd = path ? open(path, O_RDONLY) : -1;
        void *p = fd >= 0 ? mmap(NULL, sizeof *shift_ms, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
        if (fd >= 0) close(fd);
        if (p == MAP_FAILED) return 0;
        shift_ms = p;
    }
    return *shift_ms;
}

int clock_gettime(clockid_t id, struct timespec *ts)
{
    if (syscall(SYS_clock_gettime, id, ts)) return -1;
    if (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE) {
        int64_t ns = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec + shift() * 1000000;
        ts->tv_sec = (time_t)(ns / 1000000000);
        ts->tv_nsec = (long)(ns % 1000000000);
    }
    return 0;
}

int gettimeofday(struct timeval *tv, void *tz)
{
    struct timespec ts;
    (void)tz;
    if (clock_gettime(CLOCK_REALTIME, &ts)) return -1;
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
    return 0;
}

time_t time(time_t *out)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out) *out = ts.tv_sec;
    return ts.tv_sec;
}
