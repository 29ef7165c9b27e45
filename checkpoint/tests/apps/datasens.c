/* A small application with data-sensitive routines, for tdg's checkpoint tests.
 *
 *   datasens MODE OUTFILE [INFILE]
 *
 * MODE search: pointer-chasing search for a key in a 512 KiB linked list whose
 *              nodes lie in random order in memory (calls differ by key).
 * MODE sort:   insertion sort of a nearly-sorted 256 KiB array (a few local
 *              swaps per call), which exits each inner loop almost at once;
 *              called through TDG_ROUTINE, so a restored copy can run a
 *              candidate isort instead.
 * MODE pair:   the search, marked with tdg_enter_checkpoint/tdg_stop_checkpoint.
 * MODE tiny:   two short regions per call: "empty" (nothing between the
 *              markers) and "short" (a ~200 ns dependent chain over 64 longs in
 *              L1), for the region-timing overhead figures.
 * MODE tcp:    holds an established loopback TCP connection, then searches.
 * MODE input:  keeps INFILE open read-only, then searches.
 * Every mode also owns 16 MiB of other data (the rest of an application) and
 * writes a line per call to OUTFILE (truncated at start, so it changes size
 * after any checkpoint) and to stdout.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tdg_checkpoint.h"

/* Built with -DTDG_INSTRUMENT_MARKERS, the timed calls are also profiled with
 * tdg's instrument library (the in-app reference the checkpoint timing is
 * checked against), recording the call number and the routine's argument.
 * Without it the calls are left exactly as they were. */
#ifdef TDG_INSTRUMENT_MARKERS
#include "tdg_instrument.h"
#define PROFILED(name, params, stmt, ...) TDG_PROFILE(name, params, stmt, __VA_ARGS__)
#else
#define PROFILED(name, params, stmt, ...) stmt
#endif

void isort(long *a, int n);

#ifndef CALLS
#define CALLS 12
#endif
/* 256 KiB of 64-byte nodes, a quarter of the 1 MiB L2: wherever its 4 KiB pages
 * land, no set of the physically indexed 8-way L2 overflows. At 512 KiB some
 * did, and each process's (or restore's) time depended on its page frames. */
#define NODES (1 << 12)
#define SORT_N (1 << 15)
#define BALLAST (16 << 20)
#ifndef SHORT_STEPS
#define SHORT_STEPS 300
#endif

struct node {
    struct node *next;
    long key;
    long payload[6];
};

static unsigned long long rng = 88172645463325252ULL;
static unsigned long long next_random(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static struct node *build_list(struct node *nodes, long *order)
{
    for (long i = 0; i < NODES; i++)
        order[i] = i;
    for (long i = NODES - 1; i > 0; i--) {
        long j = (long)(next_random() % (unsigned long long)(i + 1));
        long t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (long i = 0; i < NODES; i++) {
        struct node *n = &nodes[order[i]];
        n->next = i + 1 < NODES ? &nodes[order[i + 1]] : NULL;
        n->key = i;
    }
    return &nodes[order[0]];
}

/* About 200 ns of dependent multiply-adds over data in L1. */
static long short_work(const long *a, long seed)
{
    long x = seed;
    for (int i = 0; i < SHORT_STEPS; i++)
        x = x * 3 + a[i & 63];
    return x;
}

/* Walk the list until the key; the work depends on where the key sits. */
static long search(const struct node *head, long key)
{
    long steps = 0;
    for (const struct node *n = head; n; n = n->next, steps++)
        if (n->key == key)
            return steps;
    return -1;
}

static void hold_tcp_connection(void)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int l = socket(AF_INET, SOCK_STREAM, 0), c = socket(AF_INET, SOCK_STREAM, 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (l < 0 || c < 0 || bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 1) < 0 ||
        getsockname(l, (struct sockaddr *)&a, &len) < 0 || connect(c, (struct sockaddr *)&a, sizeof a) < 0 ||
        accept(l, NULL, NULL) < 0) {
        perror("datasens: loopback connection");
        exit(2);
    }
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: datasens search|sort|pair|tcp|input OUTFILE [INFILE]\n");
        return 2;
    }
    const char *mode = argv[1];
    FILE *out = fopen(argv[2], "w");
    if (!out) {
        perror(argv[2]);
        return 2;
    }
    /* Where it sat when captured: a test restores each shape a shell can
     * give a program on a terminal (see criu_restores.rs). */
    fprintf(out, "session %s, process group %s, terminal foreground %s\n",
            getsid(0) == getpid() ? "leader" : "member", getpgrp() == getpid() ? "leader" : "member",
            tcgetpgrp(STDIN_FILENO) == getpgrp() ? "yes" : "no");
    FILE *in = NULL;
    if (strcmp(mode, "input") == 0) {
        if (argc < 4 || !(in = fopen(argv[3], "r"))) {
            fprintf(stderr, "datasens: input mode needs a readable INFILE\n");
            return 2;
        }
    }
    if (strcmp(mode, "tcp") == 0)
        hold_tcp_connection();

    char *ballast = malloc(BALLAST);
    struct node *nodes = malloc(sizeof(struct node) * NODES);
    long *order = malloc(sizeof(long) * NODES);
    long *arr = malloc(sizeof(long) * SORT_N);
    if (!ballast || !nodes || !order || !arr)
        return 3;
    for (long i = 0; i < BALLAST; i += 64)
        ballast[i] = (char)i;
    struct node *head = build_list(nodes, order);
    for (long i = 0; i < SORT_N; i++)
        arr[i] = i;

    long checksum = 0;
    for (int call = 1; call <= CALLS; call++) {
        long result;
        if (strcmp(mode, "tiny") == 0) {
            tdg_region_begin("empty");
            tdg_region_end("empty");
            tdg_region_begin("short");
            result = short_work(arr, call);
            tdg_region_end("short");
        } else if (strcmp(mode, "sort") == 0) {
            /* nearly sorted: a few local swaps */
            for (int s = 0; s < 64; s++) {
                long i = (long)(next_random() % (SORT_N - 1));
                long t = arr[i];
                arr[i] = arr[i + 1];
                arr[i + 1] = t;
            }
            tdg_region_begin("sort");
            PROFILED("sort", "call:i,n:i", TDG_ROUTINE("sort", isort)(arr, SORT_N), call, SORT_N);
            tdg_region_end("sort");
            result = arr[SORT_N / 2];
        } else {
            /* keys in the last quarter of the list: long, similar walks */
            long key = NODES - 1 - (long)(next_random() % (NODES / 4));
            if (strcmp(mode, "pair") == 0) {
                /* no markers here: the pair alone decides what is captured */
                if (call == 8) {
                    if (tdg_enter_checkpoint("datasens.img") == TDG_CHECKPOINT_ERROR)
                        return 4;
                    result = search(head, key);
                    tdg_stop_checkpoint();
                } else {
                    result = search(head, key);
                }
            } else {
                tdg_region_begin("search");
                PROFILED("search", "call:i,key:i", result = search(head, key), call, key);
                tdg_region_end("search");
            }
        }
        checksum += result;
        /* Buffered, not flushed per call: a write(2) and the reader it wakes
         * between two timed calls pollute the caches of a plain run, while a
         * restored copy writes to /dev/null; the in-app reference would then
         * measure the I/O, not the routine. */
        fprintf(out, "call %d result %ld\n", call, result);
        printf("call %d\n", call);
    }
    fprintf(out, "checksum %ld ballast %d\n", checksum, ballast[4096]);
    fclose(out);
    if (in)
        fclose(in);
    return 0;
}
