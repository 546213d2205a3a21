/*
 * cascade: cascaded client/server interactions (CoSMoS §4.1). A client sends requests to a
 * front server ("shop"), which computes a little, asks a back-end server ("db") for the
 * data it needs, computes again and replies. The Gantt chart shows how much of the client's
 * waiting time is spent in the nested interaction and how the server response times break
 * down into sending, receiving and calculating.
 *
 * Plain C with no p5 calls: `p5 demo` instruments it with p5-instrument (functions + comm).
 *
 *   cascade db PORT                    back-end server (PORT 0: any; prints "listening on :P")
 *   cascade shop PORT DB_PORT          front server, one back-end connection per client
 *   cascade client PORT REQUESTS WORK  sends REQUESTS requests; WORK scales server work
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define REQ 128
#define REPLY 512

/* Reads exactly n bytes; -1 at end of stream. */
static int read_full(int fd, char *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = recv(fd, buf + got, n - got, 0);
        if (r <= 0) return -1;
        got += (size_t)r;
    }
    return 0;
}

static int write_full(int fd, const char *buf, size_t n) {
    size_t put = 0;
    while (put < n) {
        ssize_t r = send(fd, buf + put, n - put, MSG_NOSIGNAL);
        if (r <= 0) return -1;
        put += (size_t)r;
    }
    return 0;
}

/* CPU work standing in for real computation. */
static uint64_t crunch(const char *data, size_t n, long rounds) {
    uint64_t h = 1469598103934665603ULL;
    for (long r = 0; r < rounds; r++)
        for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)data[i]) * 1099511628211ULL;
    return h;
}

static int listen_on(int port) {
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(ls, (struct sockaddr *)&a, sizeof a) != 0 || listen(ls, 16) != 0) {
        perror("cascade: bind/listen");
        exit(1);
    }
    socklen_t alen = sizeof a;
    getsockname(ls, (struct sockaddr *)&a, &alen);
    printf("listening on 127.0.0.1:%d\n", ntohs(a.sin_port));
    fflush(stdout);
    return ls;
}

static int dial(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        perror("cascade: connect");
        exit(1);
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* The back end: looks up the "price table" for a request. */
static void lookup_prices(const char *req, char *reply, long work) {
    uint64_t h = crunch(req, REQ, 30 * work);
    memset(reply, 'p', REPLY);
    memcpy(reply, &h, sizeof h);
}

static int serve_db(int port) {
    int ls = listen_on(port);
    int fd = accept(ls, NULL, NULL);
    char req[REQ], reply[REPLY];
    while (read_full(fd, req, REQ) == 0) {
        long work = req[0];
        lookup_prices(req, reply, work);
        if (write_full(fd, reply, REPLY) != 0) break;
    }
    close(fd);
    close(ls);
    return 0;
}

static void parse_request(const char *req, long work) { (void)crunch(req, REQ, 5 * work); }

static void render_page(const char *prices, char *reply, long work) {
    uint64_t h = crunch(prices, REPLY, 4 * work);
    memset(reply, 'r', REPLY);
    memcpy(reply, &h, sizeof h);
}

static int serve_shop(int port, int db_port) {
    int ls = listen_on(port);
    int fd = accept(ls, NULL, NULL);
    int db = dial(db_port);
    char req[REQ], prices[REPLY], reply[REPLY];
    while (read_full(fd, req, REQ) == 0) {
        long work = req[0];
        parse_request(req, work);
        if (write_full(db, req, REQ) != 0 || read_full(db, prices, REPLY) != 0) break;
        render_page(prices, reply, work);
        if (write_full(fd, reply, REPLY) != 0) break;
    }
    close(db);
    close(fd);
    close(ls);
    return 0;
}

static int request_page(int fd, int i, long work) {
    char req[REQ], reply[REPLY];
    memset(req, 'a' + i % 26, REQ);
    req[0] = (char)work;
    if (write_full(fd, req, REQ) != 0) return -1;
    return read_full(fd, reply, REPLY);
}

static int run_client(int port, int requests, long work) {
    int fd = dial(port);
    for (int i = 0; i < requests; i++) {
        if (request_page(fd, i, work) != 0) {
            fprintf(stderr, "cascade client: request %d failed\n", i);
            return 1;
        }
        usleep(200);
    }
    close(fd);
    printf("client done: %d requests\n", requests);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "db") == 0) return serve_db(atoi(argv[2]));
    if (argc == 4 && strcmp(argv[1], "shop") == 0) return serve_shop(atoi(argv[2]), atoi(argv[3]));
    if (argc == 5 && strcmp(argv[1], "client") == 0) {
        long work = atol(argv[4]);
        if (work < 1) work = 1;
        if (work > 100) work = 100;
        return run_client(atoi(argv[2]), atoi(argv[3]), work);
    }
    fprintf(stderr, "usage: cascade db PORT | shop PORT DB_PORT | client PORT REQUESTS WORK\n");
    return 2;
}
