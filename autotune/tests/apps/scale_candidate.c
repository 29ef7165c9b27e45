/* A tunable scale(): UNROLL elements per step. It says once which
 * configuration ran, so a test can see that the dispatcher chose it. */
#include <stdio.h>
#ifndef UNROLL
#define UNROLL 1
#endif

static int said;

void scale(double *x, int n, double a) {
    if (!said) {
        said = 1;
        fprintf(stderr, "candidate UNROLL=%d first called with n=%d\n", UNROLL, n);
    }
    int i = 0;
    for (; i + UNROLL <= n; i += UNROLL)
        for (int u = 0; u < UNROLL; u++)
            x[i + u] *= a;
    for (; i < n; i++)
        x[i] *= a;
}
