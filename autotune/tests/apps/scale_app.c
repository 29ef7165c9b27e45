/* An application calling scale() at three sizes and printing a checksum. */
#include <stdio.h>
#include <stdlib.h>

void scale(double *x, int n, double a);

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 100;
    double *x = malloc(4096 * sizeof *x);
    for (int i = 0; i < 4096; i++)
        x[i] = 1.0 + i % 7;
    double sum = 0;
    for (int r = 0; r < rounds; r++) {
        scale(x, 4096, 1.0000001);
        for (int k = 0; k < 10; k++)
            scale(x + 8 * k, 64, 0.9999999);
        scale(x, 7, 1.0);
    }
    for (int i = 0; i < 4096; i++)
        sum += x[i];
    printf("checksum %.12e\n", sum);
    free(x);
    return 0;
}
