/* A small OpenMP program around specs/omp_gemm.c: C += A*B on MS x KS and
 * KS x NS matrices, initialised by the threads that use them, then the
 * multiply called back to back on the same matrices for at least 300 ms
 * (C is put back every 64 calls so it stays bounded, untimed). It prints
 * the least time of one call, timed inside the program, and the team size:
 *
 *   cc -O2 -fopenmp -DNB=64 specs/apps/omp_gemm_app.c specs/omp_gemm.c -o gemm_app
 *   OMP_NUM_THREADS=2 OMP_PROC_BIND=true ./gemm_app
 *   least_call_ns 1402000.0 threads 2
 *
 * The in-application check of the driver's speedup and of `tdg tune`'s
 * choice of team size and blocking (driver-gen/tests/driver_threads.rs,
 * tests/cli/tune_threads.rs). */
#define _POSIX_C_SOURCE 200809L
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef MS
#define MS 256
#endif
#ifndef NS
#define NS 256
#endif
#ifndef KS
#define KS 256
#endif

void omp_gemm(const int M, const int N, const int K, const double *A, const int lda, const double *B,
              const int ldb, double *C, const int ldc);

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(void)
{
    double *a, *b, *c, *c0, least = 1e300, start, sum = 0.0;
    long calls = 0;
    int i, j;
    if (posix_memalign((void **)&a, 64, (size_t)MS * KS * sizeof(double)) ||
        posix_memalign((void **)&b, 64, (size_t)KS * NS * sizeof(double)) ||
        posix_memalign((void **)&c, 64, (size_t)MS * NS * sizeof(double)) ||
        posix_memalign((void **)&c0, 64, (size_t)MS * NS * sizeof(double))) {
        fprintf(stderr, "omp_gemm_app: out of memory\n");
        return 1;
    }
    /* Column j of B and C with the thread that owns it; A with whoever. */
#pragma omp parallel for schedule(static) private(i)
    for (j = 0; j < NS; j++) {
        for (i = 0; i < KS; i++)
            b[i + (long)j * KS] = (double)((i + 3 * j) % 31) * 0.01 - 0.15;
        for (i = 0; i < MS; i++)
            c0[i + (long)j * MS] = c[i + (long)j * MS] = (double)((2 * i + j) % 29) * 0.01;
    }
#pragma omp parallel for schedule(static) private(i)
    for (j = 0; j < KS; j++)
        for (i = 0; i < MS; i++)
            a[i + (long)j * MS] = (double)((i + j) % 37) * 0.01 - 0.18;
    omp_gemm(MS, NS, KS, a, MS, b, KS, c, MS);
    start = now_ns();
    while (calls < 50 || now_ns() - start < 300e6) {
        double t0, t;
        if (calls % 64 == 63)
            memcpy(c, c0, (size_t)MS * NS * sizeof(double));
        t0 = now_ns();
        omp_gemm(MS, NS, KS, a, MS, b, KS, c, MS);
        t = now_ns() - t0;
        if (t < least)
            least = t;
        calls++;
    }
    for (i = 0; i < MS * NS; i++)
        sum += c[i];
    printf("least_call_ns %.1f threads %d calls %ld check %.6g\n", least, omp_get_max_threads(), calls, sum);
    free(a);
    free(b);
    free(c);
    free(c0);
    return 0;
}
