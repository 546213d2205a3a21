#include <unistd.h>
#include "p5.h"
int net_send(int fd) { P5_SCOPE(0x7e796ba8f67023e2ULL); return (int)p5_write(0xd20997bd3b5f5ec2ULL, fd, "x", 1); }

int net_fast(int fd) { return (int)write(fd, "y", 1); }

int helper(void) { return 0; }
