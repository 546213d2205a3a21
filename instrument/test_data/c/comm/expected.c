#include <stddef.h>
#include <sys/socket.h>
#include <unistd.h>

struct chan {
    long (*send)(void *self, const char *buf, size_t len);
    int (*close)(void *self);
};

ssize_t send(int fd, const void *buf, size_t len, int flags);
#include "p5.h"
static int exchange(int fd, struct chan *c, char *buf, size_t len)
{ P5_SCOPE(0x5738c6c752e12febULL);
    ssize_t n = p5_send(0x7ac934aac7ce3c23ULL, fd, buf, len, 0);
    if (n < 0)
        return -1;
    n = p5_recv(0x8776f5d5451bb9c0ULL, fd, buf, len, MSG_WAITALL);
    c->send(c, buf, (size_t)n);
    c->close(c);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    n = p5_recvfrom(0x616bb255cd2fdae9ULL, fd, buf, len, 0, (struct sockaddr *)&ss,
                 &sl);
    p5_sendto(0x6e1973804a7d5886ULL, fd, buf, (size_t)n, 0, (struct sockaddr *)&ss, sl);
    p5_write(0x480c3000d28e13afULL, 1, buf, (size_t)n);
    p5_read(0x54bbf12b4fdef74cULL, 0, buf, len);
    shutdown(fd, SHUT_WR);
    int nfd = p5_accept(0x2eaeadabd7efb275ULL, fd, NULL, NULL);
    p5_connect(0x3b5e6ed655409612ULL, nfd, (struct sockaddr *)&ss, sl);
    ssize_t (*reader)(int, void *, size_t) = read;
    (void)reader;
    return p5_close(0x15512b56dd51513bULL, nfd);
}

int main(void) { P5_SCOPE(0x6bf87bc92b881b03ULL); return exchange(-1, NULL, NULL, 0); }
