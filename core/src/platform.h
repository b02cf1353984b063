/* What differs between the platforms the core runs on (Linux glibc and
 * musl, macOS, Windows), behind one interface; platform.c is the only file
 * of the core that names a platform. Not installed. */
#ifndef RL_PLATFORM_H
#define RL_PLATFORM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef _WIN32
/* struct pollfd, POLLIN, WSAPoll and inet_pton: Vista and later */
#include <winsock2.h>
#include <ws2tcpip.h>
typedef SOCKET rl_fd; /* a socket: the wake-ups are loopback socket pairs */
#define RL_NO_FD INVALID_SOCKET
typedef ULONG rl_nfds;
#else
#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
typedef int rl_fd; /* a socket or a pipe's end */
#define RL_NO_FD (-1)
typedef nfds_t rl_nfds;
#endif

/* The core's clock for every deadline (timeouts, lease validity, remembered
 * denials, idle give-backs), in ms: monotonic, and it goes on while the
 * machine is suspended, as Redis's clock does (a lease counted on a clock
 * that stops would outlive its booking in Redis). */
int64_t rl_now_ms(void);

/* len random bytes from the kernel; 0, or -1 with errno. */
int rl_random_bytes(void *buf, size_t len);

/* The roots the system trusts where it keeps them outside files OpenSSL
 * reads: Windows' ROOT certificate store (the machine's and the user's, as
 * Windows' own TLS uses it). Gives each one's DER to add; returns how many,
 * 0 where the system has no such store, -1 (errno) when it cannot be read. */
int rl_system_roots(void (*add)(void *arg, const unsigned char *der, size_t len), void *arg);

/* Before the first socket: Winsock's start-up (once; nothing elsewhere).
 * 0, or -1 with errno. */
int rl_net_init(void);

/* poll(2) over sockets and wake-up ends; -1 with errno. */
int rl_poll(struct pollfd *fds, rl_nfds n, int timeout_ms);

/* A wake-up channel: a pipe (a loopback socket pair on Windows, where only
 * sockets can be polled) whose ends never block and are not inherited by
 * child processes; 0, or -1 with errno. */
int rl_pipe(rl_fd fds[2]);
/* In a forked child: a new pipe in place of fds, under the same numbers
 * (an event loop's registration stays valid); 0, or -1. */
int rl_pipe_renew(rl_fd fds[2]);
/* One byte into the write end: 1, or 0 when it is full (a wake-up is
 * pending then) or broken. */
int rl_pipe_signal(rl_fd fd);
/* Reads what the read end holds into buf: bytes read, 0 at EOF, -1 with
 * errno (EAGAIN: empty). */
ssize_t rl_pipe_read(rl_fd fd, void *buf, size_t len);
void rl_fd_close(rl_fd fd);

/* Sockets (hiredis's redisFD). A write to a peer that hung up must not
 * raise SIGPIPE (it kills a program that does not ignore it): Linux says so
 * per send(2) (MSG_NOSIGNAL), macOS per socket (rl_socket_nosigpipe), which
 * covers OpenSSL's writes too; Windows has no signals. */
void rl_socket_nosigpipe(rl_fd fd);
/* send(2) of what the socket takes; dontwait: return rather than block.
 * -1 with errno (EAGAIN, EINTR, ...). */
ssize_t rl_socket_send(rl_fd fd, const void *buf, size_t len, int dontwait);
/* Peeks at one byte without blocking: 1, 0 at EOF, -1 with errno (EAGAIN:
 * nothing there yet). */
ssize_t rl_socket_peek(rl_fd fd, char *byte);
/* Sets the socket blocking (on = 0) or not; returns what it was (1
 * non-blocking), or -1. */
int rl_socket_nonblocking(rl_fd fd, int on);
/* A blocking read's timeout (SO_RCVTIMEO), ms. */
void rl_socket_rcvtimeo(rl_fd fd, int ms);
void rl_socket_close(rl_fd fd);

/* Around OpenSSL's own socket I/O (it writes with plain send/write): the
 * calling thread blocks SIGPIPE and swallows one it caused. */
typedef struct {
#ifndef _WIN32
    sigset_t old;
    int was_pending;
#else
    char none;
#endif
} rl_sigpipe_guard;
void rl_sigpipe_block(rl_sigpipe_guard *g);
void rl_sigpipe_restore(rl_sigpipe_guard *g);

/* fork(2)'s hooks, where there is fork (pthread_atfork); nothing on Windows. */
void rl_at_fork(void (*before)(void), void (*in_parent)(void), void (*in_child)(void));

#endif
