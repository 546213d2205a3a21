/* The C guards in a plain loop (issue 21 item 2), run by `cargo bench --bench lua` in
 * discard mode (P5_DISCARD=1), built as p5.h is by default and with -DP5_CALL_RECORD: ns
 * per enter+exit pair of a recorded scope guard (pinned on, so never throttled), of a
 * throttled one (pinned count-only), of the plain calls p5_enter/p5_exit, and of one bare
 * rdtsc, best of 5 rounds each. */
#define _POSIX_C_SOURCE 199309L
#include "p5.h"
#include <stdio.h>
#include <time.h>

#define N 5000000
static volatile uint64_t sink;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

__attribute__((noinline)) static void inlined(uint64_t i) { P5_SCOPE_ALWAYS(0x5100ULL); sink += i; }
__attribute__((noinline)) static void counted(uint64_t i) { P5_SCOPE_COUNT(0x5200ULL); sink += i; }
__attribute__((noinline)) static void outline(uint64_t i) {
    p5_enter(0x5300ULL);
    sink += i;
    p5_exit(0x5300ULL);
}
__attribute__((noinline)) static void bare(uint64_t i) { sink += i; }
__attribute__((noinline)) static void tsc(uint64_t i) { sink += __builtin_ia32_rdtsc() + i; }

static double best(void (*f)(uint64_t)) {
    double b = 1e30;
    for (int r = 0; r < 5; r++) {
        double t = now();
        for (uint64_t i = 0; i < N; i++) f(i);
        double d = (now() - t) / N;
        if (d < b) b = d;
    }
    return b;
}

int main(void) {
    p5_init();
    outline(0); /* registers this thread's ring */
    double b = best(bare);
#ifdef P5_CALL_RECORD
    const char *how = "P5_CALL_RECORD";
#else
    const char *how = "default";
#endif
    printf("c guards (%s): bare call %.2f ns; rdtsc %.2f ns; recorded guard pair %.2f ns; "
           "throttled (counted) pair %.2f ns; p5_enter+p5_exit %.2f ns (all including the "
           "bare call)\n",
           how,
           b, best(tsc) - b, best(inlined), best(counted), best(outline));
    return 0;
}
