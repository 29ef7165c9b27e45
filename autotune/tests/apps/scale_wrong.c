/* A candidate scale() that computes something else for n = 512: the
 * program's output changes, and autotune must refuse it. */
#ifndef UNROLL
#define UNROLL 1
#endif

void scale(double *x, int n, double a) {
    double f = n == 512 ? a * 1.0001 : a;
    for (int i = 0; i < n; i++)
        x[i] *= f;
}
