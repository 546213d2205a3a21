#include <setjmp.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#define TWICE(x) ((x) * 2)

struct point { int x, y; };
#include "p5.h"
static int f(int a) { P5_SCOPE(0x2a1b7aba4d053538ULL); return a + 1; }
static int g(int a, int b) { P5_SCOPE(0x1b8eff4af104fa65ULL); return a * b; }
static struct point mk(int x) { P5_SCOPE(0x7bbe190c24f6c190ULL); struct point p = { x, x }; return p; }
static int (*fp)(int) = f;
static jmp_buf env;

int use(char *buf)
{ P5_SCOPE_ALWAYS(0x35b3d505323d19f7ULL);
    int arr[sizeof(f(1))];
    int v = ({ P5_SCOPE(0x677c1055ecc30cd7ULL); g(({ P5_SCOPE(0x742bd1806a13f074ULL); f(1); }), ({ P5_SCOPE(0x4e1e8e00f224ab9dULL); f(2); })); });
    switch (v) {
    case sizeof(mk(0)):
        v = TWICE(f(v));
        break;
    default:
        break;
    }
    if (setjmp(env))
        return 0;
    ({ P5_SCOPE(0x5ace4f2b6f758f3aULL); memset(buf, 0, sizeof arr); });
    p5_write(0x5e3685b54af76f57ULL, 1, buf, ({ P5_SCOPE(0x9a3714ffe1ffcf4bULL); strlen(buf); }));
    return ({ P5_SCOPE(0xa6e6d62a5f50b2e8ULL); mk(v); }).x + ({ P5_SCOPE(0x80d992aae7616e11ULL); fp(3); }) + (int)offsetof(struct point, y);
}
