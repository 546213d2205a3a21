#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include "p5.h"
namespace net {
struct Loop {
    int once(int timeout) { P5_SCOPE(0x10da5ee7e8bafc76ULL); return ::p5_poll(0x315fea614c76166eULL, nullptr, 0, timeout); }
};
}

int run(net::Loop &l, int fd, int ep)
{ P5_SCOPE(0xf4672455574bd911ULL);
    pollfd p{fd, POLLIN, 0};
    int n = p5_poll(0x38a4dd6b08fa3355ULL, &p, 1, 20);
    fd_set r;
    FD_ZERO(&r);
    FD_SET(fd, &r);
    timeval tv{0, 1000};
    n += ::p5_select(0x45529e958647b0f2ULL, fd + 1, &r, nullptr, nullptr, &tv);
    epoll_event ev[8];
    n += p5_epoll_wait(0x52025fc00398948fULL, ep, ev, 8, 20);
    return n + l.once(5);
}

int main() { P5_SCOPE(0x9ca596375c333983ULL); net::Loop l; return run(l, -1, -1); }
