#include <stdio.h>

int good(int x)
{
    return x + 1;
}

int bad(int x)
{
    return x + * ;
}

int also_good(void) { return good(1); }
