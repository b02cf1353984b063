/* Platform differences (platform.h). */
#include <errno.h>

#include "platform.h"

#ifndef _WIN32
#include <fcntl.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

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

/* In a forked child (completions.c): the pipe is shared with the parent. */
int rl_pipe_renew(int fds[2])
{
    int fresh[2];
    if (rl_pipe(fresh) < 0) return -1;
    for (int i = 0; i < 2; i++) {
        if (dup2(fresh[i], fds[i]) >= 0) fcntl(fds[i], F_SETFD, FD_CLOEXEC);
        close(fresh[i]);
    }
    return 0;
}

int rl_pipe_signal(int fd)
{
    return write(fd, "", 1) == 1;
}

ssize_t rl_pipe_read(int fd, void *buf, size_t len)
{
    return read(fd, buf, len);
}

void rl_fd_close(int fd)
{
    close(fd);
}

int rl_net_init(void)
{
    return 0;
}

int rl_poll(struct pollfd *fds, nfds_t n, int timeout_ms)
{
    return poll(fds, n, timeout_ms);
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

#ifdef MSG_NOSIGNAL
#define RL_MSG_NOSIGNAL MSG_NOSIGNAL
#else
#define RL_MSG_NOSIGNAL 0
#endif

ssize_t rl_socket_send(int fd, const void *buf, size_t len, int dontwait)
{
    return send(fd, buf, len, RL_MSG_NOSIGNAL | (dontwait ? MSG_DONTWAIT : 0));
}

ssize_t rl_socket_peek(int fd, char *byte)
{
    ssize_t n = recv(fd, byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && errno == EWOULDBLOCK) errno = EAGAIN;
    return n;
}

int rl_socket_nonblocking(int fd, int on)
{
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0) return -1;
    if (fcntl(fd, F_SETFL, on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK) < 0) return -1;
    return (flags & O_NONBLOCK) != 0;
}

void rl_socket_rcvtimeo(int fd, int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

void rl_socket_close(int fd)
{
    close(fd);
}

/* OpenSSL writes for itself, so around TLS I/O the calling thread blocks
 * SIGPIPE and swallows one it caused, as libpq does (sigwait: macOS has no
 * sigtimedwait; it returns at once, the signal being pending for this
 * thread). */
void rl_sigpipe_block(rl_sigpipe_guard *g)
{
    sigset_t pipe_only, pending;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_only, &g->old);
    sigpending(&pending);
    g->was_pending = sigismember(&pending, SIGPIPE);
}

void rl_sigpipe_restore(rl_sigpipe_guard *g)
{
    sigset_t pipe_only, pending;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    if (!g->was_pending && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE)) {
        int saved = errno, sig;
        sigwait(&pipe_only, &sig);
        errno = saved;
    }
    pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

void rl_at_fork(void (*before)(void), void (*in_parent)(void), void (*in_child)(void))
{
    pthread_atfork(before, in_parent, in_child);
}

/* POSIX systems keep their roots in files (conn.c's bundles); macOS's
 * keychain OpenSSL cannot read (docs/binaries.md, "Trust store"). */
int rl_system_roots(void (*add)(void *arg, const unsigned char *der, size_t len), void *arg)
{
    (void)add;
    (void)arg;
    return 0;
}

#else /* _WIN32 */
#include <limits.h>

#include <bcrypt.h>
#include <windows.h>
#include <wincrypt.h> /* after windows.h */

/* The interrupt time counts while the machine sleeps or hibernates (the
 * unbiased one and QueryUnbiasedInterruptTime do not; nor, per Microsoft,
 * is QueryPerformanceCounter promised to). QueryInterruptTimePrecise
 * (Windows 10+) reads it to 100 ns; where it is missing (Wine 8, older
 * Windows) GetTickCount64, the same count in ms ticks of 10-16 ms on
 * Windows. Looked up at run time: MinGW's kernel32 has no import of it. */
typedef void(WINAPI *interrupt_time_fn)(PULONGLONG);
static interrupt_time_fn interrupt_time(void)
{
    static interrupt_time_fn fn;
    static volatile LONG looked;
    if (!InterlockedCompareExchange(&looked, 0, 0)) {
        HMODULE base = GetModuleHandleW(L"kernelbase.dll");
        FARPROC p = base ? GetProcAddress(base, "QueryInterruptTimePrecise") : NULL;
        fn = (interrupt_time_fn)(void (*)(void))p;
        InterlockedExchange(&looked, 1);
    }
    return fn;
}

int64_t rl_now_ms(void)
{
    interrupt_time_fn fn = interrupt_time();
    if (fn) {
        ULONGLONG t;
        fn(&t);
        return (int64_t)(t / 10000);
    }
    return (int64_t)GetTickCount64();
}

