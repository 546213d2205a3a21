/*
 * cracker: a distributed password cracker (CoSMoS §4.3). The master `cpw` (crack pass words)
 * writes a password file and a dictionary, spawns WORKERS worker processes `cow` (check one
 * word) that connect back over TCP, and feeds them jobs. A toy hash stands in for crypt(3):
 * like DES crypt, setting a new salt is expensive (a key schedule) and each encryption after
 * it is cheap. The last worker runs SLOW times slower, standing in for a slower host.
 *
 *   sync   the master hands one word to every worker, then collects the results in a fixed
 *          order: the fast workers wait for the slow one
 *   async  the master gives the next word to whichever worker answers first (one feeder
 *          thread per worker, which keeps two jobs queued at its worker)
 *   salt   asynchronous, and the jobs are password entries instead of words: a worker sets
 *          the salt once per entry and tries the whole dictionary with it
 *
 * Plain C with no p5 calls: `p5 demo` instruments it with p5-instrument (functions + comm).
 * One binary; it acts as cpw or cow by the name it was started under (argv[0]).
 *
 *   cpw MODE WORKERS SLOW WORDS ACCOUNTS COST
 *   cow PORT SLOWNESS COST          (started by cpw)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <libgen.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define MSG 64
#define MAX_WORKERS 16
#define MAX_ACCOUNTS 4096
#define MAX_WORDS 65536

enum { JOB_STOP = 0, JOB_WORD = 1, JOB_ACCOUNT = 2 };

struct job {
    int32_t kind, index;
    char text[MSG - 8];
};

struct result {
    int32_t cracked, index;
    int32_t accounts[(MSG - 8) / 4]; /* the first ones cracked */
};

struct account {
    char name[24], gecos[48], salt[3];
    uint64_t hash;
};

static struct account accounts[MAX_ACCOUNTS];
static int n_accounts;
static char (*words)[16];
static int n_words;

/* ---- the toy crypt: an expensive salt setup, cheap encryptions ---- */

static uint64_t schedule[64];

static void set_salt(const char *salt, long cost) {
    uint64_t x = (uint64_t)(unsigned char)salt[0] << 8 | (unsigned char)salt[1];
    memset(schedule, 0, sizeof schedule);
    for (long r = 0; r < 40 * cost; r++)
        for (int i = 0; i < 64; i++) {
            x = (x ^ (x >> 29)) * 0xbf58476d1ce4e5b9ULL + (uint64_t)i;
            schedule[i] ^= x;
        }
}

static uint64_t encrypt_word(const char *word, long cost) {
    uint64_t h = 0xcbf29ce484222325ULL;
    size_t len = strlen(word);
    if (len == 0) return h;
    for (long r = 0; r < 5 * cost; r++)
        for (size_t i = 0; i < 64; i++)
            h = (h ^ schedule[i] ^ (unsigned char)word[i % len]) * 0x100000001b3ULL;
    return h;
}

/* The real crypt of an account's password (what /etc/shadow would hold). */
static uint64_t crypt_password(const char *salt, const char *pw, long cost) {
    set_salt(salt, cost);
    return encrypt_word(pw, cost);
}

/* ---- the data: a dictionary and a password file, generated deterministically ---- */

static uint32_t rng = 12345;
static uint32_t next_rand(void) {
    rng = rng * 1103515245u + 12345u;
    return rng >> 8;
}

static void make_word(char *w) {
    int len = 5 + (int)(next_rand() % 4);
    for (int i = 0; i < len; i++) w[i] = (char)('a' + next_rand() % 26);
    w[len] = 0;
}

static const char *FIRST[] = {"ada", "alan", "grace", "edsger", "barbara", "ken", "dennis", "linus"};
static const char *LAST[] = {"lovelace", "turing", "hopper", "dijkstra", "liskov", "thompson"};

