/* functions of every shape */
#include <stdarg.h>
#include <stdio.h>
#include "p5.h"
static int sq(int x) { P5_SCOPE(0x791e8cbb3f78fdd8ULL); return x * x; }

static inline int early(int v)
{ P5_SCOPE(0xf00ada7cf04fb53fULL);
    if (v < 0)
        return -1;
    for (int i = 0; i < v; i++) {
        if (i * i > v)
            return i;
    }
    return 0;
}

int sum(int n, ...)
{ P5_SCOPE(0xef15247cb25fe43bULL);
    va_list ap;
    int s = 0;
    va_start(ap, n);
    while (n--)
        s += va_arg(ap, int);
    va_end(ap);
    return s;
}

static int (*pick(int which))(int)
{ P5_SCOPE(0x80fdf8c04cfc61e3ULL);
    return which ? sq : early;
}

int old_style(a, b)
    int a;
    int b;
{ P5_SCOPE(0x4a947d3181c64d47ULL);
    return a + b;
}

void empty(void) { P5_SCOPE(0xd633c420489ef61dULL);}

int main(void)
{ P5_SCOPE(0x6bf87bc92b881b03ULL);
    printf("%d %d %d\n", sq(3), early(10), sum(2, 1, 2));
    return pick(0)(1) + old_style(1, 2);
}
