/*
 * pingpong: the bundled p5 sample. A multi-threaded TCP server and a multi-threaded client
 * exchange request/reply messages. Instrumented by hand with the p5 C ABI (include/p5.h):
 * function scopes with P5_SCOPE and communication through the p5_* wrappers, which record
 * byte counts and endpoints so the merge stage can match every send to its receive.
 *
 *   pingpong server PORT CONNECTIONS      serve CONNECTIONS clients, one thread each, then exit
 *                                         (PORT 0: any free port; the first line printed names it)
 *   pingpong client HOST PORT THREADS N   THREADS threads, each sends N requests and reads replies
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "p5.h"

/* Sensor ids: stable 64-bit numbers (the instrumenter derives them from file, function, line). */
#define S_MAIN 0x5050000000000001ULL
#define S_SERVE 0x5050000000000002ULL
#define S_HANDLE 0x5050000000000003ULL
#define S_COMPUTE 0x5050000000000004ULL
#define S_CLIENT 0x5050000000000005ULL
#define S_REQUEST 0x5050000000000006ULL
#define C_ACCEPT 0x5050000000000101ULL
#define C_RECV_REQ 0x5050000000000102ULL
#define C_SEND_REPLY 0x5050000000000103ULL
#define C_CONNECT 0x5050000000000104ULL
#define C_SEND_REQ 0x5050000000000105ULL
#define C_RECV_REPLY 0x5050000000000106ULL
#define C_CLOSE 0x5050000000000107ULL
#define M_REPLIES 0x5050000000000201ULL

#define REQ_SIZE 256
#define REPLY_SIZE 1024

static int read_full(uint64_t sensor, int fd, char *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = p5_recv(sensor, fd, buf + got, n - got, 0);
        if (r == 0) return -1;
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        got += (size_t)r;
    }
    return 0;
}

static int write_full(uint64_t sensor, int fd, const char *buf, size_t n) {
    size_t put = 0;
    while (put < n) {
        ssize_t r = p5_send(sensor, fd, buf + put, n - put, MSG_NOSIGNAL);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        put += (size_t)r;
    }
    return 0;
}

/* Some CPU work so "calculating" states are visible between messages. */
static uint64_t compute(const char *req, int rounds) {
    P5_SCOPE(S_COMPUTE);
    uint64_t h = 1469598103934665603ULL;
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < REQ_SIZE; i++) h = (h ^ (unsigned char)req[i]) * 1099511628211ULL;
    return h;
}

static void *handle(void *arg) {
    P5_SCOPE(S_HANDLE);
    int fd = (int)(intptr_t)arg;
    char req[REQ_SIZE], reply[REPLY_SIZE];
    long served = 0;
    while (read_full(C_RECV_REQ, fd, req, sizeof req) == 0) {
        uint64_t h = compute(req, 40);
        memset(reply, 'r', sizeof reply);
        memcpy(reply, &h, sizeof h);
        if (write_full(C_SEND_REPLY, fd, reply, sizeof reply) != 0) break;
        served++;
    }
    p5_counter(M_REPLIES, served);
    p5_close(C_CLOSE, fd);
    return NULL;
}

static int serve(int port, int connections) {
    P5_SCOPE(S_SERVE);
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(ls, (struct sockaddr *)&a, sizeof a) != 0 || listen(ls, 64) != 0) {
        perror("pingpong server: bind/listen");
        return 1;
    }
    socklen_t alen = sizeof a;
    getsockname(ls, (struct sockaddr *)&a, &alen);
    printf("server listening on 127.0.0.1:%d\n", ntohs(a.sin_port));
    fflush(stdout);
    pthread_t *th = calloc((size_t)connections, sizeof *th);
    for (int i = 0; i < connections; i++) {
        int fd = p5_accept(C_ACCEPT, ls, NULL, NULL);
        if (fd < 0) {
            perror("pingpong server: accept");
            return 1;
        }
        pthread_create(&th[i], NULL, handle, (void *)(intptr_t)fd);
    }
    for (int i = 0; i < connections; i++) pthread_join(th[i], NULL);
    free(th);
    close(ls);
    return 0;
}

struct client_arg {
    const char *host;
    int port, n;
};

static void *client(void *p) {
    P5_SCOPE(S_CLIENT);
    struct client_arg *c = p;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(c->port)};
    inet_pton(AF_INET, c->host, &a.sin_addr);
    for (int tries = 0; p5_connect(C_CONNECT, fd, (struct sockaddr *)&a, sizeof a) != 0; tries++) {
        if (tries > 200) {
            perror("pingpong client: connect");
            return NULL;
        }
        usleep(10000);
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char req[REQ_SIZE], reply[REPLY_SIZE];
    for (int i = 0; i < c->n; i++) {
        P5_SCOPE(S_REQUEST);
        memset(req, 'a' + i % 26, sizeof req);
        if (write_full(C_SEND_REQ, fd, req, sizeof req) != 0) break;
        if (read_full(C_RECV_REPLY, fd, reply, sizeof reply) != 0) break;
    }
    p5_close(C_CLOSE, fd);
    return NULL;
}

int main(int argc, char **argv) {
    p5_init();
    P5_SCOPE(S_MAIN);
    if (argc == 4 && strcmp(argv[1], "server") == 0) return serve(atoi(argv[2]), atoi(argv[3]));
    if (argc == 6 && strcmp(argv[1], "client") == 0) {
        int threads = atoi(argv[4]);
        struct client_arg c = {argv[2], atoi(argv[3]), atoi(argv[5])};
        pthread_t *th = calloc((size_t)threads, sizeof *th);
        for (int i = 0; i < threads; i++) pthread_create(&th[i], NULL, client, &c);
        for (int i = 0; i < threads; i++) pthread_join(th[i], NULL);
        free(th);
        printf("client done: %d threads x %d requests\n", threads, c.n);
        return 0;
    }
    fprintf(stderr, "usage: pingpong server PORT CONNECTIONS | pingpong client HOST PORT THREADS N\n");
    return 2;
}
