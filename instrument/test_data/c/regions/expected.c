#include <stdio.h>
#include "p5.h"
int work(int n)
{ P5_SCOPE(0x1d3b1e66e6943a9bULL);
    int total = 0;
    p5_enter_inline(0x39c752fd44cf5ebfULL); // p5:begin setup
    p5_mark_inline(0x3787bfa378ecebc0ULL); total += n;
    p5_mark_inline(0x2ad9fe78fb9f6e23ULL); if (n > 10)
        { p5_exit_inline(0x39c752fd44cf5ebfULL); return total; }
    p5_exit_inline(0x39c752fd44cf5ebfULL); // p5:end
    for (int i = 0; i < n; i++) {
        p5_enter_inline(0x46751427c21cdc5cULL); /* p5:begin loop body */
        p5_mark_inline(0x1e2a3d4e7e4e8a86ULL); total += i;
        p5_mark_inline(0x117c7c2401010ce9ULL); printf("%d\n", total);
        p5_exit_inline(0x46751427c21cdc5cULL); /* p5:end */
    }
    // p5:begin unclosed
    return total;
}

int skipped(int x)
{
    return x + 1;
}

int ranged(int x)
{ P5_SCOPE(0xb60a684a67a4e361ULL);
    int y = x * 2;
    p5_enter_inline(0x6dc111f7c4761aa9ULL); p5_mark_inline(0xa21551469429d2eeULL); y += 1;
    p5_mark_inline(0x9567901c16dc5551ULL); y *= 3; p5_exit_inline(0x6dc111f7c4761aa9ULL);
    return y;
}