int rl_random_bytes(void *buf, size_t len)
{
    for (unsigned char *p = buf; len > 0;) {
        ULONG n = len > 0x10000000 ? 0x10000000 : (ULONG)len;
        if (!BCRYPT_SUCCESS(BCryptGenRandom(NULL, p, n, BCRYPT_USE_SYSTEM_PREFERRED_RNG))) {
            errno = EIO;
            return -1;
        }
        p += n;
        len -= n;
    }
    return 0;
}

int rl_system_roots(void (*add)(void *arg, const unsigned char *der, size_t len), void *arg)
{
    HCERTSTORE store = CertOpenSystemStoreW(0, L"ROOT");
    int n = 0;
    if (!store) {
        errno = EACCES;
        return -1;
    }
    for (PCCERT_CONTEXT cert = NULL; (cert = CertEnumCertificatesInStore(store, cert)) != NULL; n++)
        add(arg, cert->pbCertEncoded, cert->cbCertEncoded);
    CertCloseStore(store, 0);
    return n;
}

/* Winsock reports through WSAGetLastError: the core reads errno. */
static int wsa_errno(void)
{
    switch (WSAGetLastError()) {
    case WSAEWOULDBLOCK: return EAGAIN;
    case WSAEINTR: return EINTR;
    case WSAECONNRESET: return ECONNRESET;
    case WSAECONNABORTED: return ECONNABORTED;
    case WSAENOTCONN: return ENOTCONN;
    case WSAETIMEDOUT: return ETIMEDOUT;
    case WSAENOBUFS: return ENOBUFS;
    case WSAEMFILE: return EMFILE;
    case WSAENOTSOCK: return EBADF;
    case WSAEINVAL: return EINVAL;
    default: return EIO;
    }
}

static int fail_wsa(void)
{
    errno = wsa_errno();
    return -1;
}

static BOOL CALLBACK wsa_start(PINIT_ONCE once, PVOID arg, PVOID *ctx)
{
    WSADATA data;
    (void)once;
    (void)ctx;
    *(int *)arg = WSAStartup(MAKEWORD(2, 2), &data);
    return TRUE;
}

/* Once per process and never undone: WSACleanup would pull the sockets
 * from under clients still open at exit. Not from DllMain (Microsoft: it may
 * load other libraries under the loader lock), so at the first socket. */
int rl_net_init(void)
{
    static INIT_ONCE once = INIT_ONCE_STATIC_INIT;
    static int rc;
    InitOnceExecuteOnce(&once, wsa_start, &rc, NULL);
    if (rc != 0) {
        errno = EIO;
        return -1;
    }
    return 0;
}

/* WSAPoll, Vista's poll over sockets. Its quirks, against what the core
 * asks: events may hold only POLLIN and POLLOUT (POLLERR or POLLHUP there
 * fail it with WSAEINVAL; they come back in revents anyway); an entry with
 * no socket (a connection being redialled) is ignored on Windows and flagged
 * POLLNVAL, uncounted, by Wine 8: cleared here. Before Windows 10 2004 it
 * never reported a failed connect(); the core never polls a connecting
 * socket (the dialer's hiredis connects before the I/O thread takes it), so
 * only hiredis's own connect wait is exposed: there, on such a Windows, a
 * refused connection fails at the connect timeout instead of at once. */
int rl_poll(struct pollfd *fds, rl_nfds n, int timeout_ms)
{
    if (WSAPoll(fds, n, timeout_ms) == SOCKET_ERROR) return fail_wsa();
    int got = 0;
    for (rl_nfds i = 0; i < n; i++) {
        if (fds[i].fd == INVALID_SOCKET) fds[i].revents = 0;
        got += fds[i].revents != 0;
    }
    return got;
}

static SOCKET tcp_socket(void)
{
    return WSASocketW(AF_INET, SOCK_STREAM, IPPROTO_TCP, NULL, 0, WSA_FLAG_OVERLAPPED | WSA_FLAG_NO_HANDLE_INHERIT);
}

/* A loopback TCP pair: WSAPoll watches sockets only (no pipes, no
 * socketpair). The listener takes one connection and must see our own
 * client's address at the other end (another local process could connect
 * first), then is closed. */
