/* A program that multiplies matrices of three shapes through CBLAS, as
 * numpy's matmul does (examples/autotune/matmul.py is the same work in
 * Python), and prints a checksum rounded to 9 significant digits (a tuned
 * routine may add in another order).
 * Usage: matmul [SCALE [MxKxN:REPS ...]] (other shapes instead of the three) */
#include <stdio.h>
#include <stdlib.h>

void cblas_dgemm(const int Order, const int TransA, const int TransB, const int M, const int N,
                 const int K, const double alpha, const double *A, const int lda,
                 const double *B, const int ldb, const double beta, double *C, const int ldc);

int main(int argc, char **argv) {
    double scale = argc > 1 ? atof(argv[1]) : 1.0;
    int shapes[16][4] = {{256, 256, 256, 6}, {96, 512, 96, 40}, {512, 64, 256, 12}};
    int count = 3;
    if (argc > 2) {
        for (count = 0; count < argc - 2 && count < 16; count++)
            if (sscanf(argv[count + 2], "%dx%dx%d:%d", &shapes[count][0], &shapes[count][1],
                       &shapes[count][2], &shapes[count][3]) != 4 ||
                shapes[count][0] < 1 || shapes[count][1] < 1 || shapes[count][2] < 1) {
                fprintf(stderr, "matmul: %s is not MxKxN:REPS\n", argv[count + 2]);
                return 2;
            }
    }
    unsigned seed = 7;
    double total = 0;
    for (int s = 0; s < count; s++) {
        int m = shapes[s][0], k = shapes[s][1], n = shapes[s][2];
        int reps = (int)(shapes[s][3] * scale);
        double *a = malloc(sizeof *a * m * k), *b = malloc(sizeof *b * k * n),
               *c = malloc(sizeof *c * m * n);
        if (!a || !b || !c)
            return 1;
        for (long i = 0; i < (long)m * k; i++)
            a[i] = (rand_r(&seed) % 1000) / 1000.0;
        for (long i = 0; i < (long)k * n; i++)
            b[i] = (rand_r(&seed) % 1000) / 1000.0;
        for (int r = 0; r < (reps > 0 ? reps : 1); r++) {
            cblas_dgemm(101, 111, 111, m, n, k, 1.0, a, k, b, n, 0.0, c, n);
            for (long i = 0; i < (long)m * n; i++)
                total += c[i];
        }
        free(a);
        free(b);
        free(c);
    }
    printf("checksum %.9g\n", total);
    return 0;
}