static void write_files(int n_w, int n_a, long cost) {
    FILE *wf = fopen("words", "w"), *pf = fopen("passwd", "w");
    if (!wf || !pf) {
        perror("cpw: cannot write words/passwd");
        exit(1);
    }
    char (*ws)[16] = calloc((size_t)n_w, sizeof *ws);
    for (int i = 0; i < n_w; i++) {
        make_word(ws[i]);
        fprintf(wf, "%s\n", ws[i]);
    }
    for (int a = 0; a < n_a; a++) {
        char name[24], gecos[48], salt[3], pw[32];
        snprintf(name, sizeof name, "user%02d", a);
        snprintf(gecos, sizeof gecos, "%s %s", FIRST[a % 8], LAST[a % 6]);
        salt[0] = (char)('a' + a % 26);
        salt[1] = (char)('A' + (a * 7) % 26);
        salt[2] = 0;
        switch (a % 4) {
        case 0: snprintf(pw, sizeof pw, "%s", ws[(a * 37) % n_w]); break; /* a dictionary word */
        case 1: snprintf(pw, sizeof pw, "%s", name); break;               /* the account name */
        case 2: snprintf(pw, sizeof pw, "%s", LAST[a % 6]); break;        /* from the gecos */
        default: make_word(pw); strcat(pw, "7!"); break;                  /* not crackable */
        }
        fprintf(pf, "%s:%s%016llx:%s\n", name, salt,
                (unsigned long long)crypt_password(salt, pw, cost), gecos);
    }
    free(ws);
    fclose(wf);
    fclose(pf);
}

static void read_files(void) {
    FILE *wf = fopen("words", "r"), *pf = fopen("passwd", "r");
    if (!wf || !pf) {
        perror("cow: cannot read words/passwd");
        exit(1);
    }
    words = calloc(MAX_WORDS, sizeof *words);
    while (n_words < MAX_WORDS && fscanf(wf, "%15s", words[n_words]) == 1) n_words++;
    char line[160];
    while (n_accounts < MAX_ACCOUNTS && fgets(line, sizeof line, pf)) {
        struct account *a = &accounts[n_accounts];
        char *name = strtok(line, ":"), *pw = strtok(NULL, ":"), *gecos = strtok(NULL, "\n");
        if (!name || !pw || !gecos || strlen(pw) != 18) continue;
        snprintf(a->name, sizeof a->name, "%s", name);
        snprintf(a->gecos, sizeof a->gecos, "%s", gecos);
        memcpy(a->salt, pw, 2);
        a->salt[2] = 0;
        a->hash = strtoull(pw + 2, NULL, 16);
        n_accounts++;
    }
    fclose(wf);
    fclose(pf);
}

/* ---- messages ---- */

static int read_full(int fd, void *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = recv(fd, (char *)buf + got, n - got, 0);
        if (r <= 0) return -1;
        got += (size_t)r;
    }
    return 0;
}

static int write_full(int fd, const void *buf, size_t n) {
    size_t put = 0;
    while (put < n) {
        ssize_t r = send(fd, (const char *)buf + put, n - put, MSG_NOSIGNAL);
        if (r <= 0) return -1;
        put += (size_t)r;
    }
    return 0;
}

/* ---- cow: the worker ---- */

/* Tries the account name, the words of the gecos field and the dictionary word. */
static int try_word(const struct account *a, const char *word, long cost) {
    set_salt(a->salt, cost);
    if (encrypt_word(a->name, cost) == a->hash) return 1;
    char gecos[48];
    snprintf(gecos, sizeof gecos, "%s", a->gecos);
    for (char *save = NULL, *g = strtok_r(gecos, " ", &save); g; g = strtok_r(NULL, " ", &save))
        if (encrypt_word(g, cost) == a->hash) return 1;
    return encrypt_word(word, cost) == a->hash;
}

/* Salt optimization: one salt setup per account, then the whole dictionary. */
static int check_account(const struct account *a, long cost) {
    set_salt(a->salt, cost);
    if (encrypt_word(a->name, cost) == a->hash) return 1;
    char gecos[48];
    snprintf(gecos, sizeof gecos, "%s", a->gecos);
    for (char *save = NULL, *g = strtok_r(gecos, " ", &save); g; g = strtok_r(NULL, " ", &save))
        if (encrypt_word(g, cost) == a->hash) return 1;
    for (int w = 0; w < n_words; w++)
        if (encrypt_word(words[w], cost) == a->hash) return 1;
    return 0;
}

