/* An OpenMP application with a marked region, for the checkpoint tests of
 * threaded images (checkpoint/tests/criu_threads.rs).
 *
 *   omp_region CALLS N [undeclared]
 *
 * Two arrays of N doubles, first touched by the team that uses them; the
 * region ("update") runs CALLS times: a[i] = 0.5 * a[i] + 3 * b[i] by the
 * OpenMP team, through TDG_ROUTINE so a candidate can replace it. The call
 * reads what it writes, so a sample whose `a` was not put back computes
 * something else. a is declared as the region's output. With `undeclared`
 * the update also adds 1 to every b[i]: memory the call writes and the next
 * call reads that is not declared. At the end it prints a checksum and the
 * team size.
 */
#define _POSIX_C_SOURCE 200809L
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tdg_checkpoint.h"

int touch_b; /* exported (-rdynamic): a candidate reads it too */

void omp_update(int n, double *a, double *b)
{
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        a[i] = 0.5 * a[i] + 3.0 * b[i];
        if (touch_b)
            b[i] += 1.0;
    }
}

int main(int argc, char **argv)
{
    int calls, n;
    double *a, *b, sum = 0.0;
    if (argc < 3) {
        fprintf(stderr, "usage: omp_region CALLS N [undeclared]\n");
        return 2;
    }
    calls = atoi(argv[1]);
    n = atoi(argv[2]);
    touch_b = argc > 3 && strcmp(argv[3], "undeclared") == 0;
    if (calls < 1 || n < 1 || posix_memalign((void **)&a, 64, (size_t)n * sizeof *a) ||
        posix_memalign((void **)&b, 64, (size_t)n * sizeof *b)) {
        fprintf(stderr, "omp_region: bad arguments or out of memory\n");
        return 1;
    }
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        a[i] = (double)(i % 101) * 0.01;
        b[i] = (double)(i % 89) * 0.02;
    }
    for (int c = 0; c < calls; c++) {
        TDG_REGION_OUTPUT("update", a, n);
        tdg_region_begin("update");
        TDG_ROUTINE("update", omp_update)(n, a, b);
        tdg_region_end("update");
    }
    for (int i = 0; i < n; i++)
        sum += a[i];
    printf("checksum %.6f threads %d\n", sum, omp_get_max_threads());
    free(a);
    free(b);
    return 0;
}
