/* An application that sorts nearly sorted data: CALLS rounds, each perturbs
 * a sorted array of N longs by a few short-distance swaps and sorts it with
 * hsort (hsort.c) through a redirectable call, so tdg can time candidate
 * implementations of hsort on a checkpoint of this process.
 *
 *   nearsort [CALLS [FRAME_MS]]      prints a checksum of every sorted array
 *
 * With FRAME_MS, each round first waits for its absolute CLOCK_MONOTONIC
 * deadline (start + round x FRAME_MS), as a frame limiter does: after a
 * stall (the dump) the rounds run back to back until they catch up, while
 * a restored copy, whose clock has moved on since the capture, never waits.
 *
 * Link with -rdynamic: a candidate may use `nearsort_sorted_calls`.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tdg_checkpoint.h"

void hsort(long *A, const int N);

#define N (1 << 15)
#define BALLAST (8 << 20)

/* Application state a candidate can reach (exported with -rdynamic). */
long nearsort_sorted_calls;

static unsigned long long rng = 88172645463325252ULL;
static unsigned long long next_random(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

int main(int argc, char **argv)
{
    int calls = argc > 1 ? atoi(argv[1]) : 12;
    long frame_ns = argc > 2 ? atol(argv[2]) * 1000000L : 0;
    struct timespec start;
    long *a = malloc(sizeof(long) * N);
    char *ballast = malloc(BALLAST);
    unsigned long long checksum = 0;
    if (!a || !ballast || calls < 1)
        return 2;
    for (long i = 0; i < BALLAST; i += 64)
        ballast[i] = (char)i;
    for (long i = 0; i < N; i++)
        a[i] = 4 * i;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (int call = 1; call <= calls; call++) {
        if (frame_ns > 0) {
            long long t = (long long)start.tv_sec * 1000000000LL + start.tv_nsec + (long long)call * frame_ns;
            struct timespec deadline = {(time_t)(t / 1000000000LL), (long)(t % 1000000000LL)};
            clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, NULL);
        }
        /* nearly sorted: N/32 swaps over distances of at most 8 */
        for (int s = 0; s < N / 32; s++) {
            long i = (long)(next_random() % (N - 8)), j = i + 1 + (long)(next_random() % 8);
            long t = a[i];
            a[i] = a[j];
            a[j] = t;
        }
        TDG_REGION_OUTPUT("hsort", a, N);
        tdg_region_begin("hsort");
        TDG_ROUTINE("hsort", hsort)(a, N);
        tdg_region_end("hsort");
        nearsort_sorted_calls++;
        for (long i = 0; i < N; i += 97)
            checksum = checksum * 31 + (unsigned long long)a[i];
    }
    printf("checksum %llu ballast %d\n", checksum, ballast[4096]);
    return 0;
}
