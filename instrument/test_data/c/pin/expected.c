#include <stdint.h>
#include "p5.h"
static uint64_t hash_step(uint64_t h, uint8_t b) { P5_SCOPE_COUNT(0xf04ecb6a7dfc4443ULL);
    return (h ^ b) * 1099511628211ULL;
}

int parse_line(const char *s) { P5_SCOPE_ALWAYS(0xcc3945c7a072bfc6ULL);
    int n = 0;
    while (*s) n += *s++ == ',';
    return n;
}

int helper(int x) { P5_SCOPE(0x6f484cec3b25bd74ULL);
    return x + 1;
}
