/* Dot product with two partial sums (breaks the add dependency chain). */
double ddot(const int N, const double *X, const double *Y)
{
    double s0 = 0.0, s1 = 0.0;
    int i;
    for (i = 0; i + 1 < N; i += 2) {
        s0 += X[i] * Y[i];
        s1 += X[i + 1] * Y[i + 1];
    }
    if (i < N)
        s0 += X[i] * Y[i];
    return s0 + s1;
}
