#include <stdio.h>
int main(void) { return puts("hi") < 0; }
