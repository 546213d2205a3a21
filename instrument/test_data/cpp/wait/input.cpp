#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>

namespace net {
struct Loop {
    int once(int timeout) { return ::poll(nullptr, 0, timeout); }
};
}

int run(net::Loop &l, int fd, int ep)
{
    pollfd p{fd, POLLIN, 0};
    int n = poll(&p, 1, 20);
    fd_set r;
    FD_ZERO(&r);
    FD_SET(fd, &r);
    timeval tv{0, 1000};
    n += ::select(fd + 1, &r, nullptr, nullptr, &tv);
    epoll_event ev[8];
    n += epoll_wait(ep, ev, 8, 20);
    return n + l.once(5);
}

int main() { net::Loop l; return run(l, -1, -1); }
