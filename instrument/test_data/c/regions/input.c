#include <stdio.h>

int work(int n)
{
    int total = 0;
    // p5:begin setup
    total += n;
    if (n > 10)
        return total;
    // p5:end
    for (int i = 0; i < n; i++) {
        /* p5:begin loop body */
        total += i;
        printf("%d\n", total);
        /* p5:end */
    }
    // p5:begin unclosed
    return total;
}

int skipped(int x)
{
    return x + 1;
}

int ranged(int x)
{
    int y = x * 2;
    y += 1;
    y *= 3;
    return y;
}