int rl_pipe(SOCKET fds[2])
{
    SOCKET listener = INVALID_SOCKET, client = INVALID_SOCKET, server = INVALID_SOCKET;
    struct sockaddr_in addr = {0}, mine = {0}, peer = {0};
    int len = sizeof addr;
    u_long on = 1;
    BOOL nodelay = TRUE;
    if (rl_net_init() < 0) return -1;
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if ((listener = tcp_socket()) == INVALID_SOCKET) goto fail;
    if (bind(listener, (struct sockaddr *)&addr, sizeof addr) || getsockname(listener, (struct sockaddr *)&addr, &len) ||
        listen(listener, 1))
        goto fail;
    if ((client = tcp_socket()) == INVALID_SOCKET || connect(client, (struct sockaddr *)&addr, sizeof addr))
        goto fail;
    len = sizeof mine;
    if (getsockname(client, (struct sockaddr *)&mine, &len)) goto fail;
    len = sizeof peer;
    if ((server = accept(listener, (struct sockaddr *)&peer, &len)) == INVALID_SOCKET) goto fail;
    if (peer.sin_port != mine.sin_port || peer.sin_addr.s_addr != mine.sin_addr.s_addr) {
        WSASetLastError(WSAECONNREFUSED);
        goto fail;
    }
    closesocket(listener);
    /* a wake-up byte goes out at once, never held back by Nagle */
    setsockopt(client, IPPROTO_TCP, TCP_NODELAY, (const char *)&nodelay, sizeof nodelay);
    if (ioctlsocket(server, FIONBIO, &on) || ioctlsocket(client, FIONBIO, &on)) {
        int err = wsa_errno();
        closesocket(server);
        closesocket(client);
        errno = err;
        return -1;
    }
    fds[0] = server;
    fds[1] = client;
    return 0;
fail:;
    int err = wsa_errno();
    if (listener != INVALID_SOCKET) closesocket(listener);
    if (client != INVALID_SOCKET) closesocket(client);
    if (server != INVALID_SOCKET) closesocket(server);
    errno = err;
    return -1;
}

int rl_pipe_renew(SOCKET fds[2])
{
    (void)fds; /* no fork */
    return -1;
}

int rl_pipe_signal(SOCKET fd)
{
    return send(fd, "", 1, 0) == 1;
}

ssize_t rl_pipe_read(SOCKET fd, void *buf, size_t len)
{
    int n = recv(fd, buf, len > INT_MAX ? INT_MAX : (int)len, 0);
    return n == SOCKET_ERROR ? fail_wsa() : n;
}

void rl_fd_close(SOCKET fd)
{
    closesocket(fd);
}

void rl_socket_nosigpipe(SOCKET fd)
{
    (void)fd; /* no signals */
}

/* No MSG_DONTWAIT: the I/O thread's sockets are non-blocking already
 * (async.c), the others blocking as the callers want. A blocking send on
 * Windows returns only once all of it went, so its SO_SNDTIMEO (the command
 * timeout) would bound the whole pipeline, where POSIX returns what went
 * and bounds each wait: at most 64 KiB per call keeps POSIX's meaning. */
ssize_t rl_socket_send(SOCKET fd, const void *buf, size_t len, int dontwait)
{
    if (!dontwait && len > 65536) len = 65536;
    int n = send(fd, buf, (int)(len > INT_MAX ? INT_MAX : len), 0);
    return n == SOCKET_ERROR ? fail_wsa() : n;
}

/* Without MSG_DONTWAIT and without reading the socket's mode back: a
 * readable socket with nothing queued is at EOF or failed, so peeking then
 * returns at once; one not readable has nothing yet. */
ssize_t rl_socket_peek(SOCKET fd, char *byte)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int n = WSAPoll(&p, 1, 0);
    if (n == SOCKET_ERROR) return fail_wsa();
    if (n == 0) {
        errno = EAGAIN;
        return -1;
    }
    n = recv(fd, byte, 1, MSG_PEEK);
    return n == SOCKET_ERROR ? fail_wsa() : n;
}

/* Windows cannot tell a socket's mode: the core only switches sockets it
 * knows blocking (hiredis's), so "was blocking" is what it reports. */
int rl_socket_nonblocking(SOCKET fd, int on)
{
    u_long mode = on ? 1 : 0;
    return ioctlsocket(fd, FIONBIO, &mode) ? fail_wsa() : 0;
}

/* Winsock takes the timeout as a DWORD of ms, not a timeval. */
void rl_socket_rcvtimeo(SOCKET fd, int ms)
{
    DWORD t = (DWORD)ms;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, (const char *)&t, sizeof t);
}

void rl_socket_close(SOCKET fd)
{
    closesocket(fd);
}

void rl_sigpipe_block(rl_sigpipe_guard *g)
{
    (void)g;
}

void rl_sigpipe_restore(rl_sigpipe_guard *g)
{
    (void)g;
}

void rl_at_fork(void (*before)(void), void (*in_parent)(void), void (*in_child)(void))
{
    (void)before;
    (void)in_parent;
    (void)in_child;
}
#endif
