/* Benchmarks for scripts/bench-instrument.
 *
 *   logger_bench cost MODE CALLS
 *     MODE none: the loop calling a tiny routine, no logging at all;
 *          timer: each call timed with serialised TSC reads, nothing kept;
 *          tdg: each call wrapped in TDG_PROFILE (one record per call);
 *          fprintf: each call timed with the same serialised TSC reads and
 *                   one fprintf line per call to a buffered file.
 *     Prints the loop's wall time per call in ns.
 *
 *   logger_bench kernel WORKSET_BYTES CALLS bare|log [STEPS]
 *     A cache-sensitive kernel (STEPS, default 256, dependent loads chasing a random cycle
 *     through a WORKSET_BYTES table sized to a cache level), each call timed with serialised TSC reads; with `log`
 *     every call is also recorded by tdg (store mode from
 *     TDG_PROFILE_STORES). Prints the kernel's own median and min ticks.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "tdg_instrument.h"
/* The drivers' and the runtime's serialised reads, so the bench times as
 * tdg does. */
#include "tdg_timing.h"

static volatile long sink;

__attribute__((noinline)) static long tiny(long x) { return x * 3 + 1; }

/* 256 dependent loads chasing a random cyclic permutation of a table's
 * cache lines: latency-bound, no prefetcher or overlap hides a miss, so any
 * table line the log evicts costs a full next-level latency when the chase
 * comes back to it. */
__attribute__((noinline)) static long chase(const long *a, long *pos, int steps) {
    long p = *pos;
    for (int i = 0; i < steps; i++)
        p = a[p];
    *pos = p;
    return p;
}

static double now_ns(void) { return (double)tdg_fallback_ns(); }

static int cost(const char *mode, long calls) {
    FILE *log = NULL;
    if (strcmp(mode, "fprintf") == 0) {
        log = fopen(getenv("BENCH_FPRINTF_OUT") ? getenv("BENCH_FPRINTF_OUT") : "/dev/null", "w");
        if (!log) {
            perror("fopen");
            return 1;
        }
    }
    /* Register outside the timed loop, as a real run amortises it. */
    if (strcmp(mode, "tdg") == 0)
        TDG_PROFILE("tiny", "x:i", sink = tiny(0), 0);
    double t0 = now_ns();
    if (strcmp(mode, "none") == 0) {
        for (long i = 0; i < calls; i++)
            sink = tiny(i);
    } else if (strcmp(mode, "timer") == 0) {
        for (long i = 0; i < calls; i++) {
            uint64_t a = tdg_tsc_begin();
            sink = tiny(i);
            uint64_t b = tdg_tsc_end();
            sink = (long)(b - a);
        }
    } else if (strcmp(mode, "tdg") == 0) {
        for (long i = 0; i < calls; i++)
            TDG_PROFILE("tiny", "x:i", sink = tiny(i), i);
    } else if (strcmp(mode, "fprintf") == 0) {
        for (long i = 0; i < calls; i++) {
            uint64_t a = tdg_tsc_begin();
            sink = tiny(i);
            uint64_t b = tdg_tsc_end();
            fprintf(log, "tiny %ld %llu\n", i, (unsigned long long)(b - a));
        }
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    double t1 = now_ns();
    if (log)
        fclose(log);
    printf("%.3f\n", (t1 - t0) / (double)calls);
    return 0;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static int kernel(long bytes, long calls, int log, int steps) {
    long n = bytes / (long)sizeof(long);
    long *a = aligned_alloc(64, (size_t)n * sizeof(long));
    /* 4 bytes per call: one new line every 16 calls, the same in every mode. */
    uint32_t *ticks = malloc((size_t)calls * sizeof *ticks);
    if (!a || !ticks)
        return 1;
    /* Line i's first word holds the index of the next line's first word,
     * in a random cyclic order (Sattolo's shuffle). */
    long lines = n / 8;
    long *order = malloc((size_t)lines * sizeof *order);
    if (!order)
        return 1;
    for (long i = 0; i < lines; i++)
        order[i] = i;
    uint64_t x = 88172645463325252u;
    for (long i = lines - 1; i > 0; i--) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        long j = (long)(x % (uint64_t)i);
        long t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (long i = 0; i < lines; i++)
        a[order[i] * 8] = order[(i + 1) % lines] * 8;
    free(order);
    memset(ticks, 0, (size_t)calls * sizeof *ticks);
    int id = log ? tdg_routine("chase", "n:i") : -1;
    int64_t v = n;
    long pos = 0;
    for (long k = 0; k < calls; k++) {
        /* The kernel's own interval, read the same way in every mode; the
         * record (if any) is written after it, so what differs between
         * modes is only what the previous calls' logging left in cache. */
        uint64_t t0 = tdg_begin();
        sink = chase(a, &pos, steps);
        uint64_t t1 = tdg_tsc_end();
        if (log)
            tdg_end(id, t0, 1, &v);
        ticks[k] = (uint32_t)(t1 - t0);
    }
    /* The median: a descheduled call (milliseconds on a shared machine)
     * moves a mean, not a median. */
    qsort(ticks, (size_t)calls, sizeof *ticks, cmp_u32);
    printf("%u %u\n", ticks[calls / 2], ticks[0]);
    free(ticks);
    free(a);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "cost") == 0)
        return cost(argv[2], atol(argv[3]));
    if ((argc == 5 || argc == 6) && strcmp(argv[1], "kernel") == 0) {
        int steps = argc == 6 ? atoi(argv[5]) : 256;
        if (steps < 1)
            steps = 1;
        return kernel(atol(argv[2]), atol(argv[3]), strcmp(argv[4], "log") == 0, steps);
    }
    fprintf(stderr, "usage: %s cost none|tdg|fprintf CALLS | kernel BYTES CALLS bare|log [STEPS]\n", argv[0]);
    return 2;
}
