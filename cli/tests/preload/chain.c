/* An unmodified client -> server -> backend chain for `p5 record --preload` tests: plain C,
 * built without p5. One source, three programs (-DROLE_CLIENT, -DROLE_SERVER,
 * -DROLE_BACKEND), so each process is named after its own program.
 *
 *   backend PORTFILE            listens on 127.0.0.1:0, writes its port; forks one child per
 *                               connection, which answers each 32-byte query with 64 bytes
 *                               (readv/writev)
 *   server PORTFILE BACKENDFILE listens, writes its port; for each 32-byte request of its one
 *                               client (poll, a MSG_PEEK recv, then read) asks the backend
 *                               (send/recv) and
 *                               answers with 64 bytes (write)
 *   client SERVERFILE N         sends N requests (send), reads each reply (recv) and prints
 *                               "client: N requests, N replies"
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define UNUSED __attribute__((unused))
#define REQ 32
#define REP 64

static UNUSED void die(const char *what) { perror(what); exit(2); }

static UNUSED int listen_on_any(const char *portfile) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) die("socket");
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 16)) die("bind/listen");
    socklen_t len = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &len);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", portfile);
    FILE *f = fopen(tmp, "w");
    if (!f) die("fopen");
    fprintf(f, "%d\n", ntohs(a.sin_port));
    fclose(f);
    if (rename(tmp, portfile)) die("rename");
    return fd;
}

static UNUSED int connect_to(const char *portfile) {
    int port = 0;
    for (int i = 0; i < 1000 && port == 0; i++) {
        FILE *f = fopen(portfile, "r");
        if (f) {
            if (fscanf(f, "%d", &port) != 1) port = 0;
            fclose(f);
        }
        if (port == 0) usleep(10000);
    }
    if (port == 0) die("no port file");
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) die("connect");
    return fd;
}

/* Reads exactly n bytes with read(2); 0 at end of stream. */
static UNUSED int read_full(int fd, char *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r <= 0) return 0;
        got += (size_t)r;
    }
    return 1;
}

static UNUSED int recv_full(int fd, char *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = recv(fd, buf + got, n - got, 0);
        if (r <= 0) return 0;
        got += (size_t)r;
    }
    return 1;
}

static UNUSED void send_full(int fd, const char *buf, size_t n) {
    while (n > 0) {
        ssize_t w = send(fd, buf, n, 0);
        if (w <= 0) die("send");
        buf += w;
        n -= (size_t)w;
    }
}

#ifdef ROLE_BACKEND
static void serve_backend(int c) {
    char q[REQ], a[REP];
    for (;;) {
        struct iovec in = {q, REQ};
        ssize_t r = readv(c, &in, 1);
        if (r <= 0) break;
        if (r < REQ && !read_full(c, q + r, REQ - (size_t)r)) break;
        memset(a, 'b', REP);
        memcpy(a, q, 8);
        struct iovec out[2] = {{a, REP / 2}, {a + REP / 2, REP / 2}};
        if (writev(c, out, 2) != REP) die("writev");
    }
    close(c);
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    signal(SIGCHLD, SIG_DFL);
    int l = listen_on_any(argv[1]);
    int c = accept(l, NULL, NULL);
    if (c < 0) die("accept");
    pid_t p = fork();
    if (p == 0) {
        close(l);
        serve_backend(c);
        return 0;
    }
    close(c);
    int st = 0;
    waitpid(p, &st, 0);
    close(l);
    return 0;
}
#endif

#ifdef ROLE_SERVER
int main(int argc, char **argv) {
    if (argc < 3) return 2;
    int l = listen_on_any(argv[1]);
    int b = connect_to(argv[2]);
    int c = accept(l, NULL, NULL);
    if (c < 0) die("accept");
    char q[REQ], r[REP];
    for (;;) {
        struct pollfd p = {.fd = c, .events = POLLIN};
        if (poll(&p, 1, 10000) <= 0) break;
        char first; /* a peek leaves the byte for read: not a receive of its own */
        if (recv(c, &first, 1, MSG_PEEK) != 1) break;
        if (!read_full(c, q, REQ)) break;
        send_full(b, q, REQ);
        if (!recv_full(b, r, REP)) die("backend reply");
        if (write(c, r, REP) != REP) die("write");
    }
    shutdown(b, SHUT_WR);
    close(b);
    close(c);
    close(l);
    return 0;
}
#endif

#ifdef ROLE_CLIENT
int main(int argc, char **argv) {
    if (argc < 3) return 2;
    int n = atoi(argv[2]);
    int s = connect_to(argv[1]);
    char q[REQ], r[REP];
    int replies = 0;
    for (int i = 0; i < n; i++) {
        memset(q, 'q', REQ);
        snprintf(q, 9, "%08d", i % 100000000);
        send_full(s, q, REQ);
        if (!recv_full(s, r, REP)) break;
        if (memcmp(r, q, 8) == 0) replies++;
        usleep(1000);
    }
    close(s);
    printf("client: %d requests, %d replies\n", n, replies);
    return 0;
}
#endif
