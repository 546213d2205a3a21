/* The cost benchmark's program: N send+recv pairs on a socketpair, then N writes to
 * /dev/null and N reads from /dev/zero; prints nanoseconds per call of each kind. Plain C,
 * run once bare and once with libp5_preload.so preloaded. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 200000;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) return 1;
    int null = open("/dev/null", O_WRONLY), zero = open("/dev/zero", O_RDONLY);
    if (null < 0 || zero < 0) return 1;
    char buf[64] = {0};
    double t0 = now();
    for (long i = 0; i < n; i++) {
        if (send(sv[0], buf, sizeof buf, 0) != sizeof buf) return 1;
        if (recv(sv[1], buf, sizeof buf, 0) != sizeof buf) return 1;
    }
    double t1 = now();
    for (long i = 0; i < n; i++) {
        if (write(null, buf, sizeof buf) != sizeof buf) return 1;
        if (read(zero, buf, sizeof buf) != sizeof buf) return 1;
    }
    double t2 = now();
    printf("socket %.1f\nfile %.1f\n", (t1 - t0) / (2.0 * n), (t2 - t1) / (2.0 * n));
    return 0;
}
