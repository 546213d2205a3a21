#ifndef UTIL_H
#define UTIL_H

#include <stddef.h>

static inline size_t clampz(size_t v, size_t hi)
{
    return v > hi ? hi : v;
}

#endif
