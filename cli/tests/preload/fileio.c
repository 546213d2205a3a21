/* File and pipe I/O whose results must not change under the preload (issue 16): read, write,
 * readv and writev on a file, a pipe and a socketpair, with the errors they can give, first
 * single-threaded (the preload's direct path) and again after starting a thread (glibc's own
 * functions). Every result and errno goes to the report file named by argv[1]. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

static FILE *out;

static void note(const char *what, long r) {
    fprintf(out, "%s %ld %s\n", what, r, r < 0 ? strerror(errno) : "");
    errno = 0;
}

static void round_of_calls(const char *dir, const char *tag) {
    char path[512], buf[64], a[8], b[8];
    snprintf(path, sizeof path, "%s/data-%s", dir, tag);
    int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0600);
    note("open", fd < 0 ? -1 : 0);
    note("write", write(fd, "hello file", 10));
    struct iovec wv[2] = {{"ab", 2}, {"cdef", 4}};
    note("writev", writev(fd, wv, 2));
    lseek(fd, 0, SEEK_SET);
    memset(buf, 0, sizeof buf);
    note("read", read(fd, buf, 5));
    fprintf(out, "  got %s\n", buf);
    struct iovec rv[2] = {{a, 3}, {b, 8}};
    memset(a, 0, sizeof a);
    memset(b, 0, sizeof b);
    note("readv", readv(fd, rv, 2));
    fprintf(out, "  got %.3s|%.8s\n", a, b);
    note("read at end", read(fd, buf, sizeof buf));
    close(fd);
    note("read closed", read(fd, buf, 1));
    note("write closed", write(fd, "x", 1));
    note("readv bad count", readv(0, rv, -1));
    int rd = open("/dev/null", O_RDONLY);
    note("write read-only", write(rd, "x", 1));
    close(rd);
    int p[2];
    note("pipe", pipe2(p, O_NONBLOCK));
    note("read empty pipe", read(p[0], buf, 1));
    note("write pipe", write(p[1], "pq", 2));
    note("read pipe", read(p[0], buf, sizeof buf));
    close(p[0]);
    close(p[1]);
    int sv[2];
    note("socketpair", socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    note("write socket", write(sv[0], "ping", 4));
    note("read socket", read(sv[1], buf, sizeof buf));
    close(sv[0]);
    close(sv[1]);
    fflush(out);
}

static void *nothing(void *arg) { return arg; }

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    out = fopen(argv[1], "w");
    if (!out) return 3;
    round_of_calls(argv[2], "one-thread");
    pthread_t t;
    note("pthread_create", pthread_create(&t, 0, nothing, 0));
    pthread_join(t, 0);
    round_of_calls(argv[2], "threads");
    fclose(out);
    return 0;
}
