/* A tunable cblas_dgemm: C = alpha * A * B + beta * C for row-major,
 * untransposed operands (what numpy's matmul passes), blocked for the
 * caches (KB values of k at a time) and computed in MU x NU register tiles;
 * any other call goes through a plain loop, correct for every order and
 * transpose. The three macros are what `tdg autotune --param` searches. */
#ifndef KB
#define KB 128
#endif
#ifndef MU
#define MU 4
#endif
#ifndef NU
#define NU 8
#endif

enum { ROW_MAJOR = 101, NO_TRANS = 111 };

/* Element (i, j) of op(X), X stored with leading dimension ld. */
static double at(const double *X, int ld, int row_major, int trans, int i, int j) {
    if (trans)
        return row_major ? X[(long)j * ld + i] : X[(long)i * ld + j];
    return row_major ? X[(long)i * ld + j] : X[(long)j * ld + i];
}

static void any_layout(int order, int ta, int tb, int M, int N, int K, double alpha,
                       const double *A, int lda, const double *B, int ldb, double beta,
                       double *C, int ldc) {
    int rm = order == ROW_MAJOR;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int p = 0; p < K; p++)
                s += at(A, lda, rm, ta != NO_TRANS, i, p) * at(B, ldb, rm, tb != NO_TRANS, p, j);
            double *c = rm ? &C[(long)i * ldc + j] : &C[(long)j * ldc + i];
            *c = alpha * s + (beta == 0 ? 0 : beta * *c);
        }
}

/* One MU x NU tile of C at (i, j) over k in [k0, k1): full tiles only. */
static void tile(int i, int j, int k0, int k1, double alpha, const double *A, int lda,
                 const double *B, int ldb, double *C, int ldc) {
    double c[MU][NU] = {{0}};
    for (int p = k0; p < k1; p++) {
        const double *b = &B[(long)p * ldb + j];
        for (int u = 0; u < MU; u++) {
            double a = A[(long)(i + u) * lda + p];
            for (int v = 0; v < NU; v++)
                c[u][v] += a * b[v];
        }
    }
    for (int u = 0; u < MU; u++)
        for (int v = 0; v < NU; v++)
            C[(long)(i + u) * ldc + j + v] += alpha * c[u][v];
}

/* The ragged edge of C, element by element. */
static void edge(int i0, int i1, int j0, int j1, int k0, int k1, double alpha,
                 const double *A, int lda, const double *B, int ldb, double *C, int ldc) {
    for (int i = i0; i < i1; i++)
        for (int j = j0; j < j1; j++) {
            double s = 0;
            for (int p = k0; p < k1; p++)
                s += A[(long)i * lda + p] * B[(long)p * ldb + j];
            C[(long)i * ldc + j] += alpha * s;
        }
}

void cblas_dgemm(const int Order, const int TransA, const int TransB, const int M, const int N,
                 const int K, const double alpha, const double *A, const int lda,
                 const double *B, const int ldb, const double beta, double *C, const int ldc) {
    if (Order != ROW_MAJOR || TransA != NO_TRANS || TransB != NO_TRANS) {
        any_layout(Order, TransA, TransB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            C[(long)i * ldc + j] = beta == 0 ? 0 : beta * C[(long)i * ldc + j];
    int mt = M - M % MU, nt = N - N % NU;
    for (int k0 = 0; k0 < K; k0 += KB) {
        int k1 = k0 + KB < K ? k0 + KB : K;
        for (int i = 0; i < mt; i += MU)
            for (int j = 0; j < nt; j += NU)
                tile(i, j, k0, k1, alpha, A, lda, B, ldb, C, ldc);
        edge(0, mt, nt, N, k0, k1, alpha, A, lda, B, ldb, C, ldc);
        edge(mt, M, 0, N, k0, k1, alpha, A, lda, B, ldb, C, ldc);
    }
}
