/* A probe for the fidelity of restored copies on sub-microsecond regions:
 * one short, data-dependent region ("scan") and, between its calls, one
 * controlled kind of work that a restored copy may reproduce differently
 * from the application. Each effect is switched on by itself, so a
 * comparison of an image with its application (`tdg checkpoint validate`)
 * isolates it.
 *
 *   fidelity EFFECTS CALLS OUTFILE
 *
 * The region: a pattern scan, 16 probes of an 8-byte pattern at positions
 * that depend on the call (a hash of it) across an 8 MiB table, each probe
 * in another page, stopping at the first hit (~100-300 ns: the pages'
 * translations and lines decide it, so page sizes and the TLB show).
 *
 * EFFECTS, a comma-separated list (or "none"):
 *   deadline  pace the calls like a game's frame limiter: sleep until an
 *             absolute CLOCK_MONOTONIC deadline (start + call x 200 us);
 *             a restored copy's clock has moved on, so its deadlines are
 *             past and it never sleeps
 *   nap       sleep a relative 200 us before each call (the same in a copy)
 *   write     write 4 KiB to OUTFILE between calls (a copy writes to
 *             /dev/null: the application rewrites the file)
 *   sweep     read 4 MiB of other data between calls (evicts the table's
 *             lines and translations, in the copy's replay as in the app)
 *   huge      the table is madvise(MADV_HUGEPAGE)d: 2 MiB pages where
 *             transparent huge pages are "madvise" or "always"
 *   branchy   between calls, run 64 KiB of data-dependent branches (a
 *             different history for the branch predictor)
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "tdg_checkpoint.h"

#define TABLE (8UL << 20)
#define PROBES 16
#define SWEEP (4UL << 20)
#define FRAME_NS 200000L

static unsigned long long mix(unsigned long long x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

/* The region: the first of PROBES positions (hashed from the call) where
 * the pattern sits; -1 when none. */
static long scan(const unsigned char *table, unsigned long long pattern, long call)
{
    for (int p = 0; p < PROBES; p++) {
        unsigned long off = (unsigned long)(mix((unsigned long long)call * PROBES + (unsigned long long)p) %
                                            (TABLE / 4096)) * 4096 +
                            (unsigned long)(p * 200 % 4000);
        unsigned long long v;
        memcpy(&v, table + off, sizeof v);
        if (v == pattern)
            return (long)off;
    }
    return -1;
}

static int has(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *s = list; (s = strstr(s, word)) != NULL; s += n)
        if ((s == list || s[-1] == ',') && (s[n] == ',' || s[n] == '\0'))
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: fidelity EFFECTS CALLS OUTFILE\n");
        return 2;
    }
    const char *fx = argv[1];
    long calls = strtol(argv[2], NULL, 10);
    FILE *out = fopen(argv[3], "w");
    if (!out || calls < 1) {
        fprintf(stderr, "fidelity: cannot open %s or bad CALLS\n", argv[3]);
        return 2;
    }
    unsigned char *table = mmap(NULL, TABLE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    unsigned char *other = malloc(SWEEP);
    if (table == MAP_FAILED || !other)
        return 3;
    if (has(fx, "huge"))
        madvise(table, TABLE, MADV_HUGEPAGE);
    for (unsigned long i = 0; i < TABLE; i++)
        table[i] = (unsigned char)mix(i);
    for (unsigned long i = 0; i < SWEEP; i++)
        other[i] = (unsigned char)i;
    /* the pattern sits at a few probe positions, so calls end early or late */
    unsigned long long pattern = 0x5a5a5a5a5a5a5a5aULL;
    for (long c = 1; c <= calls; c += 3) {
        int p = (int)(mix((unsigned long long)c) % PROBES);
        unsigned long off = (unsigned long)(mix((unsigned long long)c * PROBES + (unsigned long long)p) %
                                            (TABLE / 4096)) * 4096 +
                            (unsigned long)(p * 200 % 4000);
        memcpy(table + off, &pattern, sizeof pattern);
    }
    char block[4096];
    memset(block, 'x', sizeof block);
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    long found = 0;
    unsigned long long sink = 0;
    for (long call = 1; call <= calls; call++) {
        if (has(fx, "deadline")) {
            long long t = (long long)start.tv_sec * 1000000000LL + start.tv_nsec + call * FRAME_NS;
            struct timespec d = {(time_t)(t / 1000000000LL), (long)(t % 1000000000LL)};
            clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &d, NULL);
        }
        if (has(fx, "nap")) {
            struct timespec d = {0, FRAME_NS};
            nanosleep(&d, NULL);
        }
        if (has(fx, "write"))
            sink += (unsigned long long)fwrite(block, 1, sizeof block, out);
        if (has(fx, "sweep"))
            for (unsigned long i = 0; i < SWEEP; i += 64)
                sink += other[i];
        if (has(fx, "branchy"))
            for (unsigned long i = 0; i < 65536; i++)
                if (other[(i * 2654435761UL) % SWEEP] & 1)
                    sink++;
        tdg_region_begin("scan");
        long r = scan(table, pattern, call);
        tdg_region_end("scan");
        found += r >= 0;
    }
    fprintf(out, "found %ld sink %llu\n", found, sink);
    fclose(out);
    return 0;
}
