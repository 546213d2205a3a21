#define _GNU_SOURCE
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <sys/epoll.h>
#include <sys/select.h>

struct loop {
    int (*poll)(struct loop *self, int timeout);
};

static int wait_all(struct loop *l, int fd, int ep)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };
    int n = poll(&p, 1, 20);
    struct timespec ts = { 0, 1000000 };
    sigset_t mask;
    sigemptyset(&mask);
    n += ppoll(&p, 1, &ts, &mask);
    fd_set r;
    FD_ZERO(&r);
    FD_SET(fd, &r);
    struct timeval tv = { 0, 1000 };
    n += select(fd + 1, &r, NULL, NULL, &tv);
    n += pselect(fd + 1, &r, NULL, NULL, &ts, &mask);
    struct epoll_event ev[8];
    n += epoll_wait(ep, ev, 8, 20);
    n += epoll_pwait(ep, ev, 8, 20, &mask);
    n += l->poll(l, 5);
    int (*waiter)(struct pollfd *, nfds_t, int) = poll;
    (void)waiter;
    return n;
}

int main(void) { return wait_all(NULL, -1, -1); }
