/* Throttling through p5.h's inline scope guards (runtime test
 * `hot_tiny_scopes_are_throttled_and_counted`): a hot tiny function, a slow one, one pinned
 * on, one pinned off, one that is sometimes long and one that is rarely long, all in one
 * thread. */
#define _POSIX_C_SOURCE 199309L
#include "p5.h"
#include <stdio.h>
#include <time.h>

static volatile unsigned long sink;

static void tiny(unsigned long i) { P5_SCOPE(0x7100ULL); sink += i; }
static void pinned_on(unsigned long i) { P5_SCOPE_ALWAYS(0x7300ULL); sink ^= i; }
static void pinned_off(unsigned long i) { P5_SCOPE_COUNT(0x7400ULL); sink += 3 * i; }
/* Long every 50th call (i = 0, 50, …): throttled by the mean (≈ 0.6 µs), yet each long call
 * falls within 4096 calls of the previous one, so every one is recorded. */
static void sometimes(unsigned long i) {
    P5_SCOPE(0x7500ULL);
    if (i % 50 == 0 && i < 50000) {
        struct timespec ts = {0, 30000};
        nanosleep(&ts, 0);
    }
    sink += i;
}
/* Long once every 5000 calls (i = 2500, 7500, …): each long call comes after the window
 * the previous one opened and is seldom a sampled call, so only P5_THROTTLE=N,T,all records
 * every one. */
static void rare(unsigned long i) {
    P5_SCOPE(0x7600ULL);
    if (i % 5000 == 2500) {
        struct timespec ts = {0, 30000};
        nanosleep(&ts, 0);
    }
    sink += i;
}
static void slow(void) {
    P5_SCOPE(0x7200ULL);
    struct timespec ts = {0, 30000};
    nanosleep(&ts, 0);
}

int main(void) {
    p5_init();
    /* The flusher arms the rule once it has measured the tick rate (~0.2 ms after its
     * start; later on a loaded machine): wait for that, at most 10 s. */
    struct timespec ts = {0, 1000000};
    for (int i = 0; i < 10000 && __atomic_load_n(&p5_throttle_ticks, __ATOMIC_RELAXED) == UINT64_MAX; i++)
        nanosleep(&ts, 0);
    for (unsigned long i = 0; i < 50000; i++) {
        tiny(i);
        pinned_on(i);
        pinned_off(i);
        sometimes(i);
        rare(i);
    }
    for (int i = 0; i < 300; i++) slow();
    printf("done %lu\n", sink);
    return 0;
}
