/* A sensor that fires from a .preinit_array function, before the C library has set up the
 * environment: the runtime must not initialise then (it would miss P5_DIR), and must record
 * normally once main runs. */
#include <stdio.h>
#include "p5.h"

static void early(int argc, char **argv, char **envp) {
    (void)argc;
    (void)argv;
    (void)envp;
    p5_enter(0x77);
    p5_exit(0x77);
}

__attribute__((section(".preinit_array"), used)) static void (*early_ptr)(int, char **, char **) = early;

int main(void) {
    p5_enter(0x78);
    p5_exit(0x78);
    puts("done");
    return 0;
}
