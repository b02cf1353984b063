/* What differs between the platforms the core runs on (Linux glibc and
 * musl, macOS), behind one interface; platform.c is the only file of the
 * core that names a platform. Not installed. */
#ifndef RL_PLATFORM_H
#define RL_PLATFORM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* The core's clock for every deadline (timeouts, lease validity, remembered
 * denials, idle give-backs), in ms: monotonic, and it goes on while the
 * machine is suspended, as Redis's clock does (a lease counted on a clock
 * that stops would outlive its booking in Redis). */
int64_t rl_now_ms(void);

/* len random bytes from the kernel; 0, or -1 with errno. */
int rl_random_bytes(void *buf, size_t len);

/* A pipe whose ends never block and close on exec; 0, or -1 with errno. */
int rl_pipe(int fds[2]);

/* A write to a peer that hung up must not raise SIGPIPE (it kills a program
 * that does not ignore it): Linux says so per send(2) with this flag, macOS
 * per socket (rl_socket_nosigpipe), which covers OpenSSL's writes too. */
#ifdef MSG_NOSIGNAL
#define RL_MSG_NOSIGNAL MSG_NOSIGNAL
#else
#define RL_MSG_NOSIGNAL 0
#endif
void rl_socket_nosigpipe(int fd);

#endif
