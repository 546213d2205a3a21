/* p5-instrument end-to-end program: early returns and a loopback socket exchange */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>

static int square(int x) { return x * x; }

static int classify(int v)
{
    if (v < 0)
        return -1;
    if (v == 0) {
        return 0;
    }
    return square(v) > 100 ? 2 : 1;
}

int main(void)
{
    int srv = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    socklen_t alen = sizeof a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(srv, (struct sockaddr *)&a, sizeof a) != 0 || listen(srv, 1) != 0)
        return 1;
    getsockname(srv, (struct sockaddr *)&a, &alen);
    int cli = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(cli, (struct sockaddr *)&a, sizeof a) != 0)
        return 1;
    int peer = accept(srv, NULL, NULL);
    char buf[16];
    /* Nothing sent yet: a 20 ms poll waits it out; after the send, select and epoll_wait
     * find the request. */
    struct pollfd pf = { .fd = peer, .events = POLLIN };
    if (poll(&pf, 1, 20) != 0)
        return 1;
    send(cli, "ping", 4, 0);
    fd_set rs;
    FD_ZERO(&rs);
    FD_SET(peer, &rs);
    struct timeval tv = { 1, 0 };
    int ep = epoll_create1(0);
    struct epoll_event ev = { .events = EPOLLIN, .data.fd = peer };
    epoll_ctl(ep, EPOLL_CTL_ADD, peer, &ev);
    if (select(peer + 1, &rs, NULL, NULL, &tv) != 1 || epoll_wait(ep, &ev, 1, 1000) != 1)
        return 1;
    close(ep);
    ssize_t n = recv(peer, buf, sizeof buf, 0);
    // p5:begin reply
    write(peer, buf, (size_t)n);
    n = read(cli, buf, sizeof buf);
    // p5:end
    printf("%d %d %d %zd\n", classify(-3), classify(0), classify(12), n);
    close(peer);
    close(cli);
    close(srv);
    return 0;
}
