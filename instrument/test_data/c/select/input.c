#include <unistd.h>

int net_send(int fd) { return (int)write(fd, "x", 1); }

int net_fast(int fd) { return (int)write(fd, "y", 1); }

int helper(void) { return 0; }
