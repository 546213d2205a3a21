/* Processes that end without atexit handlers, unmodified (recorded with --preload):
 * `quick_end _exit N` and `quick_end _Exit N` send N 8-byte messages over a socketpair to
 * themselves (2 × N recorded calls) and end with _exit(0) / _Exit(0) right after the last;
 * `quick_end exec` forks a child that sends one message over a socketpair and at once
 * execs /bin/true (before its connection to the log server can have been made). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static int exchange(int n) {
    int sv[2];
    char b[8] = "p5-bytes";
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) return -1;
    for (int i = 0; i < n; i++)
        if (send(sv[0], b, 8, 0) != 8 || recv(sv[1], b, 8, MSG_WAITALL) != 8) return -1;
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    int n = argc > 2 ? atoi(argv[2]) : 1;
    if (strcmp(argv[1], "exec") == 0) {
        pid_t pid = fork();
        if (pid == 0) {
            if (exchange(1)) _exit(3);
            char *args[] = {"true", NULL};
            execv("/bin/true", args);
            _exit(4);
        }
        int st;
        if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) return 5;
        printf("quick_end: child %d exec'd\n", (int)pid);
        return 0;
    }
    if (exchange(n)) return 1;
    printf("quick_end: %d messages, then %s\n", n, argv[1]);
    fflush(stdout);
    if (strcmp(argv[1], "_Exit") == 0) _Exit(0);
    _exit(0);
}
