/* The services test's client written in C, to be instrumented by p5-instrument: N
 * closed-loop threads, each on its own keep-alive HTTP/1.1 connection to nginx, sending
 * requests with an id in X-Request-Id, reading each reply (headers, then Content-Length
 * bytes of body) and logging, per request, the id, its kind, its process and OS thread and
 * its CLOCK_MONOTONIC interval, one JSON line each — what client.py does.
 *
 *     client HOST PORT CLIENTS REQUESTS LOG
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static const char *KINDS[] = {"pooled", "fresh", "pg", "maria"};
static const char *host;
static int port, requests, next_id, failures;
static FILE *log_file;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int take(void) {
    pthread_mutex_lock(&lock);
    int n = next_id < requests ? ++next_id : 0;
    pthread_mutex_unlock(&lock);
    return n;
}

static int dial(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, host, &a.sin_addr);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        perror("connect");
        exit(1);
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* Reads one reply into buf (at most cap bytes); returns the body's offset or -1. */
static int read_reply(int fd, char *buf, int cap, int *len) {
    int have = 0, body = -1, need = -1;
    while (need < 0 || have < need) {
        ssize_t r = recv(fd, buf + have, cap - 1 - have, 0);
        if (r <= 0)
            return -1;
        have += r;
        buf[have] = 0;
        if (body < 0) {
            char *end = strstr(buf, "\r\n\r\n");
            if (!end)
                continue;
            body = end + 4 - buf;
            char *cl = strcasestr(buf, "Content-Length:");
            if (!cl || cl > end)
                return -1;
            need = body + atoi(cl + 15);
            if (need >= cap)
                return -1;
        }
    }
    *len = have;
    return body;
}

static void *run(void *arg) {
    (void)arg;
    int fd = dial();
    char req[256], buf[8192], rid[32], line[512];
    for (int n; (n = take()) != 0;) {
        const char *kind = KINDS[n % 4];
        snprintf(rid, sizeof rid, "r%d", n);
        int len = snprintf(req, sizeof req,
                           "GET /%s?id=%s HTTP/1.1\r\nHost: %s\r\nX-Request-Id: %s\r\n\r\n",
                           kind, rid, host, rid);
        long long t0 = now_ns();
        if (send(fd, req, len, 0) != len) {
            perror("send");
            exit(1);
        }
        int got = 0, body = read_reply(fd, buf, sizeof buf, &got);
        long long t1 = now_ns();
        size_t idlen = strlen(rid);
        if (body < 0 || strncmp(buf, "HTTP/1.1 200", 12) != 0 ||
            strncmp(buf + body, rid, idlen) != 0 || buf[body + idlen] != ' ') {
            pthread_mutex_lock(&lock);
            failures++;
            pthread_mutex_unlock(&lock);
        }
        snprintf(line, sizeof line,
                 "{\"id\": \"%s\", \"tier\": \"client\", \"kind\": \"%s\", \"pid\": %d, "
                 "\"tid\": %ld, \"t0\": %lld, \"t1\": %lld}\n",
                 rid, kind, (int)getpid(), (long)syscall(SYS_gettid), t0, t1);
        pthread_mutex_lock(&lock);
        fputs(line, log_file);
        fflush(log_file);
        pthread_mutex_unlock(&lock);
    }
    close(fd);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: client HOST PORT CLIENTS REQUESTS LOG\n");
        return 2;
    }
    host = argv[1];
    port = atoi(argv[2]);
    int clients = atoi(argv[3]);
    requests = atoi(argv[4]);
    log_file = fopen(argv[5], "a");
    if (!log_file || clients < 1 || clients > 256) {
        fprintf(stderr, "cannot open %s, or bad CLIENTS\n", argv[5]);
        return 2;
    }
    pthread_t t[256];
    for (int i = 0; i < clients; i++)
        pthread_create(&t[i], NULL, run, NULL);
    for (int i = 0; i < clients; i++)
        pthread_join(t[i], NULL);
    if (failures) {
        fprintf(stderr, "%d requests failed\n", failures);
        return 1;
    }
    return 0;
}
