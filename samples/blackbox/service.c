/* A small multi-tier service for p5 demo's black-box case study: plain C, no p5 header, no p5
 * library, built with plain `cc`. p5 sees it only through `p5 record --preload` (the
 * interposed libc socket calls).
 *
 * One binary; the role is the name it runs under (argv[0]'s last component):
 *
 *   client  FRONT_PORT N GAP_US   sends N requests of 64 bytes to the front end, one at a
 *                                 time, reads each 256-byte reply, pauses GAP_US, and prints
 *                                 "client: N requests, N replies, mean X.XXX ms per request"
 *   front   PORT AUTH_PORT CATALOG_PORT
 *                                 the front end: for each request of its one client asks auth,
 *                                 then catalog (sequentially: the second call starts when the
 *                                 first has returned), and answers with 256 bytes
 *   auth    PORT DB_PORT [DELAY_US]
 *   catalog PORT DB_PORT [DELAY_US]
 *                                 the two backends: for each 32-byte query of the front end,
 *                                 optionally wait DELAY_US (the injected delay: a slower
 *                                 backend; slept, its last 200 us spun), ask the db,
 *                                 answer with 64 bytes
 *   db      PORT CONNECTIONS      the third tier: serves CONNECTIONS connections at once
 *                                 (poll), answering each 32-byte query with 128 bytes, and
 *                                 exits when all of them have closed
 *
 * A server given port 0 takes a free one. Every server prints "listening on 127.0.0.1:PORT"
 * as its first line. Each end closes its connections when its peer closed, so the whole
 * service exits after the client.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CLIENT_REQ 64
#define FRONT_REP 256
#define QUERY 32
#define BACKEND_REP 64
#define DB_REP 128
#define MAX_CONNS 16

static void die(const char *what) {
    perror(what);
    exit(2);
}

static void nodelay(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static int listen_on(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) die("socket");
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((unsigned short)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 16)) die("bind/listen");
    socklen_t len = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &len);
    printf("listening on 127.0.0.1:%d\n", ntohs(a.sin_port));
    fflush(stdout);
    return fd;
}

static int connect_to(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) die("socket");
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((unsigned short)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) die("connect");
    nodelay(fd);
    return fd;
}

static int accept_one(int l) {
    int c = accept(l, NULL, NULL);
    if (c < 0) die("accept");
    nodelay(c);
    return c;
}

/* Reads exactly n bytes; 0 at end of stream. */
static int read_full(int fd, char *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = recv(fd, buf + got, n - got, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return 0;
        got += (size_t)r;
    }
    return 1;
}

static void write_full(int fd, const char *buf, size_t n) {
    while (n > 0) {
        ssize_t w = send(fd, buf, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) die("send");
        buf += w;
        n -= (size_t)w;
    }
}

