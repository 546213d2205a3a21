long write(int fd, const void *buf, unsigned long n);

struct file { int fd; };

/* This file defines its own close(): calls to it are not socket calls. */
static int close(struct file *f) { return f->fd; }
#include "p5.h"
int finish(struct file *f, int fd, char *buf)
{ P5_SCOPE(0xf0759ad066579e71ULL);
    p5_write(0x9f5ac14f7dce41b5ULL, fd, buf, 1);
    return close(f);
}
