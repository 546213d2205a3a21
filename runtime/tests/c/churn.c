/* Thread churn through the C ABI: THREADS short threads (in batches of BATCH running at once,
 * as a thread-per-connection server has them), each recording 4 events and ending. Prints
 * `churn threads=N first_event_ns=M vmhwm_kb=K`: the median time from creating a thread to
 * its first event being recorded, and the process's peak resident size (VmHWM). */
#define _GNU_SOURCE
#include "p5.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BATCH 50

static unsigned long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec;
}

struct job {
    unsigned long long created;
    unsigned long long first;
};

static void *worker(void *arg) {
    struct job *j = arg;
    p5_enter(0xC0);
    j->first = now_ns();
    p5_exit(0xC0);
    p5_enter(0xC1);
    p5_exit(0xC1);
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

static int cmp(const void *a, const void *b) {
    unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    struct job *jobs = calloc((size_t)n, sizeof *jobs);
    unsigned long long *took = calloc((size_t)n, sizeof *took);
    if (!jobs || !took) return 1;
    p5_init();
    for (int i = 0; i < n; i += BATCH) {
        pthread_t t[BATCH];
        int k = 0;
        for (; k < BATCH && i + k < n; k++) {
            jobs[i + k].created = now_ns();
            if (pthread_create(&t[k], NULL, worker, &jobs[i + k])) return 1;
        }
        for (int m = 0; m < k; m++) pthread_join(t[m], NULL);
    }
    for (int i = 0; i < n; i++) took[i] = jobs[i].first - jobs[i].created;
    qsort(took, (size_t)n, sizeof *took, cmp);
    printf("churn threads=%d first_event_ns=%llu vmhwm_kb=%ld\n", n, took[n / 2], vmhwm_kb());
    return 0;
}
