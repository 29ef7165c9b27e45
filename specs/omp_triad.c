/* STREAM's triad, A = B + S*C, split over an OpenMP team with a static
 * schedule: thread k of n writes and reads the k-th contiguous n-th of the
 * arrays, the share the driver's first touch gives it (specs/omp_triad.spec).
 * Build with -fopenmp; without it the pragma is ignored and the loop is
 * serial. */
void omp_triad(const int N, double *restrict A, const double *restrict B, const double *restrict C, const double S)
{
    int i;
#pragma omp parallel for schedule(static)
    for (i = 0; i < N; i++)
        A[i] = B[i] + S * C[i];
}
