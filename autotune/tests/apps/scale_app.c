/* An application calling scale() at three sizes and printing a checksum;
 * `app ROUNDS BUSY` also spends BUSY units of other work per round, so the
 * routine's share of the run can be made small. */
#include <stdio.h>
#include <stdlib.h>

void scale(double *x, int n, double a);

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 100;
    long busy = argc > 2 ? atol(argv[2]) : 0;
    volatile double other = 0;
    double *x = malloc(8192 * sizeof *x);
    for (int i = 0; i < 8192; i++)
        x[i] = 1.0 + i % 7;
    double sum = 0;
    for (int r = 0; r < rounds; r++) {
        scale(x, 8192, 1.0000001);
        for (int k = 0; k < 10; k++)
            scale(x + 64 * k, 512, 0.9999999);
        scale(x, 7, 1.0);
        for (long b = 0; b < busy * 1000; b++)
            other += (double)b * 1e-9;
    }
    for (int i = 0; i < 8192; i++)
        sum += x[i];
    printf("checksum %.12e\n", sum);
    free(x);
    return 0;
}
