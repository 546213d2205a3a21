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
 * P5_SESSION, P5_DISABLE=1, P5_EXIT_TIMEOUT_MS (default 3000), P5_RING (slots per thread,
 * default 1M), P5_FULL=grace|drop|wait, P5_THROTTLE=N,T|off, P5_FLUSH_MS, P5_CLOCK=mono, P5_DISCARD=1.
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
/* Register an instrumented file's sensor table (a string literal; p5-instrument emits this in
 * a constructor at the end of every file it rewrote). Only stores the pointer: safe before
 * main. The runtime sends each table once per process, so recordings name their sensors
 * without a manifest. */
void p5_describe(const char *table);

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

/* ---- scope sensors: the inline hot path and throttling -------------------------------
 *
 * P5_SCOPE(id) gives the scope a static call site (struct p5_site) and a guard that does the
 * work inline: a relaxed load of p5_active, the site's state, the thread's ring pointer (a C
 * thread-local set by the runtime), rdtsc and two stores into the ring, a release store of
 * the head. Only the first event of a thread, a ring past its limit and the rare throttling
 * transitions call into the runtime; a throttled call is only counted (2-3 ns a pair). With
 * -DP5_CALL_RECORD a recorded call goes through p5_site_enter/p5_site_exit instead (smaller
 * code; no difference beyond the noise in the real programs measured, ARCHITECTURE.md).
 * Throttling (TAU's rule, P5_THROTTLE=N,T[,all], default 1000,10us):
 * after N timed calls with a mean below T a site stops recording and only counts calls;
 * every 64th call is still timed and recorded if it takes longer than T, and for 4096 calls
 * after a call longer than T (before throttling, or a timed one after) the site times every
 * call, so long calls that come in runs are each recorded, while one preempted call costs
 * a tiny function only 4096 timed calls (P5_SCOPE_COUNT sites stay sampled); with ",all"
 * every throttled call is timed, so every call longer than T is recorded.
 * The selection
 * file can pin a site on (P5_SCOPE_ALWAYS: always recorded) or off (P5_SCOPE_COUNT:
 * counted only). Counts are relaxed loads and stores: exact for one thread, possibly a few
 * short when threads race on one site. Without x86-64 (or with -DP5_NO_INLINE, or where
 * the runtime does not use the TSC) the guard calls p5_enter/p5_exit and never throttles. */

#define P5_ALWAYS_INLINE_ static inline __attribute__((always_inline))

/* A throttled call is timed when (calls & mask) == 0: every 64th by default; with
 * P5_THROTTLE=N,T,all the runtime sets the mask to 0, timing (and so recording) every long
 * call at two rdtsc per call. -DP5_SAMPLE_MASK=M fixes the mask at build time. */
#ifdef P5_SAMPLE_MASK
#define P5_SAMPLE_MASK_ ((uint64_t)(P5_SAMPLE_MASK))
#else
extern uint64_t p5_sample_mask;
#define P5_SAMPLE_MASK_ __atomic_load_n(&p5_sample_mask, __ATOMIC_RELAXED)
#endif

enum p5_site_state { P5_SITE_AUTO = 0, P5_SITE_ALWAYS = 1, P5_SITE_THROTTLED = 2, P5_SITE_COUNT = 3 };

typedef struct p5_site {
    uint64_t sensor;   /* the id of its first call */
    uint64_t calls;    /* calls begun */
    uint64_t timed;    /* calls timed (recorded ones, sampled throttled ones) */
    uint64_t ticks;    /* their summed duration, TSC ticks */
    uint32_t state;    /* enum p5_site_state */
    uint32_t listed;   /* on the runtime's report list */
    uint64_t since;    /* TSC when throttled */
    uint64_t recorded; /* calls longer than T recorded (before throttling and after) */
    uint64_t long_until; /* a throttled site times every call while calls < this */
    struct p5_site *next;
} p5_site_t;

/* Runtime side of the guards: a recorded call's enter (returns its TSC stamp) and exit (which
 * also applies the throttling rule), and the rare transitions. */
