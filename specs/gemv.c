/* y := A*x + y, A column-major M x N with leading dimension lda; two
 * columns at a time so each pass over y does twice the work. */
void dgemv_n(const int M, const int N, const double *A, const int lda, const double *X, double *Y)
{
    int i, j;
    for (j = 0; j + 1 < N; j += 2) {
        const double x0 = X[j], x1 = X[j + 1];
        const double *a0 = A + (long)j * lda, *a1 = a0 + lda;
        for (i = 0; i < M; i++)
            Y[i] += a0[i] * x0 + a1[i] * x1;
    }
    for (; j < N; j++) {
        const double xj = X[j];
        const double *a = A + (long)j * lda;
        for (i = 0; i < M; i++)
            Y[i] += a[i] * xj;
    }
}
