/*
 * p5.h — the p5 runtime's C ABI (C and C++).
 *
 * Link with libp5_runtime.a (gcc main.c libp5_runtime.a -lpthread -ldl -lm -lrt) or with
 * libp5_runtime.so. Every symbol starts with p5_. Nothing here blocks the caller or lets a
 * Rust panic escape; the socket wrappers return exactly what libc returned and leave errno as
 * libc set it. Sensor ids are stable 64-bit numbers (p5-instrument derives them); 0 means
 * "no sensor".
 *
 * Configuration is read from the environment at initialisation: P5_LOGSERVER (host:port,
 * default 127.0.0.1:28725), P5_DIR (spool directory; alone it selects local-file mode),
 * P5_SESSION, P5_DISABLE=1, P5_EXIT_TIMEOUT_MS (default 3000), P5_RING_SLOTS, P5_FLUSH_MS,
 * P5_CLOCK=mono, P5_DISCARD=1.
 */
#ifndef P5_H
#define P5_H

#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/socket.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- life cycle ---------------------------------------------------------------------- */

/* Initialise (optional: the first event does it). Returns 1 if sensors record. */
int p5_init(void);
/* Drain and wait until everything recorded so far is acknowledged or spooled (bounded by
 * P5_EXIT_TIMEOUT_MS). Returns 1 if that completed. Runs automatically at exit(). */
int p5_flush(void);
/* Flush, say goodbye to the log server, stop recording for good. */
void p5_shutdown(void);
/* 1 if sensors record. */
int p5_enabled(void);
/* Pause (0) or resume (1) recording. */
void p5_set_enabled(int on);

/* ---- sensors ------------------------------------------------------------------------- */

void p5_enter(uint64_t sensor);
void p5_exit(uint64_t sensor);
void p5_mark(uint64_t sensor);
void p5_counter(uint64_t sensor, int64_t value);

/* Non-zero while recording; lets the inline helpers below skip the call when off. */
extern unsigned char p5_active;

static inline int p5_is_active(void) {
    return __atomic_load_n(&p5_active, __ATOMIC_RELAXED) != 0;
}

/* Inline sensors: skip the call entirely while recording is off (< 1 ns). */
static inline void p5_enter_inline(uint64_t sensor) {
    if (p5_is_active()) p5_enter(sensor);
}
static inline void p5_exit_inline(uint64_t sensor) {
    if (p5_is_active()) p5_exit(sensor);
}
static inline void p5_mark_inline(uint64_t sensor) {
    if (p5_is_active()) p5_mark(sensor);
}

typedef struct p5_scope {
    uint64_t sensor;
    int on;
} p5_scope_t;

static inline p5_scope_t p5_scope_begin(uint64_t sensor) {
    p5_scope_t s;
    s.sensor = sensor;
    s.on = p5_is_active();
    if (s.on) p5_enter(sensor);
    return s;
}

static inline void p5_scope_end(p5_scope_t *s) {
    if (s->on) p5_exit(s->sensor);
}

#define P5_CONCAT_(a, b) a##b
#define P5_CONCAT(a, b) P5_CONCAT_(a, b)
/* Enter `sensor` now and exit it when the enclosing block is left (any way but longjmp). */
#define P5_SCOPE(sensor)                                                                     \
    p5_scope_t P5_CONCAT(p5_scope_, __COUNTER__) __attribute__((cleanup(p5_scope_end))) =    \
        p5_scope_begin(sensor)

/* ---- statistics ---------------------------------------------------------------------- */

struct p5_stats {
    uint64_t events;         /* drained from thread buffers */
    uint64_t dropped;        /* lost to full thread buffers */
    uint64_t streams;        /* threads seen */
    uint64_t frames;         /* data frames built */
    uint64_t frames_sent;    /* transmissions, resends included */
    uint64_t frames_acked;   /* acknowledged as durable by the log server */
    uint64_t frames_spooled; /* written to the spool file */
    uint64_t frames_lost;    /* could not be stored */
};
void p5_stats(struct p5_stats *out);

