/* A candidate for omp_region's "update" region, for the checkpoint tests of
 * threaded images: the same update by an OpenMP team of its own making
 * (built with -fopenmp), which also records how it ran. The first call
 * writes `team T mask M` to the file MARKER names: T the team size
 * omp_get_num_threads() reported, M one bit per thread number that took
 * part in the loop. Whether it already did is read from the file, not kept
 * in memory: a flag the first call sets is state a later call reads, which
 * samples replayed in place detect and fall back from (criu_threads.rs). */
#include <fcntl.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifndef MARKER
#error "build with -D MARKER=\"path\""
#endif

extern int touch_b; /* the application's (linked with -rdynamic) */

void omp_update(int n, double *a, double *b)
{
    unsigned mask = 0;
    int team = 0;
#pragma omp parallel
    {
#pragma omp for schedule(static)
        for (int i = 0; i < n; i++) {
            a[i] = 0.5 * a[i] + 3.0 * b[i];
            if (touch_b)
                b[i] += 1.0;
        }
#pragma omp atomic
        mask |= 1u << (omp_get_thread_num() & 31);
#pragma omp single
        team = omp_get_num_threads();
    }
    if (access(MARKER, F_OK) != 0) {
        char line[64];
        int len = snprintf(line, sizeof line, "team %d mask %x\n", team, mask);
        int fd = open(MARKER, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd >= 0) {
            if (write(fd, line, (size_t)len) != len)
                len = -1;
            close(fd);
        }
    }
}
