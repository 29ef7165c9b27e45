/* C += A*B for column-major A (M x K), B (K x N), C (M x N), blocked as
 * specs/blocked_gemm.c is (NB cache block, MU x NU register tile, chosen at
 * compile time) with the column blocks of C shared out over an OpenMP team:
 * each thread owns whole NB-wide column blocks of C and B and reads all of
 * A. With a static schedule thread k takes the k-th contiguous run of
 * blocks; a block count the team does not divide leaves a thread idle for
 * part of the call, which is what `tdg tune --param threads=... --param
 * NB=...` weighs. Build with -fopenmp; without it the loop is serial. */

#ifndef NB
#define NB 64
#endif
#ifndef MU
#define MU 4
#endif
#ifndef NU
#define NU 2
#endif

#if NB < 1 || MU < 1 || NU < 1
#error "NB, MU and NU must be positive"
#endif

/* Full unrolling of the tile loops is what keeps the accumulators in
 * registers; GCC needs the hint at -O2. */
#if defined(__GNUC__) && !defined(__clang__)
#define TILE_LOOP _Pragma("GCC unroll 16")
#elif defined(__clang__)
#define TILE_LOOP _Pragma("unroll")
#else
#define TILE_LOOP
#endif

static inline int min_int(int a, int b)
{
    return a < b ? a : b;
}

/* One MU x NU tile of C over kn steps of K. */
static inline void tile(int kn, const double *restrict A, int lda, const double *restrict B, int ldb,
                        double *restrict C, int ldc)
{
    double c[MU][NU];
    int r, s, k;
    TILE_LOOP
    for (s = 0; s < NU; s++) {
        TILE_LOOP
        for (r = 0; r < MU; r++)
            c[r][s] = C[r + (long)s * ldc];
    }
    for (k = 0; k < kn; k++) {
        double a[MU], b[NU];
        TILE_LOOP
        for (r = 0; r < MU; r++)
            a[r] = A[r + (long)k * lda];
        TILE_LOOP
        for (s = 0; s < NU; s++)
            b[s] = B[k + (long)s * ldb];
        TILE_LOOP
        for (s = 0; s < NU; s++) {
            TILE_LOOP
            for (r = 0; r < MU; r++)
                c[r][s] += a[r] * b[s];
        }
    }
    TILE_LOOP
    for (s = 0; s < NU; s++) {
        TILE_LOOP
        for (r = 0; r < MU; r++)
            C[r + (long)s * ldc] = c[r][s];
    }
}

/* Scalar code for the partial tiles at the edges of a block. */
static void edge(int mn, int nn, int kn, const double *A, int lda, const double *B, int ldb, double *C,
                 int ldc)
{
    int i, j, k;
    for (j = 0; j < nn; j++)
        for (k = 0; k < kn; k++) {
            const double b = B[k + (long)j * ldb];
            for (i = 0; i < mn; i++)
                C[i + (long)j * ldc] += A[i + (long)k * lda] * b;
        }
}

void omp_gemm(const int M, const int N, const int K, const double *A, const int lda, const double *B,
              const int ldb, double *C, const int ldc)
{
    const int blocks = (N + NB - 1) / NB;
    int jb;
#pragma omp parallel for schedule(static)
    for (jb = 0; jb < blocks; jb++) {
        const int jj = jb * NB, nb = min_int(NB, N - jj);
        int kk, ii, j, i;
        for (kk = 0; kk < K; kk += NB) {
            const int kb = min_int(NB, K - kk);
            for (ii = 0; ii < M; ii += NB) {
                const int mb = min_int(NB, M - ii);
                const double *Ab = A + ii + (long)kk * lda;
                const double *Bb = B + kk + (long)jj * ldb;
                double *Cb = C + ii + (long)jj * ldc;
                for (j = 0; j + NU <= nb; j += NU) {
                    for (i = 0; i + MU <= mb; i += MU)
                        tile(kb, Ab + i, lda, Bb + (long)j * ldb, ldb, Cb + i + (long)j * ldc, ldc);
                    if (i < mb)
                        edge(mb - i, NU, kb, Ab + i, lda, Bb + (long)j * ldb, ldb, Cb + i + (long)j * ldc,
                             ldc);
                }
                if (j < nb)
                    edge(mb, nb - j, kb, Ab, lda, Bb + (long)j * ldb, ldb, Cb + (long)j * ldc, ldc);
            }
        }
    }
}
