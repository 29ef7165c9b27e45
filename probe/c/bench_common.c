/* What both of the probe's programs share, prepended before either body
 * (microbench.c, cpubench.c) after the generated parameters. Time is read
 * through tdg_timing.h, as every tdg runtime reads it; these helpers time
 * whole passes of milliseconds, where CLOCK_MONOTONIC's vDSO read is noise,
 * and the serialised cycle counter is for the single loads and empty
 * intervals the benches time with it. */
#include "tdg_timing.h"

static double now_ns(void)
{
    return (double)tdg_clock_ns(CLOCK_MONOTONIC);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

/* xorshift64*: initialisation is not timed, so quality matters more than speed. */
static uint64_t next_random(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

/* Fisher-Yates: a uniformly random order, so no prefetcher can guess the
 * next element. */
static void shuffle(size_t *v, size_t n)
{
    size_t i;
    for (i = n; i > 1; i--) {
        size_t j = (size_t)(next_random() % i);
        size_t t = v[i - 1];
        v[i - 1] = v[j];
        v[j] = t;
    }
}

/* kB of this process's memory on transparent huge pages (-1: unknown). */
static long huge_kb(void)
{
    char line[256];
    long kb = -1;
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "AnonHugePages: %ld kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}
