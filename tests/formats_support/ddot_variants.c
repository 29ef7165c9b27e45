/* A dot product whose compile-time VARIANT picks how a candidate ends, one
 * per outcome of the one-evaluation contract (docs/integration.md):
 *   1 correct, 2 does not compile, 3 crashes, 4 computes a wrong result,
 *   5 never returns (stopped by --timeout). */
#ifndef VARIANT
#define VARIANT 1
#endif

#if VARIANT == 2
#error "variant 2 does not compile (on purpose)"
#endif

double ddot(const int N, const double *X, const double *Y)
{
    double s = 0.0;
    int i;
#if VARIANT == 3
    if (N > 0) {
        volatile double *nowhere = 0;
        s = *nowhere;
    }
#elif VARIANT == 5
    volatile int forever = 1;
    while (forever)
        ;
#endif
    for (i = 0; i < N; i++)
        s += X[i] * Y[i];
#if VARIANT == 4
    s = s * 1.5 + 1.0;
#endif
    return s;
}
