/* A tunable isort(): insertion sort that steps over runs already in place
 * SKIP elements at a time (one branch for SKIP comparisons), and inserts
 * the rest by a scan back. It says once which configuration ran. */
#include <stdio.h>
#ifndef SKIP
#define SKIP 1
#endif

static int said;

void isort(long *a, int n) {
    if (!said) {
        said = 1;
        fprintf(stderr, "candidate SKIP=%d\n", SKIP);
    }
    int i = 1;
    while (i < n) {
        if (i + SKIP <= n) {
            int in_place = 1;
            for (int k = 0; k < SKIP; k++)
                in_place &= a[i + k - 1] <= a[i + k];
            if (in_place) {
                i += SKIP;
                continue;
            }
        }
        long v = a[i];
        int j = i - 1;
        while (j >= 0 && a[j] > v) {
            a[j + 1] = a[j];
            j--;
        }
        a[j + 1] = v;
        i++;
    }
}