/* ---- communication ------------------------------------------------------------------- */

/* Operation codes for p5_comm (the wire's CommOp). */
enum p5_op {
    P5_OP_SEND = 1, P5_OP_RECV = 2, P5_OP_SENDTO = 3, P5_OP_RECVFROM = 4,
    P5_OP_SENDMSG = 5, P5_OP_RECVMSG = 6, P5_OP_READ = 7, P5_OP_WRITE = 8,
    P5_OP_CONNECT = 9, P5_OP_ACCEPT = 10, P5_OP_CLOSE = 11, P5_OP_SHUTDOWN = 12,
    P5_OP_WAIT = 13
};

/* Raw ticks of the runtime clock: take before a call, pass to p5_comm as start_ticks. */
uint64_t p5_ticks(void);
/* Record a call made without the wrappers: result = bytes (or new fd) or -errno; peer may
 * be NULL. */
void p5_comm(uint64_t sensor, int op, int64_t fd, uint64_t start_ticks, int64_t result,
             const struct sockaddr *peer, socklen_t peer_len);
/* Record fd's protocol and endpoints now (normally done on first use automatically). */
void p5_socket(uint64_t sensor, int fd);

/* Wrappers: call the libc function, record duration, bytes or -errno, endpoints. */
ssize_t p5_send(uint64_t sensor, int fd, const void *buf, size_t len, int flags);
ssize_t p5_recv(uint64_t sensor, int fd, void *buf, size_t len, int flags);
ssize_t p5_sendto(uint64_t sensor, int fd, const void *buf, size_t len, int flags,
                  const struct sockaddr *dest, socklen_t dest_len);
ssize_t p5_recvfrom(uint64_t sensor, int fd, void *buf, size_t len, int flags,
                    struct sockaddr *src, socklen_t *src_len);
ssize_t p5_sendmsg(uint64_t sensor, int fd, const struct msghdr *msg, int flags);
ssize_t p5_recvmsg(uint64_t sensor, int fd, struct msghdr *msg, int flags);
ssize_t p5_read(uint64_t sensor, int fd, void *buf, size_t len);
ssize_t p5_write(uint64_t sensor, int fd, const void *buf, size_t len);
int p5_connect(uint64_t sensor, int fd, const struct sockaddr *addr, socklen_t len);
int p5_accept(uint64_t sensor, int fd, struct sockaddr *addr, socklen_t *len);
int p5_accept4(uint64_t sensor, int fd, struct sockaddr *addr, socklen_t *len, int flags);
int p5_close(uint64_t sensor, int fd);
/* shutdown(2) on a socket (p5_shutdown stops the runtime). */
int p5_shutdown_socket(uint64_t sensor, int fd, int how);

/* Waits: call the libc function and record the time as waiting (P5_OP_WAIT: fd is the epoll
 * descriptor, -1 for poll and select; result the ready count or -errno). The structs are
 * declared only, so this header pulls in no poll/select/epoll/signal headers; fd_set and
 * sigset_t pointers are passed as void pointers. */
struct pollfd;
struct timeval;
struct timespec;
struct epoll_event;
int p5_poll(uint64_t sensor, struct pollfd *fds, unsigned long nfds, int timeout);
int p5_ppoll(uint64_t sensor, struct pollfd *fds, unsigned long nfds,
             const struct timespec *timeout, const void *sigmask);
int p5_select(uint64_t sensor, int nfds, void *readfds, void *writefds, void *exceptfds,
              struct timeval *timeout);
int p5_pselect(uint64_t sensor, int nfds, void *readfds, void *writefds, void *exceptfds,
               const struct timespec *timeout, const void *sigmask);
int p5_epoll_wait(uint64_t sensor, int epfd, struct epoll_event *events, int maxevents,
                  int timeout);
int p5_epoll_pwait(uint64_t sensor, int epfd, struct epoll_event *events, int maxevents,
                   int timeout, const void *sigmask);

#ifdef __cplusplus
}
#endif

#endif /* P5_H */
