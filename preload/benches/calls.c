/* The cost benchmark's program: N send+recv pairs on a socketpair and N write+read pairs on
 * /dev/null and /dev/zero, in alternating batches of 1000; prints nanoseconds per call of each
 * kind in its fastest batch. Plain C, run once bare and once with libp5_preload.so. */
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

#define BATCH 1000

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 200000;
    long rounds = n / BATCH > 0 ? n / BATCH : 1;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) return 1;
    int null = open("/dev/null", O_WRONLY), zero = open("/dev/zero", O_RDONLY);
    if (null < 0 || zero < 0) return 1;
    char buf[64] = {0};
    /* The fastest batch of each kind: what a call costs when nothing else (other processes on
     * this shared machine, page faults, the flusher) got in the way. */
    double best_socket = 1e18, best_file = 1e18;
    for (long r = 0; r < rounds; r++) {
        double t0 = now();
        for (long i = 0; i < BATCH; i++) {
            if (send(sv[0], buf, sizeof buf, 0) != sizeof buf) return 1;
            if (recv(sv[1], buf, sizeof buf, 0) != sizeof buf) return 1;
        }
        double t1 = now();
        for (long i = 0; i < BATCH; i++) {
            if (write(null, buf, sizeof buf) != sizeof buf) return 1;
            if (read(zero, buf, sizeof buf) != sizeof buf) return 1;
        }
        double t2 = now();
        if (t1 - t0 < best_socket) best_socket = t1 - t0;
        if (t2 - t1 < best_file) best_file = t2 - t1;
    }
    printf("socket %.1f\nfile %.1f\n", best_socket / (2.0 * BATCH), best_file / (2.0 * BATCH));
    return 0;
}
