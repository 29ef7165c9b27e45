/* An application that keeps an array nearly sorted: each round it swaps a
 * few neighbours and sorts it again with isort(), from a shared library.
 * `app ROUNDS` prints a checksum of the sorted array. A driver's random
 * data makes the same call a quadratic sort: only the program's own
 * memory (a checkpoint) times it as the program runs it. */
#include <stdio.h>
#include <stdlib.h>

void isort(long *a, int n);

#define N 4096

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 1000;
    long *a = malloc(N * sizeof *a);
    for (int i = 0; i < N; i++)
        a[i] = 3 * i;
    unsigned long state = 12345, sum = 0;
    for (int r = 0; r < rounds; r++) {
        for (int s = 0; s < 16; s++) {
            state = state * 6364136223846793005UL + 1442695040888963407UL;
            int i = (int)((state >> 33) % (N - 1));
            long t = a[i];
            a[i] = a[i + 1];
            a[i + 1] = t;
        }
        isort(a, N);
        sum += (unsigned long)a[r % N];
    }
    printf("checksum %lu\n", sum);
    free(a);
    return 0;
}
