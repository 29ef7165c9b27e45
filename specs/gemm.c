/* C := alpha*A*B + beta*C for column-major A (M x K, lda), B (K x N, ldb),
 * C (M x N, ldc): the ATLAS user-kernel interface of specs/gemm.spec.
 * A plain j-k-i loop order: unit stride down columns of A and C. */
void ATL_USERMM(const int M, const int N, const int K, const double alpha, const double *A,
                const int lda, const double *B, const int ldb, const double beta, double *C,
                const int ldc)
{
    int i, j, k;
    for (j = 0; j < N; j++) {
        double *c = C + (long)j * ldc;
        if (beta != 1.0)
            for (i = 0; i < M; i++)
                c[i] *= beta;
        for (k = 0; k < K; k++) {
            const double b = alpha * B[k + (long)j * ldb];
            const double *a = A + (long)k * lda;
            for (i = 0; i < M; i++)
                c[i] += a[i] * b;
        }
    }
}
