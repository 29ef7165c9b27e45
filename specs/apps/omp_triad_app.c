/* A small OpenMP program around specs/omp_triad.c, as an application's
 * time-step loop calls it: three arrays of NS doubles, initialised by the
 * threads that use them, then the triad called back to back on the same
 * arrays for at least 300 ms. It prints the least time of one call, timed
 * inside the program, and the team size:
 *
 *   cc -O2 -fopenmp specs/apps/omp_triad_app.c specs/omp_triad.c -o triad_app
 *   OMP_NUM_THREADS=2 OMP_PROC_BIND=true ./triad_app
 *   least_call_ns 31250.0 threads 2
 *
 * It is the in-application reference the driver's speedup is compared with
 * (driver-gen/tests/driver_threads.rs). */
#define _POSIX_C_SOURCE 200809L
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifndef NS
#define NS 98304
#endif

void omp_triad(const int N, double *restrict A, const double *restrict B, const double *restrict C, const double S);

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(void)
{
    const int n = NS;
    double *a, *b, *c, least = 1e300, start, sum = 0.0;
    long calls = 0;
    int i;
    if (posix_memalign((void **)&a, 64, n * sizeof(double)) || posix_memalign((void **)&b, 64, n * sizeof(double)) ||
        posix_memalign((void **)&c, 64, n * sizeof(double))) {
        fprintf(stderr, "omp_triad_app: out of memory\n");
        return 1;
    }
#pragma omp parallel for schedule(static)
    for (i = 0; i < n; i++) {
        a[i] = 0.0;
        b[i] = (double)(i % 97) * 0.01;
        c[i] = (double)(i % 89) * 0.02;
    }
    omp_triad(n, a, b, c, 3.0);
    start = now_ns();
    while (calls < 1000 || now_ns() - start < 300e6) {
        double t0 = now_ns(), t;
        omp_triad(n, a, b, c, 3.0);
        t = now_ns() - t0;
        if (t < least)
            least = t;
        calls++;
    }
    for (i = 0; i < n; i++)
        sum += a[i];
    printf("least_call_ns %.1f threads %d calls %ld check %.6g\n", least, omp_get_max_threads(), calls, sum);
    free(a);
    free(b);
    free(c);
    return 0;
}