/* Sends `q` (QUERY bytes) to `fd` and reads the `n`-byte answer into `a`. */
static void call(int fd, const char *q, char *a, size_t n, const char *what) {
    write_full(fd, q, QUERY);
    if (!read_full(fd, a, n)) die(what);
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* Waits `us` microseconds: sleeps to 200 us before the deadline, then spins, so the delay is
 * what was asked rather than what the timer's slack and a wake-up make of it. */
static void delay(int us) {
    double end = now_ms() + us / 1e3;
    if (us > 200) usleep((useconds_t)(us - 200));
    while (now_ms() < end) {
    }
}

static int run_client(int argc, char **argv) {
    if (argc < 4) return 2;
    int s = connect_to(atoi(argv[1]));
    int n = atoi(argv[2]);
    int gap_us = atoi(argv[3]);
    char q[CLIENT_REQ], r[FRONT_REP];
    int replies = 0;
    double total = 0;
    for (int i = 0; i < n; i++) {
        memset(q, 'q', sizeof q);
        snprintf(q, 9, "%08d", i % 100000000);
        double t0 = now_ms();
        write_full(s, q, sizeof q);
        if (!read_full(s, r, sizeof r)) break;
        total += now_ms() - t0;
        if (memcmp(r, q, 8) == 0) replies++;
        if (gap_us > 0) usleep((useconds_t)gap_us);
    }
    close(s);
    printf("client: %d requests, %d replies, mean %.3f ms per request\n", n, replies,
           replies > 0 ? total / replies : 0.0);
    return replies == n ? 0 : 1;
}

static int run_front(int argc, char **argv) {
    if (argc < 4) return 2;
    int l = listen_on(atoi(argv[1]));
    int auth = connect_to(atoi(argv[2]));
    int catalog = connect_to(atoi(argv[3]));
    int c = accept_one(l);
    char q[CLIENT_REQ], a[BACKEND_REP], b[BACKEND_REP], r[FRONT_REP];
    long served = 0;
    while (read_full(c, q, sizeof q)) {
        call(auth, q, a, sizeof a, "auth reply");
        call(catalog, q, b, sizeof b, "catalog reply");
        memset(r, 'r', sizeof r);
        memcpy(r, q, 8);
        memcpy(r + 8, a + 8, 8);
        memcpy(r + 16, b + 8, 8);
        write_full(c, r, sizeof r);
        served++;
    }
    close(auth);
    close(catalog);
    close(c);
    close(l);
    return served > 0 ? 0 : 1;
}

static int run_backend(const char *role, int argc, char **argv) {
    if (argc < 3) return 2;
    int l = listen_on(atoi(argv[1]));
    int db = connect_to(atoi(argv[2]));
    int delay_us = argc > 3 ? atoi(argv[3]) : 0;
    int c = accept_one(l);
    char q[QUERY], d[DB_REP], r[BACKEND_REP];
    long served = 0;
    while (read_full(c, q, sizeof q)) {
        if (delay_us > 0) delay(delay_us);
        q[8] = role[0];
        call(db, q, d, sizeof d, "db reply");
        memset(r, role[0], sizeof r);
        memcpy(r, q, 8);
        write_full(c, r, sizeof r);
        served++;
    }
    close(db);
    close(c);
    close(l);
    return served > 0 ? 0 : 1;
}

static int run_db(int argc, char **argv) {
    if (argc < 3) return 2;
    int l = listen_on(atoi(argv[1]));
    int expected = atoi(argv[2]);
    if (expected < 1 || expected > MAX_CONNS) return 2;
    struct pollfd p[MAX_CONNS + 1];
    int open = 0, accepted = 0;
    long served = 0;
    p[0] = (struct pollfd){.fd = l, .events = POLLIN};
    for (int i = 1; i <= MAX_CONNS; i++) p[i] = (struct pollfd){.fd = -1};
    while (accepted < expected || open > 0) {
        p[0].fd = accepted < expected ? l : -1;
        if (poll(p, MAX_CONNS + 1, -1) < 0) {
            if (errno == EINTR) continue;
            die("poll");
        }
        if (p[0].fd >= 0 && (p[0].revents & POLLIN)) {
            int c = accept_one(l);
            for (int i = 1; i <= MAX_CONNS; i++)
                if (p[i].fd < 0) {
                    p[i] = (struct pollfd){.fd = c, .events = POLLIN};
                    break;
                }
            accepted++;
            open++;
        }
        for (int i = 1; i <= MAX_CONNS; i++) {
            if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            char q[QUERY], r[DB_REP];
            if (!read_full(p[i].fd, q, sizeof q)) {
                close(p[i].fd);
                p[i].fd = -1;
                open--;
                continue;
            }
            memset(r, 'd', sizeof r);
            memcpy(r, q, 9);
            write_full(p[i].fd, r, sizeof r);
            served++;
        }
    }
    close(l);
    return served > 0 ? 0 : 1;
}

int main(int argc, char **argv) {
    const char *role = argc > 0 ? strrchr(argv[0], '/') : NULL;
    role = role ? role + 1 : (argc > 0 ? argv[0] : "");
    if (strcmp(role, "client") == 0) return run_client(argc, argv);
    if (strcmp(role, "front") == 0) return run_front(argc, argv);
    if (strcmp(role, "auth") == 0 || strcmp(role, "catalog") == 0)
        return run_backend(role, argc, argv);
    if (strcmp(role, "db") == 0) return run_db(argc, argv);
    fprintf(stderr, "run me as client, front, auth, catalog or db (not %s)\n", role);
    return 2;
}
