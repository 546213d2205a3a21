/* Exercises the C ABI: sensors, the scope macro, counters, and every socket wrapper with
 * errno checks. Exits non-zero (naming the line) on the first failed check. The integration
 * test decodes the spool file it leaves behind. */
#define _GNU_SOURCE
#include "p5.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define CHECK(c)                                                                   \
    do {                                                                           \
        if (!(c)) {                                                                \
            fprintf(stderr, "check failed at line %d: %s (errno %d)\n", __LINE__, \
                    #c, errno);                                                    \
            return 1;                                                              \
        }                                                                          \
    } while (0)

static void *worker(void *arg) {
    uint64_t id = 0xA000 + (uint64_t)(uintptr_t)arg;
    for (int i = 0; i < 1000; i++) {
        errno = 777;
        P5_SCOPE(id);
        /* The thread's first event registers its buffer; that must not touch errno. */
        if (errno != 777) return (void *)1;
    }
    return NULL;
}

static int bind_loopback(int type, struct sockaddr_in *addr) {
    int fd = socket(AF_INET, type, 0);
    memset(addr, 0, sizeof *addr);
    addr->sin_family = AF_INET;
    addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)addr, sizeof *addr) != 0) return -1;
    socklen_t len = sizeof *addr;
    if (getsockname(fd, (struct sockaddr *)addr, &len) != 0) return -1;
    return fd;
}

int main(void) {
    errno = 31337;
    CHECK(p5_init() == 1);
    CHECK(errno == 31337);
    CHECK(p5_enabled() == 1);
    CHECK(p5_is_active());
    {
        P5_SCOPE(0x100);
        p5_mark(0x101);
        p5_counter(0x102, -7);
    }
    for (int i = 0; i < 100; i++) {
        p5_enter(0x200);
        p5_exit(0x200);
    }

    /* TCP: connect, accept, send, recv, write, read, shutdown, close. */
    struct sockaddr_in laddr, peer;
    int ls = bind_loopback(SOCK_STREAM, &laddr);
    CHECK(ls >= 0 && listen(ls, 4) == 0);
    int c = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(c >= 0);
    CHECK(p5_connect(0x300, c, (struct sockaddr *)&laddr, sizeof laddr) == 0);
    socklen_t plen = sizeof peer;
    int s = p5_accept(0x301, ls, (struct sockaddr *)&peer, &plen);
    CHECK(s >= 0);
    char buf[64];
    errno = 4242;
    CHECK(p5_send(0x302, c, "hello", 5, 0) == 5);
    CHECK(errno == 4242); /* success leaves errno alone, despite getsockname & co inside */
    errno = 4243;
    CHECK(p5_recv(0x303, s, buf, sizeof buf, 0) == 5);
    CHECK(errno == 4243 && memcmp(buf, "hello", 5) == 0);
    errno = 0;
    CHECK(p5_recv(0x304, 9999, buf, 1, 0) == -1 && errno == EBADF);
    CHECK(p5_write(0x305, s, "x", 1) == 1);
    CHECK(p5_read(0x306, c, buf, 1) == 1 && buf[0] == 'x');
    CHECK(p5_shutdown_socket(0x309, c, SHUT_WR) == 0);
    CHECK(p5_close(0x30a, c) == 0);
    CHECK(p5_close(0x30a, s) == 0);
    CHECK(p5_close(0x30a, ls) == 0);
    errno = 0;
    CHECK(p5_close(0x30b, 9999) == -1 && errno == EBADF);

    /* UDP: sendto, recvfrom, sendmsg, recvmsg. */
    struct sockaddr_in a1, a2, from;
    int u1 = bind_loopback(SOCK_DGRAM, &a1);
    int u2 = bind_loopback(SOCK_DGRAM, &a2);
    CHECK(u1 >= 0 && u2 >= 0);
    errno = 4244; /* first use of u1: describing it calls getpeername, which fails (ENOTCONN) */
    CHECK(p5_sendto(0x307, u1, "dgram", 5, 0, (struct sockaddr *)&a2, sizeof a2) == 5);
    CHECK(errno == 4244);
    socklen_t flen = sizeof from;
    CHECK(p5_recvfrom(0x308, u2, buf, sizeof buf, 0, (struct sockaddr *)&from, &flen) == 5);
    CHECK(from.sin_port == a1.sin_port);
    struct iovec iov = {.iov_base = "msg!", .iov_len = 4};
    struct msghdr m;
    memset(&m, 0, sizeof m);
    m.msg_name = &a2;
    m.msg_namelen = sizeof a2;
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    CHECK(p5_sendmsg(0x30c, u1, &m, 0) == 4);
    struct iovec riov = {.iov_base = buf, .iov_len = sizeof buf};
    struct msghdr rm;
    memset(&rm, 0, sizeof rm);
    rm.msg_name = &from;
    rm.msg_namelen = sizeof from;
    rm.msg_iov = &riov;
    rm.msg_iovlen = 1;
    CHECK(p5_recvmsg(0x30d, u2, &rm, 0) == 4);
    uint64_t t0 = p5_ticks();
    p5_comm(0x30e, P5_OP_SEND, u1, t0, 17, NULL, 0);
    CHECK(p5_close(0x30a, u1) == 0 && p5_close(0x30a, u2) == 0);

    pthread_t t[2];
    for (uintptr_t i = 0; i < 2; i++) CHECK(pthread_create(&t[i], NULL, worker, (void *)i) == 0);
    for (int i = 0; i < 2; i++) {
        void *ret = NULL;
        CHECK(pthread_join(t[i], &ret) == 0 && ret == NULL);
    }

    CHECK(p5_flush() == 1);
    struct p5_stats st;
    p5_stats(&st);
    CHECK(st.events > 0 && st.dropped == 0);
    printf("events %llu frames %llu\n", (unsigned long long)st.events,
           (unsigned long long)st.frames);
    return 0;
}
