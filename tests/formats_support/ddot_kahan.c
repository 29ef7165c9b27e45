/* Dot product with Kahan (compensated) summation: one dependent chain of
 * four floating-point operations per element, so it is limited by add
 * latency, several times slower than the eight-sum specs/dot.c. The second
 * implementation the Google Benchmark comparison test times. */
double ddot(const int N, const double *X, const double *Y)
{
    double sum = 0.0, carry = 0.0;
    int i;
    for (i = 0; i < N; i++) {
        double y = X[i] * Y[i] - carry;
        double t = sum + y;
        carry = (t - sum) - y;
        sum = t;
    }
    return sum;
}
