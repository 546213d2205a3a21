#include <stdio.h>
#include "p5.h"
int good(int x)
{ P5_SCOPE(0x71b30633fef791f3ULL);
    return x + 1;
}

int bad(int x)
{ P5_SCOPE(0x5515fc2e65de2403ULL);
    return x + * ;
}

int also_good(void) { P5_SCOPE(0x34bba19cac497885ULL); return good(1); }
