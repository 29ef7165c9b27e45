/* Per-call cost of the LD_PRELOAD shim, for scripts/bench-instrument.
 *
 * Built twice from this file: with -DSHIM_BENCH_LIB as libtiny.so (a tiny
 * routine in a shared library, called through the PLT like any library
 * routine) and without it as the host that calls it CALLS times.
 *
 *   shim_bench CALLS   prints the loop's wall time per call in ns
 *
 * Run plain, then with LD_PRELOAD of a shim built from tiny.spec: the
 * difference is what the shim adds to every call (resolution happens once,
 * on the first call, and is amortised away).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

long tiny(long x);

#ifdef SHIM_BENCH_LIB
long tiny(long x) { return x + 1; }
#else
int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: shim_bench CALLS\n");
        return 2;
    }
    long calls = atol(argv[1]);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long s = 0;
    for (long i = 0; i < calls; i++)
        s = tiny(s);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
    printf("%.2f\n", ns / (double)calls);
    return s == calls ? 0 : 1; /* every call reached the real routine */
}
#endif
