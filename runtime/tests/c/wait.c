/* Waits through the C ABI: each wrapper on an idle UDP socket with a 20 ms timeout, one
 * ready wait, and one failing wait whose errno must survive the recording. */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>
#include "p5.h"

int main(void)
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0
        || getsockname(fd, (struct sockaddr *)&a, &al) != 0)
        return 2;

    struct pollfd p = { .fd = fd, .events = POLLIN };
    int idle = p5_poll(0x400, &p, 1, 20);
    struct timespec ts = { 0, 20 * 1000 * 1000 };
    sigset_t mask;
    sigemptyset(&mask);
    idle += p5_ppoll(0x401, &p, 1, &ts, &mask);
    fd_set r;
    FD_ZERO(&r);
    FD_SET(fd, &r);
    struct timeval tv = { 0, 20 * 1000 };
    idle += p5_select(0x402, fd + 1, &r, NULL, NULL, &tv);
    FD_ZERO(&r);
    FD_SET(fd, &r);
    idle += p5_pselect(0x403, fd + 1, &r, NULL, NULL, &ts, &mask);
    int ep = epoll_create1(0);
    struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0)
        return 3;
    struct epoll_event out[4];
    idle += p5_epoll_wait(0x404, ep, out, 4, 20);
    idle += p5_epoll_pwait(0x405, ep, out, 4, 20, &mask);
    if (idle != 0)
        return 4;

    if (sendto(fd, "x", 1, 0, (struct sockaddr *)&a, sizeof a) != 1)
        return 5;
    if (p5_poll(0x406, &p, 1, 1000) != 1 || p5_epoll_wait(0x407, ep, out, 4, 1000) != 1)
        return 6;

    errno = 0;
    if (p5_epoll_wait(0x408, -1, out, 4, 0) != -1 || errno != EBADF)
        return 7;
    printf("ep %d\n", ep);
    return 0;
}
