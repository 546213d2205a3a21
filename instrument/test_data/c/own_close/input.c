long write(int fd, const void *buf, unsigned long n);

struct file { int fd; };

/* This file defines its own close(): calls to it are not socket calls. */
static int close(struct file *f) { return f->fd; }

int finish(struct file *f, int fd, char *buf)
{
    write(fd, buf, 1);
    return close(f);
}
