/* y := alpha*x + y */
void daxpy(const int N, const double alpha, const double *X, double *Y)
{
    int i;
    for (i = 0; i < N; i++)
        Y[i] += alpha * X[i];
}