static char cracked_here[MAX_ACCOUNTS];

/* With commit 0 the work is done but nothing is remembered (a slower host's extra time). */
static void check_job(const struct job *j, struct result *res, long cost, int commit) {
    memset(res, 0, sizeof *res);
    res->index = j->index;
    if (j->kind == JOB_WORD) {
        for (int a = 0; a < n_accounts; a++)
            if (!cracked_here[a] && try_word(&accounts[a], j->text, cost)) {
                cracked_here[a] = (char)commit;
                if (res->cracked < (int)(sizeof res->accounts / sizeof res->accounts[0]))
                    res->accounts[res->cracked++] = a;
            }
    } else if (j->kind == JOB_ACCOUNT && j->index < n_accounts) {
        if (check_account(&accounts[j->index], cost)) {
            res->cracked = 1;
            res->accounts[0] = j->index;
        }
    }
}

static int cow(int port, long slowness, long cost) {
    read_files();
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        perror("cow: connect");
        return 1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct job j;
    struct result res;
    while (read_full(fd, &j, sizeof j) == 0 && j.kind != JOB_STOP) {
        /* A slower host: the same work takes SLOWNESS times as long. */
        for (long s = 1; s <= slowness; s++) check_job(&j, &res, cost, s == slowness);
        if (write_full(fd, &res, sizeof res) != 0) break;
    }
    close(fd);
    return 0;
}

/* ---- cpw: the master ---- */

static int n_jobs, next_job, cracked;
static char found[MAX_ACCOUNTS];
static int job_kind;

static int hand_out(int fd) {
    struct job j;
    memset(&j, 0, sizeof j);
    if (next_job < n_jobs) {
        j.kind = job_kind;
        j.index = next_job;
        if (job_kind == JOB_WORD) snprintf(j.text, sizeof j.text, "%s", words[next_job]);
        next_job++;
    }
    if (write_full(fd, &j, sizeof j) != 0) return -1;
    return j.kind == JOB_STOP ? 0 : 1;
}

static void count_cracked(const struct result *res) {
    for (int i = 0; i < res->cracked && i < (int)(sizeof res->accounts / sizeof res->accounts[0]); i++) {
        int a = res->accounts[i];
        if (a >= 0 && a < n_accounts && !found[a]) {
            found[a] = 1;
            cracked++;
        }
    }
}

static int collect(int fd) {
    struct result res;
    if (read_full(fd, &res, sizeof res) != 0) return -1;
    count_cracked(&res);
    return 0;
}

/* Fixed order: a word to every worker, then every worker's result in turn. */
static int feed_sync(int *fds, int n) {
    while (next_job < n_jobs) {
        int given[MAX_WORKERS];
        for (int w = 0; w < n; w++) given[w] = next_job < n_jobs ? hand_out(fds[w]) : 0;
        for (int w = 0; w < n; w++)
            if (given[w] == 1 && collect(fds[w]) != 0) return -1;
    }
    for (int w = 0; w < n; w++) hand_out(fds[w]);
    return 0;
}

/* Whoever is ready gets the next job: one feeder thread per worker keeps two jobs queued at
 * its worker and hands out the next one as soon as a result comes back. */
static pthread_mutex_t jobs_lock = PTHREAD_MUTEX_INITIALIZER;

/* Sends the next job if one is left; 1 if it did. */
static int give_job(int fd) {
    pthread_mutex_lock(&jobs_lock);
    int left = next_job < n_jobs;
    int rc = left ? hand_out(fd) : 0;
    pthread_mutex_unlock(&jobs_lock);
    return rc == 1;
}

static void *feed_worker(void *arg) {
    int fd = (int)(intptr_t)arg;
    int queued = give_job(fd);
    queued += give_job(fd);
    while (queued > 0) {
        struct result res;
        if (read_full(fd, &res, sizeof res) != 0) return (void *)1;
        queued--;
        pthread_mutex_lock(&jobs_lock);
        count_cracked(&res);
        pthread_mutex_unlock(&jobs_lock);
        queued += give_job(fd);
    }
    struct job stop;
    memset(&stop, 0, sizeof stop);
    return write_full(fd, &stop, sizeof stop) == 0 ? NULL : (void *)1;
}

