/* What a forked sample must replay exactly, for tdg's checkpoint tests.
 *
 *   replay MODE LOG [INPUT]
 *
 * Every mode calls its region ("step") CALLS times; call i works on its own
 * part of the data, so the timed call touches memory the delay calls did not.
 *
 * MODE pages: call i writes one word on each page of the i-th 1 MiB of a
 *             16 MiB buffer (written once before the first call, so every
 *             page is in the image): the timed call writes 256 pages that no
 *             delay call wrote.
 * MODE input: call i read()s the next 4 KiB of INPUT (kept open read-only)
 *             and appends its checksum and the file offset it read at to LOG,
 *             opened for that line alone: a file the process holds open at
 *             the checkpoint is replaced by a private copy in restored
 *             copies, one it opens afterwards is theirs to write, so every
 *             restored copy or sample appends its lines where the test
 *             reads them.
 * MODE pipe:  a pipe the process holds both ends of, filled before the first
 *             call; call i reads the next 64 bytes from it. A fork cannot put
 *             consumed pipe data back.
 * MODE none:  the region does nothing: a sample costs its fork alone, for
 *             schedules of thousands of samples.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tdg_checkpoint.h"

#define CALLS 12
#define PAGE 4096
#define PART (1 << 20)
#define CHUNK 4096
#define PIPE_CHUNK 64

static unsigned char *buffer;
static int input_fd = -1, pipe_fds[2] = {-1, -1};
static const char *log_path;

static void write_pages(int call)
{
    unsigned char *part = buffer + (size_t)call * PART;
    for (size_t off = 0; off < PART; off += PAGE)
        part[off] = (unsigned char)(part[off] + call + 1);
}

static void read_input(void)
{
    unsigned char chunk[CHUNK];
    unsigned long sum = 0;
    char line[96];
    off_t at = lseek(input_fd, 0, SEEK_CUR);
    ssize_t n = read(input_fd, chunk, sizeof chunk);
    for (ssize_t i = 0; i < n; i++)
        sum = sum * 31 + chunk[i];
    int len = snprintf(line, sizeof line, "offset=%lld bytes=%zd sum=%lu\n", (long long)at, n, sum);
    int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, line, (size_t)len) != len)
        exit(1);
    close(fd);
}

static void read_pipe(void)
{
    char chunk[PIPE_CHUNK];
    if (read(pipe_fds[0], chunk, sizeof chunk) != (ssize_t)sizeof chunk)
        exit(1);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (argc < 3) {
        fprintf(stderr, "usage: replay pages|input|pipe|none LOG [INPUT]\n");
        return 2;
    }
    log_path = argv[2];
    buffer = malloc((size_t)CALLS * PART + PART);
    if (!buffer)
        return 1;
    memset(buffer, 1, (size_t)CALLS * PART + PART);
    if (strcmp(mode, "input") == 0) {
        if (argc < 4 || (input_fd = open(argv[3], O_RDONLY)) < 0)
            return 1;
    } else if (strcmp(mode, "pipe") == 0) {
        char fill[CALLS * PIPE_CHUNK];
        memset(fill, 'p', sizeof fill);
        if (pipe(pipe_fds) < 0 || write(pipe_fds[1], fill, sizeof fill) != (ssize_t)sizeof fill)
            return 1;
    } else if (strcmp(mode, "pages") != 0 && strcmp(mode, "none") != 0) {
        fprintf(stderr, "replay: unknown mode %s\n", mode);
        return 2;
    }
    for (int call = 0; call < CALLS; call++) {
        tdg_region_begin("step");
        if (strcmp(mode, "pages") == 0)
            write_pages(call);
        else if (strcmp(mode, "input") == 0)
            read_input();
        else if (strcmp(mode, "pipe") == 0)
            read_pipe();
        tdg_region_end("step");
    }
    return 0;
}
