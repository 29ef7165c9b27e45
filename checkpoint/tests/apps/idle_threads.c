/* A threaded application whose threads take no part in its marked region,
 * for the restore tests of threaded images (checkpoint/tests/criu_restores.rs).
 *
 *   idle_threads THREADS CALLS
 *
 * THREADS threads wait on a condition variable nobody signals (a library's
 * idle worker pool, such as OpenBLAS's under numpy), and the main thread
 * runs a short marked region ("scale": x[i] = 0.5 * x[i] + 1 over 4096
 * doubles, its output declared) CALLS times, then prints a checksum. A
 * restored copy needs none of its other threads to finish the region, so
 * it can finish before CRIU has let go of all of them.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "tdg_checkpoint.h"

#define N 4096

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;
static int started;

static void *idle(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lock);
    started++;
    pthread_cond_broadcast(&never);
    for (;;)
        pthread_cond_wait(&never, &lock);
    return NULL;
}

void scale(double *x, int n)
{
    for (int i = 0; i < n; i++)
        x[i] = 0.5 * x[i] + 1.0;
}

int main(int argc, char **argv)
{
    static double x[N];
    pthread_attr_t attr;
    int threads, calls;
    double sum = 0.0;
    if (argc < 3 || (threads = atoi(argv[1])) < 0 || (calls = atoi(argv[2])) < 1) {
        fprintf(stderr, "usage: idle_threads THREADS CALLS\n");
        return 2;
    }
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    for (int t = 0; t < threads; t++) {
        pthread_t id;
        if (pthread_create(&id, &attr, idle, NULL) != 0) {
            fprintf(stderr, "idle_threads: cannot start thread %d\n", t + 1);
            return 1;
        }
    }
    /* Every thread parked before the first call: the image holds them all. */
    pthread_mutex_lock(&lock);
    while (started < threads)
        pthread_cond_wait(&never, &lock);
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < N; i++)
        x[i] = (double)(i % 97);
    for (int c = 0; c < calls; c++) {
        TDG_REGION_OUTPUT("scale", x, N);
        tdg_region_begin("scale");
        TDG_ROUTINE("scale", scale)(x, N);
        tdg_region_end("scale");
    }
    for (int i = 0; i < N; i++)
        sum += x[i];
    printf("checksum %.6f threads %d\n", sum, threads);
    return 0;
}
