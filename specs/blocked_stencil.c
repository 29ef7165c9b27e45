/* One sweep of the 7-point stencil OUT = 0.4 IN + 0.1 (sum of the six
 * neighbours) over the interior of an NX x NY x NZ grid (x fastest), blocked
 * and unrolled at compile time so `tdg tune` can search it (see
 * specs/blocked_stencil.spec):
 *   TI, TJ  the block of columns (x) and rows (y) swept plane after plane
 *           up the z axis: a point of IN is used by the planes below, at and
 *           above it, so UK + 2 planes of a (TI + 2) x (TJ + 2) block must
 *           stay cached while the sweep climbs, or each is read three times
 *           from further away; small blocks pay their halo and short rows;
 *   UI, UJ, UK  points of a group: UI neighbouring columns, UJ rows and UK
 *           planes computed in one pass of the inner loop, so a value of IN
 *           loaded once serves every point of the group that reads it
 *           (7 loads per point alone, fewer in a group), until the group's
 *           values outgrow the registers and spill.
 * Rows, planes and columns a whole group does not fill are computed one
 * row, plane or column at a time, so any positive values compute the same
 * sweep; every point adds its terms in the order of the spec's body. */

#ifndef TI
#define TI 64
#endif
#ifndef TJ
#define TJ 16
#endif
#ifndef UI
#define UI 1
#endif
#ifndef UJ
#define UJ 2
#endif
#ifndef UK
#define UK 2
#endif

#if TI < 1 || TJ < 1 || UI < 1 || UJ < 1 || UK < 1
#error "TI, TJ, UI, UJ and UK must be positive"
#endif

/* A group's loops are unrolled completely, so its shared loads can be
 * reused from registers; GCC needs to be told at -O2. Each group shape is
 * its own copy of the inner loop: the helper is inlined with constant
 * extents. */
#if defined(__GNUC__) && !defined(__clang__)
#define UNROLL_ALL _Pragma("GCC unroll 64")
#elif defined(__clang__)
#define UNROLL_ALL _Pragma("unroll")
#else
#define UNROLL_ALL
#endif
#if defined(__GNUC__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE inline
#endif

static inline int smaller(int a, int b)
{
    return a < b ? a : b;
}

/* uk planes x uj rows of OUT, columns i0 to i1 (exclusive), from the row
 * whose column 0 is at index `row` in the grid. */
static ALWAYS_INLINE void group(const double *restrict in, double *restrict out, long sy, long sz,
                                long row, int i0, int i1, const int uk, const int uj)
{
    int i, a, b, c;
    for (i = i0; i + UI <= i1; i += UI) {
        UNROLL_ALL
        for (a = 0; a < uk; a++) {
            UNROLL_ALL
            for (b = 0; b < uj; b++) {
                UNROLL_ALL
                for (c = 0; c < UI; c++) {
                    const long p = row + a * sz + b * sy + i + c;
                    out[p] = 0.4 * in[p] + 0.1 * (((in[p - 1] + in[p + 1]) + (in[p - sy] + in[p + sy])) +
                                                  (in[p - sz] + in[p + sz]));
                }
            }
        }
    }
    for (; i < i1; i++) {
        UNROLL_ALL
        for (a = 0; a < uk; a++) {
            UNROLL_ALL
            for (b = 0; b < uj; b++) {
                const long p = row + a * sz + b * sy + i;
                out[p] = 0.4 * in[p] + 0.1 * (((in[p - 1] + in[p + 1]) + (in[p - sy] + in[p + sy])) +
                                              (in[p - sz] + in[p + sz]));
            }
        }
    }
}

void stencil7_blocked(const int NX, const int NY, const int NZ, const double *IN, double *OUT)
{
    const long sy = NX, sz = (long)NX * NY;
    int ii, jj, j, k;
    for (jj = 1; jj < NY - 1; jj += TJ) {
        const int jend = smaller(jj + TJ, NY - 1);
        for (ii = 1; ii < NX - 1; ii += TI) {
            const int iend = smaller(ii + TI, NX - 1);
            for (k = 1; k + UK <= NZ - 1; k += UK) {
                for (j = jj; j + UJ <= jend; j += UJ)
                    group(IN, OUT, sy, sz, j * sy + k * sz, ii, iend, UK, UJ);
                for (; j < jend; j++)
                    group(IN, OUT, sy, sz, j * sy + k * sz, ii, iend, UK, 1);
            }
            for (; k < NZ - 1; k++)
                for (j = jj; j < jend; j++)
                    group(IN, OUT, sy, sz, j * sy + k * sz, ii, iend, 1, 1);
        }
    }
}