uint64_t p5_site_enter(p5_site_t *site, uint64_t sensor);
void p5_site_exit(p5_site_t *site, uint64_t sensor, uint64_t t0);
void p5_site_throttle(p5_site_t *site);
void p5_site_list(p5_site_t *site);
void p5_site_long(p5_site_t *site, uint64_t t0, uint64_t t1);
void p5_site_saw_long(p5_site_t *site);
void p5_push_slow(uint32_t kind, uint64_t t, uint64_t sensor);
/* Calls before the rule applies (0: off or not calibrated yet) and its bound in TSC ticks. */
extern uint64_t p5_throttle_calls;
extern uint64_t p5_throttle_ticks;

#if defined(__x86_64__) && !defined(P5_NO_INLINE)
#define P5_HOT 1
/* The producer half of a thread's ring (runtime/src/ring.rs, Producer). */
struct p5_ring_hot {
    uint64_t head;
    uint64_t limit;
    uint64_t (*slots)[2];
    uint64_t mask;
    uint64_t base;
};
extern __thread struct p5_ring_hot *p5_tls_ring;

P5_ALWAYS_INLINE_ void p5_push_(struct p5_ring_hot *r, uint64_t kind, uint64_t t, uint64_t sensor) {
    uint64_t h = __atomic_load_n(&r->head, __ATOMIC_RELAXED);
    if (__builtin_expect(h >= r->limit, 0)) {
        p5_push_slow((uint32_t)kind, t, sensor);
        return;
    }
    uint64_t *slot = r->slots[h & r->mask];
    slot[0] = (kind << 60) | ((t - r->base) & ((1ULL << 60) - 1));
    slot[1] = sensor;
    __atomic_store_n(&r->head, h + 1, __ATOMIC_RELEASE);
}
#endif

/* Guard modes (p5_scope.on). */
enum { P5_OFF_ = 0, P5_OUTLINE_ = 1, P5_INLINE_ = 2, P5_COUNTED_ = 3, P5_SAMPLED_ = 4,
       P5_RECORDED_ = 5 };

typedef struct p5_scope {
    uint64_t sensor;
    int on;
    p5_site_t *site;
    uint64_t t0;
} p5_scope_t;

/* A guard without a call site: out-of-line calls, never throttled. */
static inline p5_scope_t p5_scope_begin(uint64_t sensor) {
    p5_scope_t s;
    s.sensor = sensor;
    s.on = p5_is_active() ? P5_OUTLINE_ : P5_OFF_;
    s.site = 0;
    s.t0 = 0;
    if (s.on) p5_enter(sensor);
    return s;
}

/* The site takes the id of its first call; a guard whose id differs from its site's (an id
 * computed at run time) records out of line. */
P5_ALWAYS_INLINE_ p5_scope_t p5_scope_begin_site(p5_site_t *site, uint64_t sensor) {
    p5_scope_t s;
    s.sensor = sensor;
    s.on = P5_OFF_;
    s.site = site;
    s.t0 = 0;
    if (!p5_is_active()) return s;
    uint64_t id = __atomic_load_n(&site->sensor, __ATOMIC_RELAXED);
    if (__builtin_expect(id != sensor, 0)) {
        if (id != 0 || sensor == 0) {
            s.on = P5_OUTLINE_;
            p5_enter(sensor);
            return s;
        }
        __atomic_store_n(&site->sensor, sensor, __ATOMIC_RELAXED);
    }
    uint64_t c = __atomic_load_n(&site->calls, __ATOMIC_RELAXED);
    __atomic_store_n(&site->calls, c + 1, __ATOMIC_RELAXED);
#ifdef P5_HOT
    struct p5_ring_hot *r = p5_tls_ring;
    if (__builtin_expect(r != 0, 1)) {
        uint32_t st = __atomic_load_n(&site->state, __ATOMIC_RELAXED);
        if (st >= P5_SITE_THROTTLED) {
            if (__builtin_expect(!__atomic_load_n(&site->listed, __ATOMIC_RELAXED), 0))
                p5_site_list(site);
            /* Within P5_LONG_WINDOW calls of a call longer than T a throttled site times
             * every call (not one the selection file pinned to counting). */
            if ((c & P5_SAMPLE_MASK_) &&
                (st == P5_SITE_COUNT || c >= __atomic_load_n(&site->long_until, __ATOMIC_RELAXED))) {
                s.on = P5_COUNTED_;
                return s;
            }
            s.t0 = __builtin_ia32_rdtsc();
            s.on = P5_SAMPLED_;
            return s;
        }
#ifndef P5_CALL_RECORD
        s.t0 = __builtin_ia32_rdtsc();
        s.on = P5_INLINE_;
        p5_push_(r, 0, s.t0, sensor);
#else
        s.t0 = p5_site_enter(site, sensor);
        s.on = P5_RECORDED_;
#endif
        return s;
    }
#endif
    s.on = P5_OUTLINE_;
    p5_enter(sensor);
    return s;
}

