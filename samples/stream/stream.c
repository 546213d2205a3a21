/*
 * stream: a stream of small TCP messages that get no replies (CoSMoS §4.2) — think of mouse
 * events sent to a GUI application, where every delay is visible. The client sends MESSAGES
 * messages of SIZE bytes in bursts; the server reads as fast as it can. Three socket setups:
 *
 *   nagle     the default: Nagle's algorithm (RFC 896) holds small writes back while earlier
 *             data is unacknowledged, so messages are coalesced into few segments
 *   nodelay   TCP_NODELAY: every write goes out at once
 *   mss       TCP_NODELAY and a small TCP_MAXSEG, so TCP cannot build large segments either
 *
 * At the end the client prints the segments its socket sent (TCP_INFO tcpi_segs_out), the
 * number the paper reads off the NIC interrupts.
 *
 * Plain C with no p5 calls: `p5 demo` instruments it with p5-instrument (functions + comm).
 *
 *   stream server PORT WORK    (PORT 0: any; prints "listening on :P"); WORK: redraw cost per read
 *   stream client PORT MESSAGES SIZE BURST GAP_US MODE   MODE: nagle | nodelay | mss
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <linux/tcp.h> /* struct tcp_info with tcpi_segs_out */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* The smallest TCP_MAXSEG Linux accepts (TCP_MIN_MSS); the paper used 20 bytes. */
#define SMALL_MSS 88

static int listen_on(int port) {
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(ls, (struct sockaddr *)&a, sizeof a) != 0 || listen(ls, 4) != 0) {
        perror("stream: bind/listen");
        exit(1);
    }
    socklen_t alen = sizeof a;
    getsockname(ls, (struct sockaddr *)&a, &alen);
    printf("listening on 127.0.0.1:%d\n", ntohs(a.sin_port));
    fflush(stdout);
    return ls;
}

/* Reads whatever events have arrived. */
static long handle_events(int fd, char *buf, size_t cap) {
    ssize_t r = recv(fd, buf, cap, 0);
    return r > 0 ? (long)r : -1;
}

/* Redraws the window after a batch of events: a fixed amount of CPU work. */
static uint64_t redraw(const char *events, long n, long work) {
    uint64_t h = 1469598103934665603ULL;
    for (long r = 0; r < work; r++)
        for (long i = 0; i < 64 && i < n; i++) h = (h ^ (unsigned char)events[i]) * 1099511628211ULL;
    return h;
}

static int run_server(int port, long work) {
    int ls = listen_on(port);
    int fd = accept(ls, NULL, NULL);
    char buf[4096];
    long total = 0, reads = 0, r;
    uint64_t screen = 0;
    while ((r = handle_events(fd, buf, sizeof buf)) > 0) {
        total += r;
        reads++;
        screen ^= redraw(buf, r, work);
    }
    if (screen == 42) printf("lucky screen\n");
    close(fd);
    close(ls);
    printf("server: %ld bytes in %ld reads\n", total, reads);
    return 0;
}

static int open_stream(int port, const char *mode) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    if (strcmp(mode, "nodelay") == 0 || strcmp(mode, "mss") == 0)
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (strcmp(mode, "mss") == 0) {
        int mss = SMALL_MSS;
        if (setsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &mss, sizeof mss) != 0) perror("TCP_MAXSEG");
    }
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        perror("stream: connect");
        exit(1);
    }
    return fd;
}

/* One mouse event. */
static int send_event(int fd, int i, char *msg, size_t size) {
    memset(msg, 'a' + i % 26, size);
    memcpy(msg, &i, sizeof i);
    return send(fd, msg, size, MSG_NOSIGNAL) == (ssize_t)size ? 0 : -1;
}

static void pause_us(long us) {
    struct timespec t = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&t, NULL);
}

static int run_client(int port, int messages, int size, int burst, long gap_us, const char *mode) {
    int fd = open_stream(port, mode);
    char msg[1024];
    if (size > (int)sizeof msg) size = sizeof msg;
    for (int i = 0; i < messages; i++) {
        if (send_event(fd, i, msg, (size_t)size) != 0) {
            perror("stream client: send");
            return 1;
        }
        if (burst > 0 && (i + 1) % burst == 0) pause_us(gap_us);
    }
    struct tcp_info info;
    socklen_t len = sizeof info;
    memset(&info, 0, sizeof info);
    getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len);
    int mss = 0;
    len = sizeof mss;
    getsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &mss, &len);
    close(fd);
    printf("client %s: %d messages of %d bytes, %u segments sent, mss %d\n", mode, messages, size,
           info.tcpi_segs_out, mss);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "server") == 0) return run_server(atoi(argv[2]), atol(argv[3]));
    if (argc == 8 && strcmp(argv[1], "client") == 0)
        return run_client(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[5]),
                          atol(argv[6]), argv[7]);
    fprintf(stderr, "usage: stream server PORT WORK | client PORT MESSAGES SIZE BURST GAP_US MODE\n");
    return 2;
}
