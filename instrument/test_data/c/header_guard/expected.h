#ifndef UTIL_H
#define UTIL_H

#include <stddef.h>
#include "p5.h"
static inline size_t clampz(size_t v, size_t hi)
{ P5_SCOPE(0x290e48866d690f20ULL);
    return v > hi ? hi : v;
}

#endif