P5_ALWAYS_INLINE_ void p5_scope_end(p5_scope_t *s) {
    if (s->on == P5_OFF_ || s->on == P5_COUNTED_) return;
    if (s->on == P5_OUTLINE_) {
        p5_exit(s->sensor);
        return;
    }
    if (s->on == P5_RECORDED_) {
        p5_site_exit(s->site, s->sensor, s->t0);
        return;
    }
#ifdef P5_HOT
    uint64_t t = __builtin_ia32_rdtsc();
    uint64_t dt = t - s->t0;
    p5_site_t *site = s->site;
    uint64_t timed = __atomic_load_n(&site->timed, __ATOMIC_RELAXED) + 1;
    uint64_t ticks = __atomic_load_n(&site->ticks, __ATOMIC_RELAXED) + dt;
    __atomic_store_n(&site->timed, timed, __ATOMIC_RELAXED);
    __atomic_store_n(&site->ticks, ticks, __ATOMIC_RELAXED);
    if (s->on == P5_SAMPLED_) {
        if (dt > __atomic_load_n(&p5_throttle_ticks, __ATOMIC_RELAXED)) p5_site_long(site, s->t0, t);
        return;
    }
    struct p5_ring_hot *r = p5_tls_ring;
    if (__builtin_expect(r != 0, 1))
        p5_push_(r, 1, t, s->sensor);
    else
        p5_push_slow(1, t, s->sensor);
    if (__builtin_expect(dt > __atomic_load_n(&p5_throttle_ticks, __ATOMIC_RELAXED), 0))
        p5_site_saw_long(site);
    uint64_t n = __atomic_load_n(&p5_throttle_calls, __ATOMIC_RELAXED);
    if (__builtin_expect(n != 0 && timed >= n, 0) &&
        ticks < timed * __atomic_load_n(&p5_throttle_ticks, __ATOMIC_RELAXED) &&
        __atomic_load_n(&site->state, __ATOMIC_RELAXED) == P5_SITE_AUTO)
        p5_site_throttle(site);
#endif
}

#define P5_CONCAT_(a, b) a##b
#define P5_CONCAT(a, b) P5_CONCAT_(a, b)
#define P5_SCOPE_AT_(sensor, state, n)                                                        \
    static p5_site_t P5_CONCAT(p5_site_, n) = {0, 0, 0, 0, (state), 0, 0, 0, 0, 0};           \
    p5_scope_t P5_CONCAT(p5_scope_, n) __attribute__((cleanup(p5_scope_end))) =                \
        p5_scope_begin_site(&P5_CONCAT(p5_site_, n), (sensor))
/* Enter `sensor` now and exit it when the enclosing block is left (any way but longjmp);
 * throttled automatically when hot and tiny. */
#define P5_SCOPE(sensor) P5_SCOPE_AT_(sensor, P5_SITE_AUTO, __COUNTER__)
/* Pinned on: always recorded, never throttled. */
#define P5_SCOPE_ALWAYS(sensor) P5_SCOPE_AT_(sensor, P5_SITE_ALWAYS, __COUNTER__)
/* Pinned off: calls counted (and long sampled calls recorded) from the first call. */
#define P5_SCOPE_COUNT(sensor) P5_SCOPE_AT_(sensor, P5_SITE_COUNT, __COUNTER__)

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
