/* Socketpairs, unmodified (recorded with --preload):
 * - two threads of one process: the main thread sends ROUNDS 64-byte requests over a
 *   socketpair, a second thread answers each with 64 bytes (2 × ROUNDS messages, each from
 *   one thread to the other);
 * - one thread: LOCAL 100-byte messages written on one end and read on the other by the
 *   same thread;
 * - a forked child: FORKED 32-byte requests to a child over a socketpair made before the
 *   fork, each answered (the child describes its inherited end on first use).
 * Prints `pair: ROUNDS round trips, LOCAL local, FORKED forked`. */
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define ROUNDS 2000
#define LOCAL 100
#define FORKED 50

static int full(ssize_t (*io)(int, void *, size_t, int), int fd, char *b, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = io(fd, b + got, n - got, 0);
        if (r <= 0) return -1;
        got += (size_t)r;
    }
    return 0;
}

static ssize_t rd(int fd, void *b, size_t n, int f) { return recv(fd, b, n, f); }
static ssize_t wr(int fd, void *b, size_t n, int f) { return send(fd, b, n, f); }

static void *answer(void *arg) {
    int fd = *(int *)arg;
    char b[64];
    for (int i = 0; i < ROUNDS; i++)
        if (full(rd, fd, b, 64) || full(wr, fd, b, 64)) return (void *)1;
    return NULL;
}

int main(void) {
    int sv[2];
    char b[100] = {0};
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) return 1;
    pthread_t t;
    if (pthread_create(&t, NULL, answer, &sv[1])) return 1;
    for (int i = 0; i < ROUNDS; i++)
        if (full(wr, sv[0], b, 64) || full(rd, sv[0], b, 64)) return 2;
    void *r;
    pthread_join(t, &r);
    if (r) return 3;
    for (int i = 0; i < LOCAL; i++)
        if (full(wr, sv[0], b, 100) || full(rd, sv[1], b, 100)) return 4;

    int fv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, fv)) return 5;
    pid_t pid = fork();
    if (pid == 0) {
        close(fv[0]);
        for (int i = 0; i < FORKED; i++)
            if (full(rd, fv[1], b, 32) || full(wr, fv[1], b, 32)) return 6;
        return 0;
    }
    close(fv[1]);
    for (int i = 0; i < FORKED; i++)
        if (full(wr, fv[0], b, 32) || full(rd, fv[0], b, 32)) return 7;
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) return 8;
    printf("pair: %d round trips, %d local, %d forked\n", ROUNDS, LOCAL, FORKED);
    return 0;
}
