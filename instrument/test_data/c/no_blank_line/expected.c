#include <stdio.h>
int main(void) { P5_SCOPE(0x6bf87bc92b881b03ULL); return puts("hi") < 0; }
