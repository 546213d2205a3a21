#include <stddef.h>
#include <sys/socket.h>
#include <unistd.h>

struct chan {
    long (*send)(void *self, const char *buf, size_t len);
    int (*close)(void *self);
};

ssize_t send(int fd, const void *buf, size_t len, int flags);

static int exchange(int fd, struct chan *c, char *buf, size_t len)
{
    ssize_t n = send(fd, buf, len, 0);
    if (n < 0)
        return -1;
    n = recv(fd, buf, len, MSG_WAITALL);
    c->send(c, buf, (size_t)n);
    c->close(c);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    n = recvfrom(fd, buf, len, 0, (struct sockaddr *)&ss,
                 &sl);
    sendto(fd, buf, (size_t)n, 0, (struct sockaddr *)&ss, sl);
    write(1, buf, (size_t)n);
    read(0, buf, len);
    shutdown(fd, SHUT_WR);
    int nfd = accept(fd, NULL, NULL);
    connect(nfd, (struct sockaddr *)&ss, sl);
    ssize_t (*reader)(int, void *, size_t) = read;
    (void)reader;
    return close(nfd);
}

int main(void) { return exchange(-1, NULL, NULL, 0); }
