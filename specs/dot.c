/* Dot product with eight independent partial sums, so no single add chain
 * sets the pace. Compiled at -O2, gcc 12 keeps s[] on the stack: each
 * partial sum is then a load-add-store chain through memory, and an
 * L2-resident call is limited by store-to-load forwarding, not by the
 * cache. At -O3 the sums stay in registers and the same call is several
 * times faster; the benches and tests time it at -O2, as a kernel whose
 * speed does not hinge on the cache alone. */
double ddot(const int N, const double *X, const double *Y)
{
    double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int i, j;
    for (i = 0; i + 8 <= N; i += 8)
        for (j = 0; j < 8; j++)
            s[j] += X[i + j] * Y[i + j];
    for (; i < N; i++)
        s[0] += X[i] * Y[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}
