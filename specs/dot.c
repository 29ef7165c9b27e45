/* Dot product with eight independent partial sums: enough parallel adds to
 * keep up with the loads, so the kernel is limited by where X and Y come
 * from (cache or memory), not by the add latency. */
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
