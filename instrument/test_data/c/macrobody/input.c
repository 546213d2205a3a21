/* A body with lines tree-sitter cannot read (SQLite's SEH macros, Lua's `vmcase`) keeps its
   braces: the function gets its sensor, the unreadable lines are left alone. */
#include <stdio.h>
#define SEH_TRY
#define SEH_EXCEPT(x)
#define vmcase(l) case l:
#define vmbreak break

static int twice(int x) { return 2 * x; }

int guarded(int r)
{
    SEH_TRY {
        r = twice(r);
    }
    SEH_EXCEPT( r = -1; )
    return r;
}

int dispatch(int op)
{
    int r = 0;
    switch (op) {
        vmcase(1) {
            r = twice(op);
            vmbreak;
        }
        vmcase(2) vmbreak;
    }
    return r;
}
