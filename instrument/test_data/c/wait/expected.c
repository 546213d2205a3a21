#define _GNU_SOURCE
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <sys/epoll.h>
#include <sys/select.h>

struct loop {
    int (*poll)(struct loop *self, int timeout);
};
#include "p5.h"
static int wait_all(struct loop *l, int fd, int ep)
{ P5_SCOPE(0x36fdb728d443cabfULL);
    struct pollfd p = { .fd = fd, .events = POLLIN };
    int n = p5_poll(0x56fe5c0580b3162fULL, &p, 1, 20);
    struct timespec ts = { 0, 1000000 };
    sigset_t mask;
    sigemptyset(&mask);
    n += p5_ppoll(0x63ac1d2ffe0093ccULL, &p, 1, &ts, &mask);
    fd_set r;
    FD_ZERO(&r);
    FD_SET(fd, &r);
    struct timeval tv = { 0, 1000 };
    n += p5_select(0x3da0d9b08614b4f5ULL, fd + 1, &r, NULL, NULL, &tv);
    n += p5_pselect(0x4a4e9adb03623292ULL, fd + 1, &r, NULL, NULL, &ts, &mask);
    struct epoll_event ev[8];
    n += p5_epoll_wait(0x89b960af75efd8a3ULL, ep, ev, 8, 20);
    n += p5_epoll_pwait(0x966921d9f340bc40ULL, ep, ev, 8, 20, &mask);
    n += l->poll(l, 5);
    int (*waiter)(struct pollfd *, nfds_t, int) = poll;
    (void)waiter;
    return n;
}

int main(void) { P5_SCOPE(0x6bf87bc92b881b03ULL); return wait_all(NULL, -1, -1); }