static int feed_async(int *fds, int n) {
    pthread_t th[MAX_WORKERS];
    for (int w = 1; w < n; w++) pthread_create(&th[w], NULL, feed_worker, (void *)(intptr_t)fds[w]);
    /* The main thread feeds the first worker itself. */
    int rc = feed_worker((void *)(intptr_t)fds[0]) ? -1 : 0;
    for (int w = 1; w < n; w++) {
        void *r = NULL;
        pthread_join(th[w], &r);
        if (r) rc = -1;
    }
    return rc;
}

static int cpw(const char *self, const char *mode, int workers, long slow, int n_w, int n_a,
               long cost) {
    if (workers < 1 || workers > MAX_WORKERS || n_w < 1 || n_w > MAX_WORDS || n_a < 1 ||
        n_a > MAX_ACCOUNTS) {
        fprintf(stderr, "cpw: sizes out of range\n");
        return 2;
    }
    write_files(n_w, n_a, cost);
    read_files();
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof a;
    if (bind(ls, (struct sockaddr *)&a, sizeof a) != 0 || listen(ls, MAX_WORKERS) != 0 ||
        getsockname(ls, (struct sockaddr *)&a, &alen) != 0) {
        perror("cpw: listen");
        return 1;
    }
    char dir[PATH_MAX], cow_path[PATH_MAX + 8], port[16], slowness[16], costs[24];
    snprintf(dir, sizeof dir, "%s", self);
    snprintf(cow_path, sizeof cow_path, "%s/cow", dirname(dir));
    snprintf(port, sizeof port, "%d", ntohs(a.sin_port));
    snprintf(costs, sizeof costs, "%ld", cost);
    pid_t pids[MAX_WORKERS];
    for (int w = 0; w < workers; w++) {
        /* The last worker stands in for a slower host. */
        snprintf(slowness, sizeof slowness, "%ld", w == workers - 1 ? slow : 1L);
        pids[w] = fork();
        if (pids[w] == 0) {
            execl(cow_path, "cow", port, slowness, costs, (char *)NULL);
            perror("cpw: exec cow");
            _exit(127);
        }
    }
    int fds[MAX_WORKERS];
    for (int w = 0; w < workers; w++) {
        fds[w] = accept(ls, NULL, NULL);
        int one = 1;
        setsockopt(fds[w], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    int rc;
    if (strcmp(mode, "salt") == 0) {
        job_kind = JOB_ACCOUNT;
        n_jobs = n_accounts;
        rc = feed_async(fds, workers);
    } else {
        job_kind = JOB_WORD;
        n_jobs = n_words;
        rc = strcmp(mode, "sync") == 0 ? feed_sync(fds, workers) : feed_async(fds, workers);
    }
    for (int w = 0; w < workers; w++) close(fds[w]);
    close(ls);
    for (int w = 0; w < workers; w++) waitpid(pids[w], NULL, 0);
    printf("cpw %s: %d workers, %d words x %d accounts, %d passwords cracked\n", mode, workers,
           n_words, n_accounts, cracked);
    return rc == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
    char name[PATH_MAX];
    snprintf(name, sizeof name, "%s", argv[0]);
    const char *role = basename(name);
    if (strcmp(role, "cow") == 0 && argc == 4) return cow(atoi(argv[1]), atol(argv[2]), atol(argv[3]));
    if (strcmp(role, "cpw") == 0 && argc == 7)
        return cpw(argv[0], argv[1], atoi(argv[2]), atol(argv[3]), atoi(argv[4]), atoi(argv[5]),
                   atol(argv[6]));
    fprintf(stderr, "usage: cpw sync|async|salt WORKERS SLOW WORDS ACCOUNTS COST | cow PORT SLOWNESS COST\n");
    return 2;
}
