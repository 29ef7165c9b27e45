/* Dot product of X and Y with its reduction shaped at compile time, so
 * `tdg tune` can search it (see specs/unrolled_dot.spec):
 *   VW   doubles per vector: products are formed and summed VW lanes at a
 *        time with GCC's vector extension; wider than the machine's SIMD
 *        registers, each vector operation takes several registers;
 *   ACC  independent vector partial sums: one sum is a chain of dependent
 *        additions that advances one addition per add latency, so the loop
 *        needs latency x pipes chains to keep the adder busy, but every
 *        chain holds ceil(VW * 8 / register bytes) registers;
 *   U    vectors per loop iteration: vector u of an iteration goes to sum
 *        u % ACC (U >= ACC keeps every sum in use), trading loop overhead
 *        against code size and the registers the loads occupy.
 * The sums are combined pairwise at the end, then the lanes, then the
 * elements that fill no whole iteration are added one by one, so any
 * positive U, ACC and VW compute the dot product. */

#include <string.h>

#ifndef U
#define U 4
#endif
#ifndef ACC
#define ACC 4
#endif
#ifndef VW
#define VW 2
#endif

#if U < 1 || ACC < 1 || VW < 1
#error "U, ACC and VW must be positive"
#endif
#if (VW & (VW - 1)) != 0
#error "VW must be a power of two (a vector's size is)"
#endif

/* The sums stay in registers only if the loops over them are unrolled
 * completely (their indices then are constants); GCC needs to be told at
 * -O2. */
#if defined(__GNUC__) && !defined(__clang__)
#define UNROLL_ALL _Pragma("GCC unroll 64")
#elif defined(__clang__)
#define UNROLL_ALL _Pragma("unroll")
#else
#define UNROLL_ALL
#endif

#if VW == 1
typedef double vec;
#else
typedef double vec __attribute__((vector_size(VW * sizeof(double))));
#endif

/* The lanes of a vector summed pairwise, as the sums were combined. Vectors
 * wider than the target's registers are passed by address: by value their
 * ABI would depend on the instruction set the kernel is compiled for. */
static inline double lanes(const vec *v)
{
#if VW == 1
    return *v;
#else
    double l[VW];
    int w, k;
    memcpy(l, v, sizeof l);
    UNROLL_ALL
    for (w = VW; w > 1; w /= 2) {
        UNROLL_ALL
        for (k = 0; k < w / 2; k++)
            l[k] += l[k + w / 2];
    }
    return l[0];
#endif
}

double ddot_unrolled(const int N, const double *X, const double *Y)
{
    vec acc[ACC];
    long i = 0, n = N;
    const long step = (long)U * VW;
    int a, u, w;
    double s;
    UNROLL_ALL
    for (a = 0; a < ACC; a++)
        acc[a] = (vec){0};
    for (; i + step <= n; i += step) {
        UNROLL_ALL
        for (u = 0; u < U; u++) {
            /* Unaligned loads: a vector at X + i is aligned only when X is
             * aligned to the vector's size, which a 64-byte aligned X is
             * not for VW = 16. */
            vec x, y;
            memcpy(&x, X + i + (long)u * VW, sizeof x);
            memcpy(&y, Y + i + (long)u * VW, sizeof y);
            acc[u % ACC] += x * y;
        }
    }
    /* acc[k] += acc[k + half] until one is left. */
    UNROLL_ALL
    for (w = ACC; w > 1; w = (w + 1) / 2) {
        UNROLL_ALL
        for (a = 0; a < w / 2; a++)
            acc[a] += acc[a + (w + 1) / 2];
    }
    s = lanes(&acc[0]);
    for (; i < n; i++)
        s += X[i] * Y[i];
    return s;
}
