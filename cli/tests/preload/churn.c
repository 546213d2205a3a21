/* Thread churn under the preload: N short threads (50 at a time, as a thread-per-connection
 * server runs them), each making a socketpair, one send, one recv and two closes — recorded
 * calls through the interposer. Prints `churn threads=N vmhwm_kb=K` (peak resident size). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void *worker(void *arg) {
    int sv[2];
    char b = 'x';
    (void)arg;
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) return (void *)1;
    if (send(sv[0], &b, 1, 0) != 1 || recv(sv[1], &b, 1, 0) != 1) return (void *)1;
    close(sv[0]);
    close(sv[1]);
    return NULL;
}

static long vmhwm_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0) kb = strtol(line + 6, NULL, 10);
    if (f) fclose(f);
    return kb;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    for (int i = 0; i < n; i += 50) {
        pthread_t t[50];
        int k = 0;
        for (; k < 50 && i + k < n; k++)
            if (pthread_create(&t[k], NULL, worker, NULL)) return 1;
        for (int m = 0; m < k; m++) {
            void *r;
            pthread_join(t[m], &r);
            if (r) return 1;
        }
    }
    printf("churn threads=%d vmhwm_kb=%ld\n", n, vmhwm_kb());
    return 0;
}
