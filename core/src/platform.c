/* Platform differences (platform.h). */
#include <errno.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

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

/* getentropy(3) (glibc 2.25+, musl, macOS 10.12+); glibc before 2.25 (the
 * wheels and the jar target 2.17) has neither it nor a getrandom wrapper:
 * the system call itself. */
#if defined(__GLIBC__) && (__GLIBC__ < 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ < 25))
#include <sys/syscall.h>
static int entropy(void *buf, size_t len)
{
    long n;
    while ((n = syscall(SYS_getrandom, buf, len, 0)) < 0 && errno == EINTR) {
    }
    return n == (long)len ? 0 : -1; /* up to 256 bytes come whole */
}
#else
#include <sys/random.h>
static int entropy(void *buf, size_t len)
{
    return getentropy(buf, len);
}
#endif

/* A kernel without getrandom (ENOSYS: Linux before 3.17, CentOS 7's 3.10)
 * has /dev/urandom. */
static int urandom(unsigned char *p, size_t len)
{
    size_t got = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    while (got < len) {
        ssize_t n = read(fd, p + got, len - got);
        if (n > 0) got += (size_t)n;
        else if (n == 0 || errno != EINTR) break;
    }
    close(fd);
    return got == len ? 0 : -1;
}

int rl_random_bytes(void *buf, size_t len)
{
    unsigned char *p = buf;
    for (size_t done = 0, n; done < len; done += n) {
        n = len - done < 256 ? len - done : 256; /* getentropy's most */
        if (entropy(p + done, n) == 0) continue;
        return errno == ENOSYS ? urandom(p + done, len - done) : -1;
    }
    return 0;
}

/* pipe2 is not on macOS; a pipe made here is made once per client or queue. */
int rl_pipe(int fds[2])
{
    if (pipe(fds) < 0) return -1;
    for (int i = 0; i < 2; i++) {
        if (fcntl(fds[i], F_SETFD, FD_CLOEXEC) < 0 || fcntl(fds[i], F_SETFL, O_NONBLOCK) < 0) {
            int err = errno;
            close(fds[0]);
            close(fds[1]);
            errno = err;
            return -1;
        }
    }
    return 0;
}

void rl_socket_nosigpipe(int fd)
{
#ifdef SO_NOSIGPIPE
    int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &on, sizeof on);
#else
    (void)fd;
#endif
}
