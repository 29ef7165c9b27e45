/* The library the demo program links against: cblas_dgemm as a plain
 * triple loop over row-major, untransposed operands (the only calls the
 * program makes), written the way a portable reference implementation is:
 * correct, cache-oblivious and slow. `tdg autotune` puts a tuned routine in
 * front of it without rebuilding the program or this library. */
void cblas_dgemm(const int Order, const int TransA, const int TransB, const int M, const int N,
                 const int K, const double alpha, const double *A, const int lda,
                 const double *B, const int ldb, const double beta, double *C, const int ldc) {
    (void)Order;
    (void)TransA;
    (void)TransB;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int p = 0; p < K; p++)
                s += A[(long)i * lda + p] * B[(long)p * ldb + j];
            C[(long)i * ldc + j] = alpha * s + (beta == 0 ? 0 : beta * C[(long)i * ldc + j]);
        }
}
