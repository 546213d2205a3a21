/*
 * jobsrv: a server thread handling a client thread's requests over loopback TCP, with an
 * injected fault path: request i takes slow_path (a back-off and an index rebuild) when
 * FAULT_EVERY > 0 and i % FAULT_EVERY == FAULT_EVERY - 3. Normal variations besides: the
 * first request warms a cache, every fifth logs statistics.
 *
 *   jobsrv REQUESTS FAULT_EVERY
 *
 * Plain C with no p5 calls: the test instruments it with p5-instrument.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define REQ 64
#define REPLY 256

static int fault_every;
static int listener;
static volatile uint64_t sink;

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

static uint64_t crunch(const char *data, size_t n, long rounds) {
    uint64_t h = 1469598103934665603ULL;
    for (long r = 0; r < rounds; r++)
        for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)data[i]) * 1099511628211ULL;
    return h;
}

static void parse(const char *req) { sink += crunch(req, REQ, 20); }
static void warm_cache(void) { sink += crunch("cache", 5, 200); }
static void log_stats(void) { sink += crunch("stats", 5, 50); }
static void backoff(void) { usleep(3000); }
static void rebuild_index(const char *req) { sink += crunch(req, REQ, 400); }

static void slow_path(const char *req) {
    backoff();
    rebuild_index(req);
}

static void compute(const char *req, char *reply) {
    uint64_t h = crunch(req, REQ, 100);
    memset(reply, 'r', REPLY);
    memcpy(reply, &h, sizeof h);
}

static int handle(int fd, const char *req, int i) {
    char reply[REPLY];
    parse(req);
    if (i == 0) warm_cache();
    if (fault_every > 0 && i % fault_every == fault_every - 3) slow_path(req);
    compute(req, reply);
    if (i % 5 == 0) log_stats();
    return write_full(fd, reply, REPLY);
}

static void *serve(void *arg) {
    (void)arg;
    int fd = accept(listener, NULL, NULL);
    char req[REQ];
    for (int i = 0; read_full(fd, req, REQ) == 0; i++)
        if (handle(fd, req, i) != 0) break;
    close(fd);
    return NULL;
}

static int request_page(int fd, int i) {
    char req[REQ], reply[REPLY];
    memset(req, 'a' + i % 26, REQ);
    if (write_full(fd, req, REQ) != 0) return -1;
    return read_full(fd, reply, REPLY);
}

int main(int argc, char **argv) {
    int requests = argc > 1 ? atoi(argv[1]) : 40;
    fault_every = argc > 2 ? atoi(argv[2]) : 0;
    listener = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof a;
    if (bind(listener, (struct sockaddr *)&a, sizeof a) != 0 || listen(listener, 4) != 0 ||
        getsockname(listener, (struct sockaddr *)&a, &alen) != 0) {
        perror("jobsrv: listen");
        return 1;
    }
    pthread_t t;
    pthread_create(&t, NULL, serve, NULL);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        perror("jobsrv: connect");
        return 1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    for (int i = 0; i < requests; i++) {
        if (request_page(fd, i) != 0) return 1;
        usleep(300);
    }
    close(fd);
    pthread_join(t, NULL);
    printf("jobsrv: %d requests\n", requests);
    return 0;
}
