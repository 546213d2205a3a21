/* functions of every shape */
#include <stdarg.h>
#include <stdio.h>

static int sq(int x) { return x * x; }

static inline int early(int v)
{
    if (v < 0)
        return -1;
    for (int i = 0; i < v; i++) {
        if (i * i > v)
            return i;
    }
    return 0;
}

int sum(int n, ...)
{
    va_list ap;
    int s = 0;
    va_start(ap, n);
    while (n--)
        s += va_arg(ap, int);
    va_end(ap);
    return s;
}

static int (*pick(int which))(int)
{
    return which ? sq : early;
}

int old_style(a, b)
    int a;
    int b;
{
    return a + b;
}

void empty(void) {}

int main(void)
{
    printf("%d %d %d\n", sq(3), early(10), sum(2, 1, 2));
    return pick(0)(1) + old_style(1, 2);
}
