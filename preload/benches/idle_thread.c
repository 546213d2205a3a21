/* For the cost benchmark: one idle thread started when loaded, so a bare program runs
 * multi-threaded like a recording one (whose runtime has a flusher thread). glibc takes a
 * slower path in cancellable system calls (read, write, send, recv, ...) once a process has
 * a second thread. */
#include <pthread.h>
#include <unistd.h>
static void *idle(void *a) { (void)a; for (;;) pause(); return 0; }
__attribute__((constructor)) static void start(void) { pthread_t t; pthread_create(&t, 0, idle, 0); }
