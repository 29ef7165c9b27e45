/* C += A*B for row-major A (M x K), B (K x N), C (M x N), tiled for a cache
 * and for registers at compile time so `tdg tune` can search it (see
 * specs/tiled_matmul.spec):
 *   TILE  cache tile: i, k and j advance TILE at a time, so a TILE x TILE
 *         block of B stays cached while a band of A's rows streams by;
 *   RT_R  rows and RT_C columns of the register tile: RT_R x RT_C
 *         accumulators stay in registers over the tile's k loop, loading
 *         RT_R values of A and RT_C contiguous values of B per step.
 * Partial tiles at the edges take scalar code, so any positive values
 * compute the right result. */

#ifndef TILE
#define TILE 64
#endif
#ifndef RT_R
#define RT_R 2
#endif
#ifndef RT_C
#define RT_C 4
#endif

#if TILE < 1 || RT_R < 1 || RT_C < 1
#error "TILE, RT_R and RT_C must be positive"
#endif

/* The accumulators live in registers only if the tile loops are unrolled
 * completely; GCC needs to be told at -O2. */
#if defined(__GNUC__) && !defined(__clang__)
#define UNROLL_ALL _Pragma("GCC unroll 32")
#elif defined(__clang__)
#define UNROLL_ALL _Pragma("unroll")
#else
#define UNROLL_ALL
#endif

static inline int smaller(int a, int b)
{
    return a < b ? a : b;
}

/* One RT_R x RT_C register tile of C over kn steps of the shared dimension. */
static inline void register_tile(int kn, const double *restrict A, int lda, const double *restrict B,
                                 int ldb, double *restrict C, int ldc)
{
    double acc[RT_R][RT_C];
    int r, c, k;
    UNROLL_ALL
    for (r = 0; r < RT_R; r++) {
        UNROLL_ALL
        for (c = 0; c < RT_C; c++)
            acc[r][c] = C[(long)r * ldc + c];
    }
    for (k = 0; k < kn; k++) {
        double b[RT_C];
        UNROLL_ALL
        for (c = 0; c < RT_C; c++)
            b[c] = B[(long)k * ldb + c];
        UNROLL_ALL
        for (r = 0; r < RT_R; r++) {
            const double a = A[(long)r * lda + k];
            UNROLL_ALL
            for (c = 0; c < RT_C; c++)
                acc[r][c] += a * b[c];
        }
    }
    UNROLL_ALL
    for (r = 0; r < RT_R; r++) {
        UNROLL_ALL
        for (c = 0; c < RT_C; c++)
            C[(long)r * ldc + c] = acc[r][c];
    }
}

/* The rows and columns of a block that no full register tile covers. */
static void scalar_part(int mn, int nn, int kn, const double *A, int lda, const double *B, int ldb,
                        double *C, int ldc)
{
    int i, j, k;
    for (i = 0; i < mn; i++)
        for (k = 0; k < kn; k++) {
            const double a = A[(long)i * lda + k];
            for (j = 0; j < nn; j++)
                C[(long)i * ldc + j] += a * B[(long)k * ldb + j];
        }
}

void matmul_tiled(const int M, const int N, const int K, const double *A, const int lda,
                  const double *B, const int ldb, double *C, const int ldc)
{
    int ii, kk, jj, i, j;
    for (ii = 0; ii < M; ii += TILE) {
        const int mb = smaller(TILE, M - ii);
        for (kk = 0; kk < K; kk += TILE) {
            const int kb = smaller(TILE, K - kk);
            for (jj = 0; jj < N; jj += TILE) {
                const int nb = smaller(TILE, N - jj);
                const double *Ab = A + (long)ii * lda + kk;
                const double *Bb = B + (long)kk * ldb + jj;
                double *Cb = C + (long)ii * ldc + jj;
                for (i = 0; i + RT_R <= mb; i += RT_R) {
                    for (j = 0; j + RT_C <= nb; j += RT_C)
                        register_tile(kb, Ab + (long)i * lda, lda, Bb + j, ldb, Cb + (long)i * ldc + j,
                                      ldc);
                    if (j < nb)
                        scalar_part(RT_R, nb - j, kb, Ab + (long)i * lda, lda, Bb + j, ldb,
                                    Cb + (long)i * ldc + j, ldc);
                }
                if (i < mb)
                    scalar_part(mb - i, nb, kb, Ab + (long)i * lda, lda, Bb, ldb, Cb + (long)i * ldc,
                                ldc);
            }
        }
    }
}
