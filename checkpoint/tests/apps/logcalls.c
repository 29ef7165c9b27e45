/* An application that leaves a trace of every call in the user's files, for
 * the tests that restored copies never touch them
 * (checkpoint/tests/criu_side_effects.rs).
 *
 *   logcalls CALLS LOG DATA [rewrite|mapped]
 *
 * LOG is opened for appending and DATA (at least 8 bytes) read-write. Each
 * call of the region ("step") appends "call N" to LOG and to stderr, reads
 * a counter from DATA's first 8 bytes and spins for a time proportional to
 * it (so the call's time says which counter it read), and declares the
 * counter it read as its output. With `rewrite` the call writes the counter
 * plus one back through the descriptor; with `mapped`, through a shared
 * mapping of DATA. The counter starts at whatever DATA holds.
 */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tdg_checkpoint.h"

static int log_fd, data_fd;
static long long *mapped;
static int mode; /* 0 read only, 1 rewrite, 2 mapped */

static long long read_counter(void)
{
    long long c = 0;
    if (mapped)
        return *mapped;
    if (pread(data_fd, &c, sizeof c, 0) != (ssize_t)sizeof c)
        return 0;
    return c;
}

void step(int call, long long *seen)
{
    char line[64];
    volatile unsigned long x = 1;
    int len = snprintf(line, sizeof line, "call %d\n", call);
    long long c = read_counter();
    if (write(log_fd, line, (size_t)len) != len || write(2, line, (size_t)len) != len)
        exit(3);
    for (long long i = 0; i < (c + 1) * 20000; i++)
        x = x * 2862933555777941757UL + 3037000493UL;
    *seen = c;
    if (mode == 1) {
        c++;
        if (pwrite(data_fd, &c, sizeof c, 0) != (ssize_t)sizeof c)
            exit(4);
    } else if (mode == 2) {
        (*mapped)++;
    }
}

int main(int argc, char **argv)
{
    int calls;
    long long seen = 0;
    if (argc < 4) {
        fprintf(stderr, "usage: logcalls CALLS LOG DATA [rewrite|mapped]\n");
        return 2;
    }
    calls = atoi(argv[1]);
    mode = argc > 4 ? (strcmp(argv[4], "rewrite") == 0 ? 1 : strcmp(argv[4], "mapped") == 0 ? 2 : 0) : 0;
    log_fd = open(argv[2], O_WRONLY | O_APPEND | O_CREAT, 0644);
    data_fd = open(argv[3], O_RDWR);
    if (log_fd < 0 || data_fd < 0) {
        perror("logcalls");
        return 1;
    }
    if (mode == 2) {
        mapped = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, data_fd, 0);
        if (mapped == MAP_FAILED) {
            perror("mmap");
            return 1;
        }
    }
    for (int i = 1; i <= calls; i++) {
        TDG_REGION_OUTPUT("step", &seen, 1);
        tdg_region_begin("step");
        TDG_ROUTINE("step", step)(i, &seen);
        tdg_region_end("step");
    }
    printf("counter %lld\n", read_counter());
    return 0;
}
