/* An OpenMP application whose routine builds a table on its first call and
 * only reads it afterwards, for the hidden-write checks of samples replayed
 * in place (checkpoint/tests/criu_hidden_writes.rs).
 *
 *   omp_table CALLS N [MARKER [migrate]]
 *
 * N doubles x, first touched by the team; the region ("lookup") runs CALLS
 * times, through TDG_ROUTINE so a candidate can replace it: out[i] =
 * table[hash(x[i])] by the team, where table holds 64 Ki values of a slow
 * function, computed on the routine's first call into a static array and
 * a flag set. A later call only reads it, so the first call is several
 * times slower than the others, in the application as in any correct copy.
 * out is the region's declared output; x is read only. At the end it
 * prints a checksum.
 *
 * With MARKER, a call that creates the file MARKER (it did not exist) also
 * fills a page of its own: a write made on a first call that depends on
 * something outside the process, which differs between two restores when
 * the first one creates the file (a stand-in for a write that depends on the
 * scheduler, made deterministic). With `migrate` it moves the calling
 * thread to another CPU instead (and gives it its CPUs back): the kernel
 * then writes the CPU number into the thread's restartable-sequences area
 * in its descriptor, as after any preemption on a loaded machine.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tdg_checkpoint.h"

#define TABLE (1 << 16)
static double table[TABLE];
static int table_ready;
static const char *marker;
static int migrate;
static char marked_page[2 * 4096];

/* The calling thread onto a CPU of its mask other than the current one,
 * then the whole mask back (it stays where it was moved). */
static void move_to_another_cpu(void)
{
    cpu_set_t all, one;
    int here = sched_getcpu();
    if (sched_getaffinity(0, sizeof all, &all) != 0)
        return;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (c != here && CPU_ISSET(c, &all)) {
            CPU_ZERO(&one);
            CPU_SET(c, &one);
            if (sched_setaffinity(0, sizeof one, &one) == 0)
                (void)sched_setaffinity(0, sizeof all, &all);
            return;
        }
}

static double slow(int i)
{
    double v = 0.0, t = 1.0 + i * 1e-5;
    for (int k = 1; k <= 400; k++) {
        t = t * 1.0000001 + 1.0 / (k + t);
        v += t / k;
    }
    return v;
}

void lookup(int n, const double *x, double *out)
{
    int fd;
    if (marker && (fd = open(marker, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) >= 0) {
        close(fd);
        if (migrate)
            move_to_another_cpu();
        else
            memset(marked_page, 1, sizeof marked_page);
    }
    if (!table_ready) {
#pragma omp parallel for schedule(static)
        for (int i = 0; i < TABLE; i++)
            table[i] = slow(i);
        table_ready = 1;
    }
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++)
        out[i] = table[(unsigned)(x[i] * 7919.0) & (TABLE - 1)];
}

int main(int argc, char **argv)
{
    int calls, n;
    double *x, *out, sum = 0.0;
    if (argc < 3) {
        fprintf(stderr, "usage: omp_table CALLS N [MARKER [migrate]]\n");
        return 2;
    }
    calls = atoi(argv[1]);
    n = atoi(argv[2]);
    marker = argc > 3 ? argv[3] : NULL;
    migrate = argc > 4 && strcmp(argv[4], "migrate") == 0;
    x = malloc((size_t)n * sizeof *x);
    out = malloc((size_t)n * sizeof *out);
    if (calls < 1 || n < 1 || !x || !out) {
        fprintf(stderr, "omp_table: bad arguments or out of memory\n");
        return 1;
    }
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        x[i] = (double)(i % 1013) * 0.37;
        out[i] = 0.0;
    }
    for (int c = 0; c < calls; c++) {
        TDG_REGION_OUTPUT("lookup", out, n);
        tdg_region_begin("lookup");
        TDG_ROUTINE("lookup", lookup)(n, x, out);
        tdg_region_end("lookup");
        sum += out[c % n];
    }
    printf("checksum %.6f\n", sum);
    free(x);
    free(out);
    return 0;
}
