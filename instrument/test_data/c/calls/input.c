#include <setjmp.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#define TWICE(x) ((x) * 2)

struct point { int x, y; };

static int f(int a) { return a + 1; }
static int g(int a, int b) { return a * b; }
static struct point mk(int x) { struct point p = { x, x }; return p; }
static int (*fp)(int) = f;
static jmp_buf env;

int use(char *buf)
{
    int arr[sizeof(f(1))];
    int v = g(f(1), f(2));
    switch (v) {
    case sizeof(mk(0)):
        v = TWICE(f(v));
        break;
    default:
        break;
    }
    if (setjmp(env))
        return 0;
    memset(buf, 0, sizeof arr);
    write(1, buf, strlen(buf));
    return mk(v).x + fp(3) + (int)offsetof(struct point, y);
}
