/* tdg_checkpoint.c: the host side of tdg's CRIU checkpoint timing.
 * See tdg_checkpoint.h for how an application uses it.
 *
 * Design notes (why it looks like this):
 * - libcriu is dlopen()ed from the path tdg passes in TDG_CKPT_LIBCRIU, so an
 *   application only compiles this file; it needs neither criu headers nor
 *   -lcriu, and a plain run never touches CRIU at all.
 * - The dump is a libcriu self-dump with leave_running: criu_dump() returns 0
 *   in the original and 1 in every restored copy.
 * - A restored copy hands its time back through a pipe created just before the
 *   dump. The copy keeps only the write end; `tdg checkpoint time` substitutes
 *   its own pipe for it at restore (criu --inherit-fd), so no path is baked in.
 * - Right after the dump the original writes tdg-capture.txt: what was
 *   captured and every open descriptor with its flags, which tdg needs to
 *   restore files that will change later (outputs, pipes, terminals).
 * - The original, which goes on running after the dump, times the call the
 *   copies will time and writes it to tdg-captured-call.txt: the image's
 *   own record of that call in the application, which `tdg checkpoint time`
 *   holds its samples against.
 * - The copy ends with _exit() so the application's atexit handlers and stdio
 *   buffers cannot write output a second time.
 * - A restored copy is told what to run through a second inherited pipe, the
 *   control pipe (its environment is the original's, frozen in the image):
 *   tdg writes `candidate=K.so` and `outputs=FILE` lines and closes its end
 *   before the restore, so the copy reads them at once and then EOF. The copy
 *   dlopen()s the candidate with RTLD_NOW, so a symbol neither the candidate
 *   nor the application (-rdynamic) defines fails there, named by dlerror().
 * - Regions are timed with the serialised TSC when tdg passes its rate
 *   (TDG_TSC_GHZ in plain runs, `tsc_ghz=` on the control pipe in a copy)
 *   and tdg_timing.h finds the counter invariant:
 *   clock_gettime goes through the vDSO, which a restored copy reaches
 *   through CRIU's trampolines, so an empty region would cost more in a
 *   restored copy than in a plain run. The process that times the call first measures its
 *   own empty-region cost (back-to-back reads, the minimum of many) and
 *   subtracts it, so plain runs and copies mean the same thing. Without a
 *   rate, or on a counter that is not invariant, CLOCK_MONOTONIC_RAW is used.
 *   CPU time is read outside the timed window.
 * - A copy catches the fatal signals and reports the signal and the phase
 *   (delay call k of K, or the timed call) on the result pipe before dying:
 *   a crashing candidate is a finding, not a lost sample.
 * - Many samples per restore: told `schedule=` (and any number of
 *   `candidate=` lines), the copy stays at the checkpoint as a sampler and
 *   forks a child per sample (sample_by_fork), the next one while the
 *   previous one exits. A learning pass per implementation finds the pages
 *   the replay writes (pagemap's exclusively-mapped bit), so every child
 *   copies them before its replay and the timed call takes no copy-on-write
 *   fault, and the pages it touches at all (the accessed bits, per mapping
 *   in /proc/self/smaps, the mappings split into small chunks in the
 *   learning child), which every child flushes from the caches first, as a
 *   fresh restore starts without them. File offsets are put back after each
 *   child. What a fork cannot replay answers `fallback=` and tdg restores
 *   per sample.
 * - A copy with threads (fork copies only the calling one) replays the
 *   timed call in place instead, its other threads parked in their runtime
 *   between samples (in_place_arm). For its threads to be in the image at
 *   all, the self-dump's CRIU service is started without fork()'s atfork
 *   handlers (start_criu_service).
 */
#define _GNU_SOURCE
#include "tdg_checkpoint.h"
/* The serialised cycle-counter reads, the fallback clock, the decision
 * whether the counter can be trusted and the empty-interval cost, shared
 * with every other C runtime of tdg. */
#include "tdg_timing.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/types.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

/* The environment tdg sets (names shared with the checkpoint crate). */
#define ENV_IMAGE "TDG_CKPT_IMAGE"
#define ENV_CRIU "TDG_CKPT_CRIU"
#define ENV_LIBCRIU "TDG_CKPT_LIBCRIU"
#define ENV_DELAY "TDG_CKPT_DELAY"
#define ENV_SITE "TDG_REGION_SITE"
#define ENV_CALL "TDG_REGION_CALL"
#define ENV_REPORT "TDG_REGION_REPORT"
#define ENV_TSC_GHZ "TDG_TSC_GHZ"
#define ENV_SITES "TDG_REGION_SITES"

#define CAPTURE_INFO "tdg-capture.txt"
#define CAPTURED_CALL "tdg-captured-call.txt"
#define DUMP_LOG "dump.log"
/* The write end of the result pipe sits at a fixed, unlikely descriptor so a
 * restore never clashes with the application's own descriptors. */
#define RESULT_FD_MIN 1000
#define MAX_OUTPUTS 16
/* `tdg checkpoint sites`: distinct sites and per-call times kept. */
#define CENSUS_SITES 64
#define CENSUS_CALLS (1 << 20)
/* Back-to-back TSC read pairs whose minimum is the empty-region cost. */
#define OVERHEAD_PAIRS 101

/* tdg's own state that changes while a sample runs lives in a section of its
 * own, so the hidden-write check of samples replayed in place (below) can
 * tell its writes from the application's, byte for byte. */
#define TDG_STATE __attribute__((section("tdg_state")))
extern char __start_tdg_state[] __attribute__((weak, visibility("hidden")));
extern char __stop_tdg_state[] __attribute__((weak, visibility("hidden")));

/* libcriu entry points (signatures from criu.h, stable since CRIU 2.x). */
struct criu_api {
    int (*init_opts)(void);
    int (*set_service_binary)(const char *);
    void (*set_service_fd)(int);
    void (*set_images_dir_fd)(int);
    void (*set_leave_running)(bool);
    void (*set_shell_job)(bool);
    void (*set_log_level)(int);
    int (*set_log_file)(const char *);
    int (*dump)(void);
};

static struct {
    bool configured;   /* environment read */
    bool markers_on;   /* some region-marker work was asked for */
    bool site_any;     /* act on the first site seen */
    char site[256];
    long call;         /* the timed call of the site, 1-based */
    long delay;        /* checkpoint this many calls before it */
    const char *image; /* capture mode when set */
    const char *report;
    long count;        /* calls of the site begun so far */
    bool checkpointed; /* original: the dump is done */
    bool restored;     /* this process is a restored copy */
    int timing_depth;  /* >0 while inside the timed call */
    int result_fd;
    struct timespec t0;     /* wall clock at the region's start */
    double tsc_ghz;         /* TSC ticks per ns; 0: time with clock_gettime */
    unsigned long long tsc0;      /* TSC at the region's start */
    unsigned long long overhead;  /* empty-region cost in TSC ticks */
    unsigned long long step;      /* the TSC's step as a region reads it, ticks (0: unseen) */
    struct timespec cpu0;   /* this thread's CPU time at the region's start */
    void *candidate;        /* restored copy: the candidate's shared object */
    bool candidate_ran;     /* a TDG_ROUTINE call of the timed site went to it */
    char outputs_path[PATH_MAX]; /* restored copy: where to write the outputs */
    struct output {
        const void *data;
        unsigned long count, elem_size;
        int kind;
    } outputs[MAX_OUTPUTS];
    int n_outputs;
    bool outputs_stale; /* the region ended since they were registered */
    const char *census; /* `tdg checkpoint sites`: write every call's time here at exit */
} g TDG_STATE = {.result_fd = -1};

/* The census of every marked site (one plain run under `tdg checkpoint
 * sites`): each call's time, written out at exit. */
static struct {
    struct census_site {
        char name[128];
        int depth;       /* recursion: only the outermost call is timed */
        long calls;
        unsigned long long t0;
        struct timespec c0;
    } sites[CENSUS_SITES];
    int n_sites;
    struct census_call {
        int site;
        long call;
        long long ns;
    } *calls;
    long n_calls;
    bool overflow;
    bool calibrated; /* the empty-region cost is measured */
} census;

static void write_census(void);

/* Many samples per restore: the restored copy (the sampler) stays stopped at
 * the checkpoint and forks one child per sample; see sample_by_fork(). */
#define MAX_CANDIDATES 64 /* forked::MAX_CANDIDATES on the Rust side */
#define MAX_SAMPLES 1000000L
#define MAX_RANGES 8192
#define MAX_SAVED_FDS 1024
struct mem_range {
    unsigned long start, end;
    bool readable, private_writable, shared_writable;
    char name[64];
};
struct saved_fd {
    int fd;
    bool seekable;  /* a regular file: its offset is put back after each sample */
    off_t offset;
    /* a file with no name (tdg's private copy of a file the application
     * writes, or the application's deleted temporary): its size too, so
     * each sample's writes extend it as the application's did; what was cut
     * off again is counted for tdg's report */
    bool unnamed;
    off_t size;
    long long trimmed;
    bool queue;     /* a pipe or socket: its unread bytes must not change */
    int queued;
    /* a regular file open for reading and writing, not appending: its
     * content, which a fork shares and cannot put back, must not change */
    bool rewritable;
    struct timespec mtime;
    char what[96];
};
static struct {
    void *candidates[MAX_CANDIDATES]; /* in control-pipe order */
    int n_candidates;
    int *schedule;      /* per sample: 0 the application's code, k the k-th candidate */
    long n_samples;     /* 0: this copy is the one sample (one restore per sample) */
    bool in_child;      /* a forked sample (or the learning pass) */
    bool learning;      /* the first child: learns which pages the replay writes */
    long sample;        /* the forked sample's index, 0-based */
    long page;
    struct mem_range *ranges;
    int n_ranges;
    unsigned long *present; /* pages present at the checkpoint (readable mappings) */
    size_t n_present;
    /* those a replay touches in file mappings: fork() does not copy their
     * page table entries */
    unsigned long *file_present;
    size_t n_file_present;
    unsigned long *written; /* shared with the learning pass: pages it wrote */
    size_t *n_written, cap_written;
    /* shared with the learning passes: per present page, whether a replay
     * touched it (and, in [0] of touch_state, whether that could be learned) */
    unsigned char *touched;
    int *touch_state;
    unsigned long *flush; /* pages every sample flushes: touched or written */
    size_t n_flush;
    struct saved_fd *fds;
    int n_fds;
    struct timespec t_fork;     /* child: the sampler's clock just before fork() */
    struct timespec t_start;    /* child: its first clock read */
    struct timespec t_prepared; /* child: prepared and told to go */
    int link;                   /* child: its end of the link with the sampler, or -1 */
    struct sigaction app_sigchld; /* the application's, for every child */
    long long fork_ns, prepare_ns, flush_ns, delay_ns;
    long prepare_faults;
    long minflt0;
} fork_plan TDG_STATE = {.link = -1};

/* A copy with more than one thread cannot take its samples by fork (fork
 * copies only the calling thread), so it replays the timed call in place:
 * the other threads (an OpenMP team, a BLAS's thread pool) stay parked in
 * their runtime between samples as they are between the application's own
 * calls, and the calling thread goes back to the timed call's start with
 * its stack and the call's declared outputs put back; see in_place_arm(). */
#define TEAM_MAX 256
static struct {
    bool on;             /* this copy takes its samples in place */
    bool armed;          /* the timed call's start is saved */
    long sample;         /* the sample running, 0-based */
    int k;               /* its implementation: 0 the application's, k the k-th candidate */
    ucontext_t resume;   /* the timed call's start, inside tdg_region_begin */
    ucontext_t rewind;   /* runs on `alt` to put the stack back */
    char *alt;
    unsigned long stack_lo, stack_hi; /* the calling thread's live stack at the start */
    unsigned char *stack_saved;
    unsigned char *outputs_saved;
    size_t output_bytes;
    unsigned long long *shared_sums;
    unsigned long long output_hash[MAX_CANDIDATES + 1]; /* per implementation, its first sample's */
    bool hashed[MAX_CANDIDATES + 1];
    struct timespec t_last; /* the previous sample's end (or the arming) */
    long long prepare_ns;   /* putting back the outputs, the stack and the offsets */
} in_place TDG_STATE;

/* Per-thread CPU clocks over the timed call, in a copy with threads: how
 * many threads the process ran and how many of them worked in the call. */
static struct {
    bool on;
    int n;
    pid_t tid[TEAM_MAX];
    long long cpu_ns[TEAM_MAX];
    int busy_last; /* busy threads in the call that just ended */
} team TDG_STATE;
struct team_use {
    int threads;        /* threads in the process at the call's end */
    int busy;           /* of them, those that ran at least a quarter of the busiest one's time */
    long long cpu_ns;   /* their CPU time in the call, summed */
};
static void in_place_sample_ended(long long ns, long long cpu_ns, long faults);
static void warm_timing_path(void);

/* The application's mappings that held anonymous huge pages at the
 * checkpoint (from its smaps, just before the dump, so a restored copy finds
 * the list in its memory). CRIU restores memory in base pages, so without
 * this a copy runs the region with 4 KiB translations where the application
 * had 2 MiB ones: the copy gets them back with MADV_COLLAPSE. */
#define MAX_HUGE_RANGES 256
static struct {
    unsigned long start[MAX_HUGE_RANGES], end[MAX_HUGE_RANGES];
    int n;
    long collapsed_kb; /* restored copy: what MADV_COLLAPSE made huge */
    int refused;       /* ranges the kernel would not collapse */
} huge_ranges;

/* What ran between the previous call of the timed site and the timed call,
 * and the state the call ran in, on every path alike (plain runs, the
 * captured original, restored copies): the figures that say why a copy runs
 * a short call unlike the application (docs/checkpoint.md, "Fidelity of
 * short regions"). Read outside the timed window. */
static struct {
    bool have_previous;             /* the previous call's end was seen here */
    struct timespec previous_end;   /* CLOCK_MONOTONIC then */
    struct timespec previous_cpu;   /* this thread's CPU clock then */
    long previous_vcsw, previous_ivcsw, previous_minflt;
    long long gap_wall_ns, gap_cpu_ns; /* -1: not seen */
    long gap_vcsw, gap_ivcsw, gap_minflt;
    long anon_huge_kb;              /* AnonHugePages after the call; -1: unknown */
    long long speed_ns;             /* the speed probe after the call; -1: no TSC */
} fid = {.gap_wall_ns = -1, .gap_cpu_ns = -1, .anon_huge_kb = -1, .speed_ns = -1};


/* The TSC rate tdg passed (ticks per ns), or 0 to time with the fallback
 * clock when it passed none or the counter cannot be trusted here. */
static double tsc_ghz_if_usable(const char *text)
{
    double ghz = (text && *text) ? strtod(text, NULL) : 0.0;
    if (!(ghz > 0.0) || tdg_tsc_unusable_reason() != NULL)
        return 0.0;
    return ghz;
}

static void read_environment(void)
{
    const char *s;
    g.configured = true;
    g.image = getenv(ENV_IMAGE);
    if (g.image && !*g.image)
        g.image = NULL;
    g.report = getenv(ENV_REPORT);
    if (g.report && !*g.report)
        g.report = NULL;
    s = getenv(ENV_SITE);
    if (s && *s) {
        snprintf(g.site, sizeof g.site, "%s", s);
    } else {
        g.site_any = true;
    }
    s = getenv(ENV_CALL);
    g.call = (s && *s) ? strtol(s, NULL, 10) : 1;
    s = getenv(ENV_DELAY);
    g.delay = (s && *s) ? strtol(s, NULL, 10) : 0;
    if (g.call < 1)
        g.call = 1;
    if (g.delay < 0)
        g.delay = 0;
    s = getenv(ENV_TSC_GHZ);
    g.tsc_ghz = tsc_ghz_if_usable(s);

    g.markers_on = g.image != NULL || g.report != NULL;
    g.census = getenv(ENV_SITES);
    if (g.census && !*g.census)
        g.census = NULL;
    if (g.census) {
        g.markers_on = true;
        atexit(write_census);
    } else if (g.markers_on) {
        warm_timing_path();
    }
}

static inline void now(struct timespec *t)
{
    clock_gettime(TDG_FALLBACK_CLOCK, t);
}

static bool use_tsc(void)
{
    return g.tsc_ghz > 0.0;
}

/* Out of line, so a calibration pair pays the calls and returns an empty
 * region pays between its two reads (leaving tdg_region_begin, entering
 * tdg_region_end). */
static __attribute__((noinline)) uint64_t calibration_begin(void)
{
    return tdg_tsc_begin();
}

static __attribute__((noinline)) uint64_t calibration_end(void)
{
    return tdg_tsc_end();
}

/* The cost of an empty region in this process (a restored copy measures its
 * own). */
static void measure_overhead(void)
{
    if (!use_tsc())
        return;
    struct tdg_pair_cost cost = tdg_pair_cost(calibration_begin, calibration_end, OVERHEAD_PAIRS);
    g.overhead = cost.min;
    g.step = cost.step == UINT64_MAX ? 0 : cost.step;
}

/* CPU time excludes the time the thread was preempted: on a shared machine
 * the wall time of a millisecond region swings with the load, its CPU time
 * much less. Both are reported. */
static inline void cpu_now(struct timespec *t)
{
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, t);
}

static long long elapsed_ns(const struct timespec *a, const struct timespec *b)
{
    return (long long)(b->tv_sec - a->tv_sec) * 1000000000LL + (b->tv_nsec - a->tv_nsec);
}

/* Minor page faults of this process so far: a sample's timed call should
 * take none (a copy-on-write or first-touch fault inside it is not the
 * routine's cost). */
static long minor_faults(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_minflt : -1;
}

/* The end of the call before the timed one (plain runs and copies alike). */
static void fidelity_previous_end(void)
{
    struct rusage ru;
    fid.have_previous = getrusage(RUSAGE_THREAD, &ru) == 0;
    fid.previous_vcsw = ru.ru_nvcsw;
    fid.previous_ivcsw = ru.ru_nivcsw;
    fid.previous_minflt = ru.ru_minflt;
    /* wall first, so the CPU interval lies inside the wall one */
    clock_gettime(CLOCK_MONOTONIC, &fid.previous_end);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &fid.previous_cpu);
}

/* The timed call starts: what ran since the previous call's end. A thread
 * that slept or waited shows wall time beyond its CPU time, and voluntary
 * switches. (The CPU clock, not getrusage's times: those lag by up to a
 * scheduler tick.) */
static void fidelity_call_starts(void)
{
    struct rusage ru;
    struct timespec t, cpu;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (!fid.have_previous || getrusage(RUSAGE_THREAD, &ru) != 0)
        return;
    fid.gap_wall_ns = elapsed_ns(&fid.previous_end, &t);
    fid.gap_cpu_ns = elapsed_ns(&fid.previous_cpu, &cpu);
    fid.gap_vcsw = ru.ru_nvcsw - fid.previous_vcsw;
    fid.gap_ivcsw = ru.ru_nivcsw - fid.previous_ivcsw;
    fid.gap_minflt = ru.ru_minflt - fid.previous_minflt;
}

/* A fixed chain of dependent adds, timed: the core's speed right after the
 * call (a copy on a slower clock reads it longer; there are no frequency
 * counters on the VMs tdg runs on). The fastest of three. */
#define SPEED_PROBE_ADDS 2000
static long long speed_probe_ns(void)
{
    unsigned long long best = ~0ULL;
    if (!use_tsc())
        return -1;
    for (int r = 0; r < 3; r++) {
        unsigned long x = 1;
        unsigned long long t0 = tdg_tsc_begin();
        for (int i = 0; i < SPEED_PROBE_ADDS; i++)
            __asm__ __volatile__("add $1, %0" : "+r"(x));
        unsigned long long t1 = tdg_tsc_end();
        if (t1 - t0 < best)
            best = t1 - t0;
    }
    return (long long)((double)best / g.tsc_ghz + 0.5);
}

/* The process's anonymous memory mapped by huge pages, in KiB (-1: unknown). */
static long anon_huge_kb(void)
{
    char buf[2048];
    long kb = -1;
    int fd = open("/proc/self/smaps_rollup", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    const char *p = strstr(buf, "AnonHugePages:");
    if (p)
        kb = strtol(p + strlen("AnonHugePages:"), NULL, 10);
    return kb;
}

static void fidelity_after_call(void)
{
    fid.speed_ns = speed_probe_ns();
    fid.anon_huge_kb = anon_huge_kb();
}

/* The figures above as result-line fields. */
static void fidelity_fields(char *buf, size_t size)
{
    bool gap = fid.gap_wall_ns >= 0;
    snprintf(buf, size,
             " gap_wall_ns=%lld gap_cpu_ns=%lld gap_vcsw=%ld gap_ivcsw=%ld gap_minflt=%ld anon_huge_kb=%ld "
             "speed_ns=%lld step_ns=%.2f",
             fid.gap_wall_ns, fid.gap_cpu_ns, gap ? fid.gap_vcsw : -1L, gap ? fid.gap_ivcsw : -1L,
             gap ? fid.gap_minflt : -1L, fid.anon_huge_kb, fid.speed_ns,
             use_tsc() && g.step > 0 ? (double)g.step / g.tsc_ghz : -1.0);
}

/* The process's threads, listed with getdents64 into `tids` (at most `max`;
 * the return value counts them all): opendir() would allocate from the
 * application's heap right before the timed call. */
static int list_threads(pid_t *tids, int max)
{
    unsigned long long buf[512];
    int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC), n = 0;
    long got;
    if (fd < 0)
        return 0;
    while ((got = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0) {
        for (long off = 0; off < got;) {
            const char *rec = (const char *)buf + off;
            unsigned short reclen;
            const char *name = rec + 19; /* d_ino 8, d_off 8, d_reclen 2, d_type 1 */
            memcpy(&reclen, rec + 16, sizeof reclen);
            if (name[0] != '.') {
                if (n < max)
                    tids[n] = (pid_t)atoi(name);
                n++;
            }
            off += reclen ? reclen : got;
        }
    }
    close(fd);
    return n;
}

/* /proc/self/task/TID/NAME into buf, NUL-terminated: one read of at most
 * size - 1 bytes (these files are a line or a short page). False when the
 * thread is gone. */
static bool read_task_file(pid_t tid, const char *name, char *buf, size_t size)
{
    char path[64];
    ssize_t len;
    int fd;
    snprintf(path, sizeof path, "/proc/self/task/%d/%s", (int)tid, name);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return false;
    len = read(fd, buf, size - 1);
    close(fd);
    buf[len > 0 ? len : 0] = '\0';
    return true;
}

/* A thread's id in this process's own PID namespace, from its id in the
 * /proc it lists (a restored copy runs in a namespace of its own, and /proc
 * is the host's), read from its NSpid line once and remembered. */
static pid_t own_tid(pid_t listed)
{
    static struct {
        pid_t listed, own;
    } known[TEAM_MAX] TDG_STATE;
    static int n_known TDG_STATE;
    char buf[1024];
    const char *ns;
    pid_t own = listed;
    for (int i = 0; i < n_known; i++)
        if (known[i].listed == listed)
            return known[i].own;
    if (!read_task_file(listed, "status", buf, sizeof buf))
        return -1;
    ns = strstr(buf, "\nNSpid:");
    if (ns) { /* one id per namespace level, the innermost last */
        const char *end = strchr(ns + 1, '\n'), *p = ns + 7;
        while (p && (!end || p < end)) {
            char *next;
            long id = strtol(p, &next, 10);
            if (next == p)
                break;
            own = (pid_t)id;
            p = next;
        }
    }
    if (n_known < TEAM_MAX)
        known[n_known++] = (__typeof__(known[0])){listed, own};
    return own;
}

/* CPU time of thread `tid` (as /proc lists it) of this process: its
 * CPUCLOCK_SCHED clock, as the kernel encodes per-thread clock ids; -1
 * once it has exited. */
static long long thread_cpu_ns(pid_t listed)
{
    struct timespec t;
    pid_t tid = own_tid(listed);
    clockid_t clock = (clockid_t)((int)(~(unsigned)tid << 3) | 6);
    if (tid <= 0)
        return -1;
    if (clock_gettime(clock, &t) != 0)
        return -1;
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void team_start(void)
{
    int n = list_threads(team.tid, TEAM_MAX);
    team.n = n < TEAM_MAX ? n : TEAM_MAX;
    for (int i = 0; i < team.n; i++)
        team.cpu_ns[i] = thread_cpu_ns(team.tid[i]);
}

/* Each thread's CPU time since team_start (a thread started inside the
 * call: all of it). A thread counts as busy when it ran at least a quarter
 * of the busiest thread's time in the call: an OpenMP team's workers do,
 * a pool that sleeps through the call does not (one that spins counts). */
static struct team_use team_end(void)
{
    pid_t now[TEAM_MAX];
    long long used[TEAM_MAX], most = 0;
    struct team_use use = {0, 0, 0};
    int n = list_threads(now, TEAM_MAX);
    use.threads = n;
    if (n > TEAM_MAX)
        n = TEAM_MAX;
    for (int i = 0; i < n; i++) {
        long long cpu = thread_cpu_ns(now[i]), before = 0;
        used[i] = 0;
        if (cpu < 0)
            continue;
        for (int j = 0; j < team.n; j++)
            if (team.tid[j] == now[i] && team.cpu_ns[j] >= 0)
                before = team.cpu_ns[j];
        used[i] = cpu - before;
        use.cpu_ns += used[i];
        if (used[i] > most)
            most = used[i];
    }
    for (int i = 0; i < n; i++)
        use.busy += most > 0 && 4 * used[i] >= most;
    return use;
}

static void start_region_clocks(void)
{
    if (fork_plan.in_child) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        fork_plan.delay_ns = elapsed_ns(&fork_plan.t_prepared, &t);
    }
    fidelity_call_starts();
    measure_overhead();
    fork_plan.minflt0 = minor_faults();
    if (team.on)
        team_start();
    cpu_now(&g.cpu0);
    /* last, so reading the CPU clock is not timed */
    if (use_tsc())
        g.tsc0 = tdg_tsc_begin();
    else
        now(&g.t0);
}

/* In a plain run the timing path would run for the first time at the timed
 * call, and its code pages fault in right before the call (a minor fault:
 * a kernel entry and page-table walk whose cache and TLB lines the call
 * then misses), where a restored copy's sample has them mapped (its
 * learning pass ran them, and each sample maps the file pages a replay
 * touches). So it runs once here, untimed, and forgets what it read: the
 * application and its copies meet the timed call alike. */
static void warm_timing_path(void)
{
    fidelity_previous_end();
    start_region_clocks();
    (void)speed_probe_ns();
    fid.have_previous = false;
    fid.gap_wall_ns = fid.gap_cpu_ns = -1;
}

static void complain(const char *fmt, const char *arg)
{
    fprintf(stderr, "tdg_checkpoint: ");
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
}

static bool load_libcriu(struct criu_api *api)
{
    const char *path = getenv(ENV_LIBCRIU);
    void *h = NULL;
    if (path && *path)
        h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        h = dlopen("libcriu.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        h = dlopen("libcriu.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        complain("cannot load libcriu (%s); run the application under `tdg checkpoint capture`", dlerror());
        return false;
    }
#define SYM(field, name)                                             \
    do {                                                             \
        *(void **)(&api->field) = dlsym(h, name);                    \
        if (!api->field) {                                           \
            complain("libcriu lacks %s; CRIU >= 4.1 is needed", name); \
            return false;                                            \
        }                                                            \
    } while (0)
    SYM(init_opts, "criu_init_opts");
    SYM(set_service_binary, "criu_set_service_binary");
    SYM(set_service_fd, "criu_set_service_fd");
    SYM(set_images_dir_fd, "criu_set_images_dir_fd");
    SYM(set_leave_running, "criu_set_leave_running");
    SYM(set_shell_job, "criu_set_shell_job");
    SYM(set_log_level, "criu_set_log_level");
    SYM(set_log_file, "criu_set_log_file");
    SYM(dump, "criu_dump");
#undef SYM
    return true;
}

/* libcriu starts `criu swrk` for a self-dump with fork(), which runs the
 * application's pthread_atfork handlers: OpenBLAS's shuts its thread pool
 * down before every fork, so the image would hold a BLAS without its
 * threads, which every restored copy then starts again inside the timed
 * call. So the service is started here with raw clone() calls, which run
 * no handlers, detached the way libcriu detaches it for a self-dump (a
 * grandchild in a session of its own, its parent reaped, so it is no part
 * of the tree it dumps), and handed to libcriu as the connected socket.
 * Between the clones and exec only system calls run: another thread may
 * have held the allocator's lock at the clone. Returns the socket, or -1
 * (libcriu then starts the service itself). */
static int start_criu_service(const char *criu)
{
    int sks[2], status = 0;
    pid_t pid;
    if (socketpair(PF_LOCAL, SOCK_SEQPACKET, 0, sks) < 0)
        return -1;
    pid = (pid_t)syscall(SYS_clone, SIGCHLD, NULL, NULL, NULL, NULL);
    if (pid == 0) {
        char arg[16], *c = arg + sizeof arg - 1;
        unsigned fd = (unsigned)sks[1];
        sigset_t mask;
        if ((pid_t)syscall(SYS_clone, SIGCHLD, NULL, NULL, NULL, NULL) != 0)
            _exit(0); /* the middle process: the service is orphaned at once */
        setsid();
        if (chdir("/") < 0)
            _exit(1);
        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        sigprocmask(SIG_UNBLOCK, &mask, NULL);
        close(sks[0]);
        *c = '\0';
        do
            *--c = (char)('0' + fd % 10);
        while ((fd /= 10) != 0);
        execl(criu, criu, "swrk", c, (char *)NULL);
        _exit(127);
    }
    close(sks[1]);
    if (pid < 0) {
        close(sks[0]);
        return -1;
    }
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return sks[0];
}

/* Describe every open descriptor (number, open flags, target) so tdg can
 * decide how each is restored. Runs in the original right after the dump, so
 * the table is the one the image holds, minus the two descriptors used here. */
static void write_descriptors(FILE *out, int skip1, int skip2, int skip3)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    if (!d)
        return;
    while ((e = readdir(d)) != NULL) {
        char link[64], target[PATH_MAX], info[64];
        FILE *fi;
        ssize_t n;
        unsigned long flags = 0;
        long long pos = -1;
        char line[256];
        int fd;
        if (e->d_name[0] == '.')
            continue;
        fd = atoi(e->d_name);
        if (fd == dirfd(d) || fd == skip1 || fd == skip2 || fd == skip3 || fd == fileno(out))
            continue;
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        n = readlink(link, target, sizeof target - 1);
        if (n < 0)
            continue;
        target[n] = '\0';
        if (strchr(target, '\n'))
            continue;
        snprintf(info, sizeof info, "/proc/self/fdinfo/%d", fd);
        fi = fopen(info, "r");
        if (fi) {
            while (fgets(line, sizeof line, fi)) {
                if (sscanf(line, "flags: %lo", &flags) == 1)
                    break;
                (void)sscanf(line, "pos: %lld", &pos);
            }
            fclose(fi);
        }
        fprintf(out, "fd=%d %lo %s\n", fd, flags, target);
        /* where reads and writes go next: a restore that hands the copy a
         * private copy of the file puts its offset there */
        if (pos >= 0)
            fprintf(out, "fdpos=%d %lld\n", fd, pos);
        {
            /* CRIU names a terminal by its device numbers (tty[rdev:dev]). */
            struct stat st;
            if (fstat(fd, &st) == 0) {
                /* what it is (a regular file, a device, ...), for tdg's
                 * restore policy */
                fprintf(out, "fdmode=%d %o\n", fd, (unsigned)st.st_mode);
                if (S_ISCHR(st.st_mode) && isatty(fd))
                    fprintf(out, "tty=%d %llx:%llx\n", fd, (unsigned long long)st.st_rdev,
                            (unsigned long long)st.st_dev);
            }
        }
    }
    closedir(d);
}

/* `fd` moved to a descriptor at RESULT_FD_MIN or above (`cmd`: F_DUPFD or
 * F_DUPFD_CLOEXEC), out of the way of the numbers the application's own
 * open() calls get; where the limit is lower, the one it has. */
static int move_fd_high(int fd, int cmd)
{
    int high = fcntl(fd, cmd, RESULT_FD_MIN);
    if (high < 0)
        return fd;
    close(fd);
    return high;
}

/* The read end of the control pipe, at a high descriptor like the result
 * pipe; the write end is closed, so a restore that passes nothing reads EOF. */
static int open_control_pipe(struct stat *st)
{
    int p[2], fd;
    if (pipe(p) < 0)
        return -1;
    fd = move_fd_high(p[0], F_DUPFD);
    close(p[1]);
    if (fd >= 0 && fstat(fd, st) < 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Restored copy: report one line on the result pipe. */
static void report_line(const char *line)
{
    size_t len = strlen(line);
    if (g.result_fd >= 0 && write(g.result_fd, line, len) != (ssize_t)len)
        _exit(3);
}

/* Restored copy: report why it cannot run and end (the image is untouched). */
static void fail_copy(const char *what, const char *detail)
{
    char line[PATH_MAX + 512];
    snprintf(line, sizeof line, "error=%s%s\n", what, detail);
    for (char *c = line; c[0] && c[1]; c++)
        if (*c == '\n')
            *c = ' ';
    report_line(line);
    if (in_place.armed) { /* as the fork sampler reports a failed child */
        snprintf(line, sizeof line, "sample_failed=%ld candidate=%d status=4\n", in_place.sample, in_place.k);
        report_line(line);
    }
    _exit(4);
}

/* Which call of the site the copy is in, for a crash report. */
static const char *phase(char *buf, size_t size)
{
    long first = g.call - g.delay; /* the call the checkpoint was taken at */
    if (g.site[0] == '\0' || g.count >= g.call || g.timing_depth > 0)
        snprintf(buf, size, "the timed call");
    else
        snprintf(buf, size, "delay call %ld of %ld", g.count - first + 1, g.delay);
    return buf;
}

static void on_fatal_signal(int sig)
{
    /* snprintf is not async-signal-safe in general, but this copy dies next
     * and holds no stdio lock in this single-threaded replay path. */
    char line[160], where[64];
    int len = snprintf(line, sizeof line, "crash=%d phase=%s\n", sig, phase(where, sizeof where));
    if (len > 0 && g.result_fd >= 0 && write(g.result_fd, line, (size_t)len) < 0)
        _exit(5);
    if (in_place.armed) {
        len = snprintf(line, sizeof line, "sample_failed=%ld candidate=%d status=%d\n", in_place.sample,
                       in_place.k, 128 + sig);
        if (len > 0 && write(g.result_fd, line, (size_t)len) < 0)
            _exit(5);
    }
    _exit(5);
}

static void catch_fatal_signals(void)
{
    static const int fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fatal_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++)
        sigaction(fatal[i], &sa, NULL);
}

/* Our own bookkeeping lives in mmap()ed memory, not the application's heap,
 * so every sample's malloc state is the checkpoint's. */
static void *map_private(size_t bytes)
{
    void *p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* What tdg's control text asks of a restored copy, as read_control and
 * parse_control find it; follow_control then acts on it. Reading and
 * parsing do nothing else (no dlopen, no exit), so they can be fed any
 * bytes: tdg's fuzz target for this reader (fuzz/src/control.rs) runs this
 * very code with TDG_CONTROL_FUZZ defined. */
struct control {
    char *text;         /* the whole text, NUL-terminated, in a private mapping */
    size_t cap;         /* the mapping's size */
    char outputs[PATH_MAX];
    const char *tsc_ghz; /* the rate's text, pointing into text */
    const char *candidates[MAX_CANDIDATES]; /* paths, pointing into text */
    int n_candidates;
    int *schedule;      /* a private mapping of n_samples entries, or NULL */
    size_t schedule_cap;
    long n_samples;
};

/* The most control text a copy accepts: 64 candidate paths and a schedule
 * of MAX_SAMPLES entries (up to three characters each) fit with room. */
#define MAX_CONTROL_BYTES ((size_t)(MAX_CANDIDATES * (PATH_MAX + 16) + 4 * MAX_SAMPLES + 4096))

static void release_control(struct control *c)
{
    if (c->text)
        munmap(c->text, c->cap);
    if (c->schedule)
        munmap(c->schedule, c->schedule_cap);
    c->text = NULL;
    c->schedule = NULL;
}

/* Reads `fd` to EOF (however long: a schedule of thousands of samples is
 * longer than any fixed buffer) into a private mapping that grows, up to
 * MAX_CONTROL_BYTES. Returns NULL, or why it could not: the caller says so
 * and ends, instead of acting on part of the text. */
static const char *read_control(int fd, struct control *c)
{
    size_t used = 0;
    ssize_t n;
    c->cap = 1 << 16;
    c->text = map_private(c->cap);
    if (!c->text)
        return "cannot allocate the control text";
    while ((n = read(fd, c->text + used, c->cap - 1 - used)) != 0) {
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return "cannot read tdg's instructions";
        }
        used += (size_t)n;
        /* checked on every read, not only when the mapping is full: the
         * mapping doubles past the bound, and a text between the two would
         * otherwise be taken whole */
        if (used > MAX_CONTROL_BYTES)
            return "tdg's instructions are longer than the copy accepts";
        if (used == c->cap - 1) {
            char *grown;
            grown = mremap(c->text, c->cap, 2 * c->cap, MREMAP_MAYMOVE);
            if (grown == MAP_FAILED)
                return "cannot grow the control text";
            c->text = grown;
            c->cap *= 2;
        }
    }
    c->text[used] = '\0';
    return NULL;
}

/* `schedule=0,1,2,0,1,2`: one sample per entry, each naming what it runs
 * (0 the application's code, k the k-th candidate). */
static const char *parse_schedule(const char *text, struct control *c)
{
    long n = 1;
    for (const char *p = text; *p; p++)
        n += *p == ',';
    if (n > MAX_SAMPLES)
        return "cannot take so many samples in one restore";
    if (c->schedule)
        return "two schedules";
    c->schedule_cap = (size_t)n * sizeof *c->schedule;
    c->schedule = map_private(c->schedule_cap);
    if (!c->schedule)
        return "cannot allocate the sample schedule";
    c->n_samples = 0;
    for (const char *p = text; *p;) {
        char *end;
        long k;
        if (*p < '0' || *p > '9')
            return "bad sample schedule";
        k = strtol(p, &end, 10);
        if (k > MAX_CANDIDATES || (*end && *end != ','))
            return "bad sample schedule";
        c->schedule[c->n_samples++] = (int)k;
        p = *end == ',' ? end + 1 : end;
    }
    if (c->n_samples == 0)
        return "an empty sample schedule";
    return NULL;
}

/* Splits the text into its lines and checks them whole: every line known,
 * every schedule entry naming the application (0) or a candidate listed.
 * Returns NULL, or why the text cannot be followed. */
static const char *parse_control(struct control *c)
{
    char *line, *save = NULL;
    const char *why;
    for (line = strtok_r(c->text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "outputs=", 8) == 0) {
            if (strlen(line + 8) >= sizeof c->outputs)
                return "the outputs path is too long";
            memcpy(c->outputs, line + 8, strlen(line + 8) + 1);
        } else if (strncmp(line, "tsc_ghz=", 8) == 0) {
            c->tsc_ghz = line + 8;
        } else if (strncmp(line, "candidate=", 10) == 0) {
            if (c->n_candidates == MAX_CANDIDATES)
                return "more than 64 candidates in one restore";
            c->candidates[c->n_candidates++] = line + 10;
        } else if (strncmp(line, "schedule=", 9) == 0) {
            if ((why = parse_schedule(line + 9, c)) != NULL)
                return why;
        }
        /* other lines are a later tdg's, which this library predates */
    }
    for (long i = 0; i < c->n_samples; i++)
        if (c->schedule[i] > c->n_candidates)
            return "the sample schedule names a candidate that is not listed";
    return NULL;
}

/* Restored copy: read tdg's instructions whole and act on them: load each
 * candidate and take the schedule. Text that cannot be read or followed
 * ends the copy with one line instead of acting on part of it. */
static void follow_control(int fd)
{
    struct control c;
    const char *why;
    memset(&c, 0, sizeof c);
    why = read_control(fd, &c);
    close(fd);
    if (!why)
        why = parse_control(&c);
    if (why)
        fail_copy("cannot follow tdg's instructions: ", why);
    if (c.outputs[0])
        memcpy(g.outputs_path, c.outputs, sizeof g.outputs_path);
    if (c.tsc_ghz)
        g.tsc_ghz = tsc_ghz_if_usable(c.tsc_ghz);
    for (int i = 0; i < c.n_candidates; i++) {
        g.candidate = dlopen(c.candidates[i], RTLD_NOW | RTLD_LOCAL);
        if (!g.candidate) {
            char which[48];
            snprintf(which, sizeof which, "failed_candidate=%d\n", i + 1);
            report_line(which);
            fail_copy("cannot be loaded: ", dlerror());
        }
        fork_plan.candidates[fork_plan.n_candidates++] = g.candidate;
    }
    if (c.schedule) {
        fork_plan.schedule = c.schedule;
        fork_plan.n_samples = c.n_samples;
        c.schedule = NULL; /* kept for the copy's life */
    }
    release_control(&c);
}

#ifdef TDG_CONTROL_FUZZ
/* The reader on any bytes, read from a descriptor as a restored copy
 * reads them: 0 if the text would be followed, 1 if refused. Never exits. */
int tdg_control_fuzz(const unsigned char *data, size_t size);
int tdg_control_fuzz(const unsigned char *data, size_t size)
{
    struct control c;
    const char *why;
    int verdict;
    /* A temporary file stands in for the pipe tdg writes: the whole
     * text, then EOF. */
    FILE *w = tmpfile();
    memset(&c, 0, sizeof c);
    if (!w)
        return 1;
    if (size && fwrite(data, 1, size, w) != size) {
        fclose(w);
        return 1;
    }
    fflush(w);
    rewind(w);
    why = read_control(fileno(w), &c);
    if (!why)
        why = parse_control(&c);
    verdict = why != NULL;
    release_control(&c);
    fclose(w);
    return verdict;
}
#endif

/* The mappings at the checkpoint. Kernel-provided ones that are not plain
 * memory ([vvar], [vsyscall]) are left out of everything below. */
static const char *read_mappings(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[PATH_MAX + 128];
    if (!f)
        return "cannot read /proc/self/maps";
    fork_plan.ranges = map_private(MAX_RANGES * sizeof *fork_plan.ranges);
    if (!fork_plan.ranges) {
        fclose(f);
        return "cannot allocate the mapping table";
    }
    while (fgets(line, sizeof line, f)) {
        unsigned long start, end;
        char perms[8] = "", path[PATH_MAX] = "";
        struct mem_range *r;
        if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %4095[^\n]", &start, &end, perms, path) < 3)
            continue;
        if (strncmp(path, "[vvar", 5) == 0 || strcmp(path, "[vsyscall]") == 0)
            continue;
        if (fork_plan.n_ranges == MAX_RANGES) {
            fclose(f);
            return "the process has more than 8192 mappings";
        }
        r = &fork_plan.ranges[fork_plan.n_ranges++];
        r->start = start;
        r->end = end;
        r->readable = perms[0] == 'r';
        r->private_writable = perms[1] == 'w' && perms[3] == 'p';
        r->shared_writable = perms[1] == 'w' && perms[3] == 's';
        snprintf(r->name, sizeof r->name, "%s", path[0] ? path : "anonymous");
    }
    fclose(f);
    return NULL;
}

/* Calls `each(page, entry)` for every page of [start, end) with its
 * /proc/self/pagemap entry (bit 63 present, bit 56 mapped only here). */
static bool walk_pagemap(int pm, unsigned long start, unsigned long end,
                         void (*each)(unsigned long page, unsigned long long entry))
{
    unsigned long long buf[512];
    unsigned long page = start;
    while (page < end) {
        size_t want = (end - page) / (unsigned long)fork_plan.page;
        ssize_t got;
        if (want > 512)
            want = 512;
        got = pread(pm, buf, want * sizeof buf[0], (off_t)(page / (unsigned long)fork_plan.page * sizeof buf[0]));
        if (got <= 0)
            return false;
        for (size_t i = 0; i < (size_t)got / sizeof buf[0]; i++, page += (unsigned long)fork_plan.page)
            each(page, buf[i]);
    }
    return true;
}

#define PAGEMAP_PRESENT (1ULL << 63)
#define PAGEMAP_EXCLUSIVE (1ULL << 56)

static size_t present_capacity;
static void note_present(unsigned long page, unsigned long long entry)
{
    if ((entry & PAGEMAP_PRESENT) && fork_plan.n_present < present_capacity)
        fork_plan.present[fork_plan.n_present++] = page;
}

/* Learning pass: a page of a private writable mapping that is present and
 * mapped by this process alone was written here (a copy-on-write copy) or
 * first touched here. */
static void note_written(unsigned long page, unsigned long long entry)
{
    if ((entry & PAGEMAP_PRESENT) && (entry & PAGEMAP_EXCLUSIVE) && *fork_plan.n_written < fork_plan.cap_written)
        fork_plan.written[(*fork_plan.n_written)++] = page;
}

static const char *find_present_pages(void)
{
    size_t pages = 0, writable = 0;
    int pm;
    for (int i = 0; i < fork_plan.n_ranges; i++) {
        size_t n = (fork_plan.ranges[i].end - fork_plan.ranges[i].start) / (unsigned long)fork_plan.page;
        if (fork_plan.ranges[i].readable)
            pages += n;
        if (fork_plan.ranges[i].private_writable)
            writable += n;
    }
    present_capacity = pages;
    fork_plan.present = map_private(pages * sizeof *fork_plan.present);
    {
        int distinct = 0;
        for (long i = 0; i < fork_plan.n_samples; i++) {
            bool seen = false;
            for (long j = 0; j < i && !seen; j++)
                seen = fork_plan.schedule[j] == fork_plan.schedule[i];
            distinct += !seen;
        }
        writable *= (size_t)distinct;
    }
    fork_plan.cap_written = writable;
    {
        void *shared = mmap(NULL, sizeof(size_t) + writable * sizeof(unsigned long), PROT_READ | PROT_WRITE,
                            MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        void *touch = mmap(NULL, sizeof(int) + pages, PROT_READ | PROT_WRITE,
                           MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (shared == MAP_FAILED || touch == MAP_FAILED || !fork_plan.present)
            return "cannot allocate the page lists";
        fork_plan.n_written = shared;
        fork_plan.written = (unsigned long *)((char *)shared + sizeof(size_t));
        fork_plan.touch_state = touch;
        fork_plan.touched = (unsigned char *)touch + sizeof(int);
    }
    pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (pm < 0)
        return "cannot read /proc/self/pagemap";
    for (int i = 0; i < fork_plan.n_ranges; i++)
        if (fork_plan.ranges[i].readable &&
            !walk_pagemap(pm, fork_plan.ranges[i].start, fork_plan.ranges[i].end, note_present)) {
            close(pm);
            return "cannot read /proc/self/pagemap";
        }
    close(pm);
    return NULL;
}

/* Which of the checkpoint's pages a replay touches at all, read or written:
 * only those can be in the caches when the next sample starts, so only those
 * need flushing (flushing the whole image would cost a large share of each
 * sample, and grows with the image, not with the routine). pagemap has no accessed bit and this kernel may lack idle
 * page tracking, but /proc/self/smaps counts, per mapping, the pages whose
 * accessed bit is set, and /proc/self/clear_refs clears them. So the
 * learning child, which is thrown away, splits the checkpoint's mappings
 * into chunks of a few pages (MADV_DONTDUMP on every other chunk changes
 * only what a core dump holds), clears the bits, replays, and marks every
 * present page of a referenced mapping. A split the kernel refuses (the
 * map count limit) or an unreadable smaps only makes the set larger: a
 * mapping left whole is marked whole. The one call the split changes is an
 * mremap() of a range that now spans several mappings (EFAULT: glibc's
 * realloc then copies instead); it happens in the learning child only, and a
 * page it should have learned shows as a fault in the samples' timed calls. */
#define MAX_LEARNING_MAPPINGS 1024

/* Chunks of `chunk` pages, every other one marked, so each becomes its own
 * mapping; only chunks holding a present page are touched, so the cost
 * follows the image, not the address space. At most about
 * MAX_LEARNING_MAPPINGS mappings: each costs ~8 us of splitting, clearing
 * and smaps text (~40 ms for a 16.7 MiB image page by page), while a chunk
 * of a few pages costs only a few hundred nanoseconds more to flush. */
static void split_for_access_bits(void)
{
    size_t chunk = fork_plan.n_present / MAX_LEARNING_MAPPINGS + 1, i = 0;
    unsigned long step = chunk * (unsigned long)fork_plan.page;
    for (int k = 0; k < fork_plan.n_ranges; k++) {
        const struct mem_range *r = &fork_plan.ranges[k];
        /* the stack grows down from its own mapping: left whole */
        bool whole = strcmp(r->name, "[stack]") == 0;
        unsigned long last = 0;
        for (; i < fork_plan.n_present && fork_plan.present[i] < r->end; i++) {
            unsigned long idx = (fork_plan.present[i] - r->start) / step, a = r->start + idx * step;
            if (whole || idx % 2 == 0 || a == last)
                continue;
            (void)madvise((void *)a, a + step <= r->end ? step : r->end - a, MADV_DONTDUMP);
            last = a;
        }
    }
}

static void begin_learning_accesses(void)
{
    int fd;
    split_for_access_bits();
    fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, "1", 1) != 1)
        fork_plan.touch_state[0] = -1; /* bits not cleared: flush everything */
    if (fd >= 0)
        close(fd);
}

/* Marks the present pages of [start, end) as touched. */
static void mark_touched(unsigned long start, unsigned long end)
{
    size_t lo = 0, hi = fork_plan.n_present;
    while (lo < hi) { /* the first present page >= start */
        size_t mid = lo + (hi - lo) / 2;
        if (fork_plan.present[mid] < start)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (; lo < fork_plan.n_present && fork_plan.present[lo] < end; lo++)
        fork_plan.touched[lo] = 1;
}

/* Reads /proc/self/smaps as a stream (it can be megabytes once split),
 * marking each mapping whose "Referenced:" is not 0 kB. */
static void learn_touched_pages(void)
{
    static char buf[1 << 16];
    char line[512];
    size_t used = 0, have = 0, pos = 0;
    unsigned long start = 0, end = 0;
    int fd = open("/proc/self/smaps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fork_plan.touch_state[0] = -1;
        return;
    }
    for (;;) {
        if (pos == have) {
            ssize_t got = read(fd, buf, sizeof buf);
            if (got < 0 && errno == EINTR)
                continue;
            if (got < 0)
                fork_plan.touch_state[0] = -1;
            if (got <= 0)
                break;
            have = (size_t)got;
            pos = 0;
        }
        char c = buf[pos++];
        if (c != '\n') {
            if (used < sizeof line - 1)
                line[used++] = c;
            continue;
        }
        line[used] = '\0';
        used = 0;
        unsigned long a, b, kb;
        char dash;
        if (sscanf(line, "%lx%c%lx ", &a, &dash, &b) == 3 && dash == '-') {
            start = a;
            end = b;
        } else if (sscanf(line, "Referenced: %lu kB", &kb) == 1 && kb > 0) {
            mark_touched(start, end);
        }
    }
    close(fd);
}

/* Learning pass, at the end of the timed call. */
static void learn_written_pages(void)
{
    int pm;
    learn_touched_pages();
    pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (pm < 0)
        return;
    for (int i = 0; i < fork_plan.n_ranges; i++)
        if (fork_plan.ranges[i].private_writable)
            walk_pagemap(pm, fork_plan.ranges[i].start, fork_plan.ranges[i].end, note_written);
    close(pm);
}

static int by_address(const void *a, const void *b)
{
    unsigned long x = *(const unsigned long *)a, y = *(const unsigned long *)b;
    return (x > y) - (x < y);
}

/* After the learning passes, what every sample does with the checkpoint's
 * pages: copy those a replay writes (each once, in address order, whichever
 * pass learned them), flush those a replay touches, written ones included,
 * and map in the touched ones that are file-backed (fork() leaves file
 * mappings to fault on first use). A page no replay touches needs neither.
 * Where the learning could not be done (touch_state < 0), every present
 * page is flushed and mapped. */
static const char *plan_samples(void)
{
    size_t n = fork_plan.n_present + *fork_plan.n_written + 1, w = 0, nw = 0;
    fork_plan.flush = map_private(n * sizeof *fork_plan.flush);
    fork_plan.file_present = map_private(n * sizeof *fork_plan.file_present);
    if (!fork_plan.flush || !fork_plan.file_present)
        return "cannot allocate the page lists";
    qsort(fork_plan.written, *fork_plan.n_written, sizeof *fork_plan.written, by_address);
    for (size_t i = 0; i < *fork_plan.n_written; i++)
        if (nw == 0 || fork_plan.written[nw - 1] != fork_plan.written[i])
            fork_plan.written[nw++] = fork_plan.written[i];
    *fork_plan.n_written = nw;
    for (size_t i = 0, r = 0; i < fork_plan.n_present; i++) {
        if (fork_plan.touch_state[0] >= 0 && !fork_plan.touched[i])
            continue;
        /* written pages below this one that the checkpoint did not hold */
        for (; w < nw && fork_plan.written[w] < fork_plan.present[i]; w++)
            fork_plan.flush[fork_plan.n_flush++] = fork_plan.written[w];
        if (w < nw && fork_plan.written[w] == fork_plan.present[i])
            w++;
        fork_plan.flush[fork_plan.n_flush++] = fork_plan.present[i];
        while (fork_plan.ranges[r].end <= fork_plan.present[i])
            r++;
        if (fork_plan.ranges[r].name[0] == '/')
            fork_plan.file_present[fork_plan.n_file_present++] = fork_plan.present[i];
    }
    for (; w < nw; w++)
        fork_plan.flush[fork_plan.n_flush++] = fork_plan.written[w];
    return NULL;
}

/* Every descriptor whose state a sample changes for the next one: regular
 * files (the offset, shared with the sampler through the open file
 * description) and pipes and sockets (the unread bytes, which a replay
 * cannot put back). */
static const char *save_descriptors(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    if (!d)
        return "cannot list /proc/self/fd";
    fork_plan.fds = map_private(MAX_SAVED_FDS * sizeof *fork_plan.fds);
    if (!fork_plan.fds) {
        closedir(d);
        return "cannot allocate the descriptor table";
    }
    while ((e = readdir(d)) != NULL) {
        struct saved_fd *s;
        struct stat st;
        char link[64];
        ssize_t n;
        int fd = atoi(e->d_name);
        if (e->d_name[0] == '.' || fd == dirfd(d) || fd == g.result_fd || fstat(fd, &st) < 0)
            continue;
        if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode) && !S_ISSOCK(st.st_mode))
            continue;
        if (fork_plan.n_fds == MAX_SAVED_FDS)
            break;
        s = &fork_plan.fds[fork_plan.n_fds++];
        s->fd = fd;
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        n = readlink(link, s->what, sizeof s->what - 1);
        s->what[n > 0 ? n : 0] = '\0';
        if (S_ISREG(st.st_mode)) {
            int fl = fcntl(fd, F_GETFL);
            s->offset = lseek(fd, 0, SEEK_CUR);
            s->seekable = s->offset >= 0;
            s->unnamed = st.st_nlink == 0;
            s->size = st.st_size;
            s->rewritable = fl >= 0 && (fl & O_ACCMODE) == O_RDWR && !(fl & O_APPEND);
            s->mtime = st.st_mtim;
        } else {
            s->queue = ioctl(fd, FIONREAD, &s->queued) == 0;
        }
    }
    closedir(d);
    return NULL;
}

static void restore_offsets(void)
{
    struct stat st;
    for (int i = 0; i < fork_plan.n_fds; i++) {
        const struct saved_fd *s = &fork_plan.fds[i];
        if (!s->seekable)
            continue;
        lseek(s->fd, s->offset, SEEK_SET);
        if (s->unnamed && fstat(s->fd, &st) == 0 && st.st_nlink == 0 && st.st_size > s->size &&
            ftruncate(s->fd, s->size) == 0)
            fork_plan.fds[i].trimmed += (long long)(st.st_size - s->size);
    }
}

/* How much the samples wrote past the checkpoint's size of each file with
 * no name and was cut off again, for tdg's report of what the copies did. */
static void report_trimmed(void)
{
    char line[96];
    for (int i = 0; i < fork_plan.n_fds; i++)
        if (fork_plan.fds[i].trimmed > 0) {
            snprintf(line, sizeof line, "file_trimmed fd=%d bytes=%lld\n", fork_plan.fds[i].fd,
                     fork_plan.fds[i].trimmed);
            report_line(line);
        }
}

/* FNV-1a over a mapping the sampler shares with its children. */
static unsigned long long checksum(const struct mem_range *r)
{
    unsigned long long h = 1469598103934665603ULL;
    for (const unsigned char *p = (const unsigned char *)r->start; p < (const unsigned char *)r->end; p++)
        h = (h ^ *p) * 1099511628211ULL;
    return h;
}

static int count_threads(void)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int n = 0;
    if (!d)
        return 1;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Why a sample cannot be replayed by fork, or NULL: checked after the
 * learning pass, which ran exactly what every sample will run. */
static const char *unreplayable(const unsigned long long *shared_sums, char *why, size_t size)
{
    for (int i = 0; i < fork_plan.n_fds; i++) {
        const struct saved_fd *s = &fork_plan.fds[i];
        int now_queued;
        struct stat st;
        if (s->queue && ioctl(s->fd, FIONREAD, &now_queued) == 0 && now_queued != s->queued) {
            snprintf(why, size, "the replay reads or writes descriptor %d (%s), whose data a fork cannot put back",
                     s->fd, s->what);
            return why;
        }
        if (s->rewritable && fstat(s->fd, &st) == 0 &&
            (st.st_size != s->size || st.st_mtim.tv_sec != s->mtime.tv_sec ||
             st.st_mtim.tv_nsec != s->mtime.tv_nsec)) {
            snprintf(why, size,
                     "the replay writes descriptor %d (%s), whose content every fork shares and cannot put back",
                     s->fd, s->what);
            return why;
        }
    }
    for (int i = 0, k = 0; i < fork_plan.n_ranges; i++) {
        const struct mem_range *r = &fork_plan.ranges[i];
        if (!r->shared_writable)
            continue;
        if (checksum(r) != shared_sums[k++]) {
            snprintf(why, size, "the replay writes a shared mapping (%s), which every fork shares", r->name);
            return why;
        }
    }
    return NULL;
}

#if TDG_X86
static inline void flush_line(const volatile char *p)
{
    __asm__ __volatile__("clflush %0" : "+m"(*(volatile char *)p));
}
#endif

/* In a sample's child, before the replay: every page of a file mapping the
 * checkpoint holds is mapped (fork() leaves those to fault on first use), every
 * page the learning pass wrote is copied now (so the timed call takes no
 * copy-on-write fault), and the checkpoint's pages a replay touches are
 * flushed from the caches. The previous sample left the physical pages this
 * one shares in L2/L3, where a fresh restore (new pages) starts without
 * them; pages no replay touches were not brought in by one. The delay
 * calls then rebuild what the application's own run has cached. Without the
 * flush each sample would inherit the previous one's cache and read faster
 * than the application does. Flushing from the sampler before the fork, through
 * its own page tables, would be cheaper, but it moved the delayed sort away
 * from its in-app time in interleaved rounds (docs/checkpoint.md, "Restore
 * path vs fork path"), so the flush is the child's, on its own copies. */
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* Fault in `pages` (for writing: copy them), one madvise per run of
 * adjacent pages instead of one trap per page (Linux >= 5.14); page by page
 * where the kernel does not know the advice. */
static void populate(const unsigned long *pages, size_t n, bool write)
{
    size_t i = 0;
    while (i < n) {
        size_t j = i + 1;
        while (j < n && pages[j] == pages[j - 1] + (unsigned long)fork_plan.page)
            j++;
        if (madvise((void *)pages[i], (j - i) * (size_t)fork_plan.page,
                    write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ) != 0) {
            for (size_t k = i; k < j; k++) {
                volatile char *p = (volatile char *)pages[k];
                if (write)
                    *p = *p;
                else
                    (void)*p;
            }
        }
        i = j;
    }
}

static void prepare_sample(void)
{
    long line = sysconf(_SC_LEVEL1_DCACHE_LINESIZE);
    if (line <= 0)
        line = 64;
    populate(fork_plan.file_present, fork_plan.n_file_present, false);
    populate(fork_plan.written, *fork_plan.n_written, true);
#if TDG_X86
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (size_t i = 0; i < fork_plan.n_flush; i++)
        for (long off = 0; off < fork_plan.page; off += line)
            flush_line((const volatile char *)fork_plan.flush[i] + off);
    __asm__ __volatile__("mfence" ::: "memory");
    clock_gettime(CLOCK_MONOTONIC, &t1);
    fork_plan.flush_ns = elapsed_ns(&t0, &t1);
#else
    (void)line;
#endif
}

/* Fork one child running schedule entry `k`; only the child returns true. */
static bool fork_child(int k, pid_t *pid)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    *pid = fork();
    if (*pid != 0)
        return false;
    clock_gettime(CLOCK_MONOTONIC, &fork_plan.t_start);
    sigaction(SIGCHLD, &fork_plan.app_sigchld, NULL);
    fork_plan.in_child = true;
    fork_plan.t_fork = t;
    fork_plan.fork_ns = elapsed_ns(&t, &fork_plan.t_start);
    g.candidate = k > 0 ? fork_plan.candidates[k - 1] : NULL;
    return true;
}

/* How a child ended, on the result pipe, and false if it did not end well.
 * `wall_ns`: what the sample cost the sampler. */
static bool child_ended(pid_t pid, long sample, int k, long long wall_ns)
{
    char line[160];
    int status = 0;
    pid_t got;
    while ((got = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
        ;
    if (got < 0) /* cannot happen with SIGCHLD at its default; say so if it does */
        status = 0xff00;
    restore_offsets();
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        snprintf(line, sizeof line, "sample_end=%ld wall_ns=%lld\n", sample, wall_ns);
        report_line(line);
        return true;
    }
    snprintf(line, sizeof line, "sample_failed=%ld candidate=%d status=%d\n", sample, k,
             WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    report_line(line);
    return false;
}

/* The restored copy takes every sample of the schedule in a fork of itself,
 * stopped here at the checkpoint, instead of tdg restoring the image once
 * per sample. Returns only in a child, which runs the replay and the timed
 * call as a restored copy would; the sampler itself ends here. A first child
 * (the learning pass) runs the same and reports which pages it wrote and
 * touched; what a fork cannot replay (threads, pipe or socket data, shared
 * memory the replay writes) ends the sampler with `fallback=` and tdg
 * restores per sample. */
static void sample_by_fork(void)
{
    char why[PATH_MAX + 128];
    const char *problem;
    unsigned long long *shared_sums = NULL;
    int threads = count_threads(), n_shared = 0, prev_k = 0;
    pid_t pid, prev = -1;
    long prev_i = -1;
    long long prev_wall = 0;
    struct timespec t0, t1;

    /* The sampler reaps each child itself: an application that ignores
     * SIGCHLD (children reaped by the kernel) or catches it must not see
     * them. Every child gets the application's disposition back. */
    {
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        sigaction(SIGCHLD, &dfl, &fork_plan.app_sigchld);
    }
    fork_plan.page = sysconf(_SC_PAGESIZE);
    if (threads > 1) {
        snprintf(why, sizeof why, "the process runs %d threads and fork() copies only the calling one", threads);
        problem = why;
    } else if ((problem = read_mappings()) == NULL && (problem = find_present_pages()) == NULL) {
        problem = save_descriptors();
    }
    if (!problem) {
        for (int i = 0; i < fork_plan.n_ranges; i++)
            n_shared += fork_plan.ranges[i].shared_writable;
        shared_sums = map_private((size_t)n_shared * sizeof *shared_sums);
        if (!shared_sums)
            problem = "cannot allocate the shared-mapping checksums";
        for (int i = 0, k = 0; shared_sums && i < fork_plan.n_ranges; i++)
            if (fork_plan.ranges[i].shared_writable)
                shared_sums[k++] = checksum(&fork_plan.ranges[i]);
    }
    if (problem) {
        snprintf(why, sizeof why, "fallback=%s\n", problem);
        report_line(why);
        _exit(0);
    }

    /* One learning pass per implementation the schedule runs: each may
     * write other pages, and each sample pre-faults all of them. */
    for (long i = 0; i < fork_plan.n_samples; i++) {
        int k = fork_plan.schedule[i];
        bool seen = false;
        for (long j = 0; j < i && !seen; j++)
            seen = fork_plan.schedule[j] == k;
        if (seen)
            continue;
        if (fork_child(k, &pid)) {
            fork_plan.learning = true;
            begin_learning_accesses();
            return;
        }
        if (pid < 0 || !child_ended(pid, -1, k, 0))
            _exit(0);
        if ((problem = unreplayable(shared_sums, why + 9, sizeof why - 10)) != NULL) {
            memcpy(why, "fallback=", 9);
            strcat(why, "\n");
            report_line(why);
            _exit(0);
        }
    }
    if ((problem = plan_samples()) != NULL) {
        snprintf(why, sizeof why, "fallback=%s\n", problem);
        report_line(why);
        _exit(0);
    }
    snprintf(why, sizeof why, "learned pages=%zu present=%zu flushed=%zu file_present=%zu\n",
             *fork_plan.n_written, fork_plan.n_present, fork_plan.n_flush, fork_plan.n_file_present);
    report_line(why);
    /* Pipelined: the next child is forked (and prepares) while the previous
     * one reports and exits, which is half a sample's cost; it waits to be
     * told to go until the previous one has been reaped and the file offsets
     * put back, and the sampler forks nothing while a replay or a timed call
     * runs (the child says when its timed call is over). */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < fork_plan.n_samples; i++) {
        int k = fork_plan.schedule[i], link[2];
        char c;
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, link) < 0) {
            snprintf(why, sizeof why, "sample_failed=%ld candidate=%d socketpair: %s\n", i, k, strerror(errno));
            report_line(why);
            if (prev > 0)
                child_ended(prev, prev_i, prev_k, prev_wall);
            _exit(0);
        }
        link[0] = move_fd_high(link[0], F_DUPFD_CLOEXEC);
        link[1] = move_fd_high(link[1], F_DUPFD_CLOEXEC);
        if (fork_child(k, &pid)) {
            long faults = minor_faults();
            struct timespec t_ready;
            close(link[0]);
            fork_plan.link = link[1];
            fork_plan.sample = i;
            prepare_sample();
            fork_plan.prepare_faults = minor_faults() - faults;
            clock_gettime(CLOCK_MONOTONIC, &t_ready);
            fork_plan.prepare_ns = elapsed_ns(&fork_plan.t_start, &t_ready);
            ssize_t got;
            while ((got = read(fork_plan.link, &c, 1)) < 0 && errno == EINTR)
                ;
            if (got != 1) /* the sampler gave up: no sample */
                _exit(0);
            clock_gettime(CLOCK_MONOTONIC, &fork_plan.t_prepared);
            return;
        }
        close(link[1]);
        if (pid < 0) {
            snprintf(why, sizeof why, "sample_failed=%ld candidate=%d fork: %s\n", i, k, strerror(errno));
            report_line(why);
            if (prev > 0)
                child_ended(prev, prev_i, prev_k, prev_wall);
            _exit(0);
        }
        if (prev > 0 && !child_ended(prev, prev_i, prev_k, prev_wall)) {
            close(link[0]); /* the new child reads EOF and ends untimed */
            while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
            _exit(0);
        }
        if (write(link[0], "g", 1) == 1)
            while (read(link[0], &c, 1) < 0 && errno == EINTR) /* "done", or EOF if it died */
                ;
        close(link[0]);
        /* a sample's cost: from the previous one's end to its own, the
         * previous child's exit overlapping */
        clock_gettime(CLOCK_MONOTONIC, &t1);
        prev_wall = elapsed_ns(&t0, &t1);
        t0 = t1;
        prev = pid;
        prev_i = i;
        prev_k = k;
    }
    if (prev > 0 && !child_ended(prev, prev_i, prev_k, prev_wall))
        _exit(0);
    report_trimmed();
    report_line("fork_done\n");
    _exit(0);
}

/* Threaded copies: samples replayed in place.
 *
 * A copy with more than one thread is told `schedule=` like any other, but
 * fork would copy only the calling thread. So the copy runs on from the
 * checkpoint as a single restored copy does (the delay calls run once) and,
 * at the timed call's start in tdg_region_begin, saves what a sample
 * changes that the next one must not see: the calling thread's stack from
 * there up (the frames the region returns through; its TLS and thread
 * descriptor excluded) and the outputs the call declares (TDG_REGION_OUTPUT,
 * or the shim's returns(...)). After each sample the end marker puts them
 * back and the thread resumes at the saved start (getcontext/setcontext,
 * the stack copied back from a private one). The other threads are not
 * touched: between two samples they wait in their pool exactly as between
 * two calls of the application, and their runtime's state (barrier
 * generations, the pool, the allocator) moves on as it would there; putting
 * it back under threads that are waiting on it would deadlock them.
 *
 * What this cannot put back is memory the call writes besides its outputs
 * and the stack. Every sample's outputs are hashed, and a sample whose
 * outputs differ from the first sample of the same implementation ends the
 * copy with `fallback=` (tdg then restores once per sample): a region that
 * reads what it writes elsewhere, or whose result depends on timing, is
 * caught there. The cache state of a later sample is what the previous one
 * left, as between the application's own back-to-back calls; the first
 * sample follows the delay calls. */
#if defined(__x86_64__)
#define IN_PLACE_ALT_STACK (64 * 1024)
#define IN_PLACE_MAX_BYTES (1UL << 30)

static int lowest_tls(struct dl_phdr_info *info, size_t size, void *data)
{
    unsigned long *top = data, tls = (unsigned long)info->dlpi_tls_data;
    (void)size;
    if (tls > in_place.stack_lo && tls < *top)
        *top = tls;
    return 0;
}

static unsigned long long hash_outputs(void)
{
    unsigned long long h = 1469598103934665603ULL;
    for (int i = 0; i < g.n_outputs; i++) {
        const unsigned char *p = g.outputs[i].data;
        size_t n = g.outputs[i].count * g.outputs[i].elem_size, j = 0;
        for (; j + 8 <= n; j += 8) {
            unsigned long long w;
            memcpy(&w, p + j, sizeof w);
            h = (h ^ w) * 1099511628211ULL;
        }
        for (; j < n; j++)
            h = (h ^ p[j]) * 1099511628211ULL;
    }
    return h;
}

static void in_place_fallback(const char *why)
{
    char line[PATH_MAX + 160];
    snprintf(line, sizeof line, "fallback=%s\n", why);
    report_line(line);
    _exit(0);
}

/* Hidden writes of samples replayed in place.
 *
 * A call can write memory besides its declared outputs and its stack that a
 * later call reads: a table or a cache it builds on its first call, a flag it
 * sets once. The application's next call then runs differently, and so would
 * every sample after the first one replayed in place, while its outputs stay
 * the same (so the output hash above cannot see it). Before the schedule, each
 * implementation therefore runs twice (check runs, not reported as samples)
 * with every page of the checkpoint's private writable mappings outside the
 * outputs, the calling thread's stack and tdg's own state write-protected
 * through userfaultfd in its asynchronous mode (the kernel only marks a
 * written page, Linux >= 6.7; soft-dirty bits would do the same, but this
 * kernel family is often built without them), and reads which pages each run
 * wrote with PAGEMAP_SCAN. Pages the first run wrote that the second did not
 * are state a later call reads instead of rebuilding: the copy ends with
 * `fallback=` naming them, and tdg restores once per sample, where every
 * sample is a first call as in the application. Pages every run writes (a
 * workspace, the thread runtime's bookkeeping: barrier generations, the team)
 * are left as each call leaves them: putting a runtime's state back under
 * the threads that wait on it would deadlock them. The pages tdg's state
 * shares with the application's data are compared byte for byte instead.
 * Where the kernel offers no such tracking, the copy falls back to one
 * restore per sample too: a hidden write could not be ruled out. */
#ifndef UFFD_API
#define UFFD_API ((unsigned long long)0xAA)
#endif
#define TDG_UFFD_FEATURE_WP_UNPOPULATED (1ULL << 13)
#define TDG_UFFD_FEATURE_WP_ASYNC (1ULL << 15)
#define TDG_UFFDIO_REGISTER_MODE_WP (1ULL << 1)
#define TDG_UFFDIO_WRITEPROTECT_MODE_WP (1ULL << 0)
struct tdg_uffdio_api {
    unsigned long long api, features, ioctls;
};
struct tdg_uffdio_range {
    unsigned long long start, len;
};
struct tdg_uffdio_register {
    struct tdg_uffdio_range range;
    unsigned long long mode, ioctls;
};
struct tdg_uffdio_writeprotect {
    struct tdg_uffdio_range range;
    unsigned long long mode;
};
#define TDG_UFFDIO_API _IOWR(0xAA, 0x3F, struct tdg_uffdio_api)
#define TDG_UFFDIO_REGISTER _IOWR(0xAA, 0x00, struct tdg_uffdio_register)
#define TDG_UFFDIO_UNREGISTER _IOR(0xAA, 0x01, struct tdg_uffdio_range)
#define TDG_UFFDIO_WRITEPROTECT _IOWR(0xAA, 0x06, struct tdg_uffdio_writeprotect)
#define TDG_PAGE_IS_WRITTEN (1ULL << 1)
struct tdg_page_region {
    unsigned long long start, end, categories;
};
struct tdg_pm_scan_arg {
    unsigned long long size, flags, start, end, walk_end, vec, vec_len, max_pages, category_inverted,
        category_mask, category_anyof_mask, return_mask;
};
#define TDG_PAGEMAP_SCAN _IOWR('f', 16, struct tdg_pm_scan_arg)

#define HIDDEN_MAX_EXCLUDED 64
struct hw_range {
    unsigned long start, end;
};
static struct {
    int uffd, pm;
    struct hw_range *registered, *tracked;
    int n_registered, n_tracked;
    unsigned long *written[2]; /* pages the check runs wrote, ascending */
    size_t n_written[2], cap;
    /* pages compared byte for byte instead: those tdg's state or a global
     * offset table (which lazy binding writes once) shares with other data,
     * each with the byte ranges not compared */
    struct watched {
        unsigned long page;
        int n_skip;
        struct hw_range skip[4];
    } *watched;
    int n_watched;
    unsigned char *watched_saved;
    int checks[2 * (MAX_CANDIDATES + 1)]; /* implementations of the check runs */
    int n_checks, check_i;
    /* The threads busy in the first check run. A second run that writes
     * every page the first did ends the check (most do); one that leaves
     * some unwritten is run again if another count of threads took part
     * (up to HIDDEN_RETRIES), then confirmed by up to HIDDEN_CONFIRMS more
     * runs, whose pages join its own: what a pool thread writes depends on
     * whether the scheduler let it take part, and only a page no later run
     * writes again is state left for later calls. */
    int busy_first, retries, confirms;
} hidden TDG_STATE = {.uffd = -1, .pm = -1};

static bool hidden_checking(void)
{
    return hidden.check_i < hidden.n_checks;
}

static int by_start(const void *a, const void *b)
{
    unsigned long x = ((const struct hw_range *)a)->start, y = ((const struct hw_range *)b)->start;
    return (x > y) - (x < y);
}

#define HIDDEN_MAX_WATCHED 256
#define HIDDEN_RETRIES 8
#define HIDDEN_CONFIRMS 2

/* Pages [lo, hi) spans are compared byte for byte, except [lo, hi) itself. */
static void watch(unsigned long lo, unsigned long hi, unsigned long page)
{
    for (unsigned long p = lo & ~(page - 1); p < hi; p += page) {
        struct watched *w = NULL;
        for (int i = 0; i < hidden.n_watched && !w; i++)
            if (hidden.watched[i].page == p)
                w = &hidden.watched[i];
        if (!w) {
            if (hidden.n_watched == HIDDEN_MAX_WATCHED)
                return;
            w = &hidden.watched[hidden.n_watched++];
            w->page = p;
            w->n_skip = 0;
        }
        if (w->n_skip < 4)
            w->skip[w->n_skip++] = (struct hw_range){lo, hi};
    }
}

/* The global offset table of each loaded object (`.got.plt`: DT_PLTGOT, three
 * reserved entries and one per PLT relocation), which lazy binding writes the
 * first time a function is called: the dynamic linker's bookkeeping, not
 * state the call reads back. */
static int note_got(struct dl_phdr_info *info, size_t size, void *data)
{
    unsigned long page = *(unsigned long *)data;
    (void)size;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Dyn) *d;
        unsigned long got = 0, relsz = 0;
        if (info->dlpi_phdr[i].p_type != PT_DYNAMIC)
            continue;
        d = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
        for (; d->d_tag != DT_NULL; d++) {
            if (d->d_tag == DT_PLTGOT)
                got = d->d_un.d_ptr;
            else if (d->d_tag == DT_PLTRELSZ)
                relsz = d->d_un.d_val;
        }
        if (got == 0)
            continue;
        if (got < info->dlpi_addr) /* not relocated in place */
            got += info->dlpi_addr;
        watch(got, got + 8 * (3 + relsz / sizeof(ElfW(Rela))), page);
    }
    return 0;
}

/* The dynamic linker's own path as /proc/self/maps names it (the main
 * program's PT_INTERP, links resolved): its writable data is its
 * bookkeeping (locks, lookup caches), excluded. */
static int find_interpreter(struct dl_phdr_info *info, size_t size, void *data)
{
    char *out = data;
    (void)size;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_INTERP) {
            if (!realpath((const char *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr), out))
                out[0] = '\0';
            return 1;
        }
    return 0;
}

static const char *mapping_of(unsigned long a)
{
    for (int i = 0; i < fork_plan.n_ranges; i++)
        if (a >= fork_plan.ranges[i].start && a < fork_plan.ranges[i].end)
            return fork_plan.ranges[i].name;
    return "no mapping";
}

/* The named mapping an anonymous one follows directly (a library's or the
 * executable's zero-filled data), or "" when it follows none. */
static const char *named_below(unsigned long a)
{
    for (int i = 1; i < fork_plan.n_ranges; i++)
        if (a >= fork_plan.ranges[i].start && a < fork_plan.ranges[i].end)
            return fork_plan.ranges[i - 1].end == fork_plan.ranges[i].start &&
                           strcmp(fork_plan.ranges[i].name, "anonymous") == 0 &&
                           strcmp(fork_plan.ranges[i - 1].name, "anonymous") != 0
                       ? fork_plan.ranges[i - 1].name
                       : "";
    return "";
}

#define HIDDEN_MAX_STACKS 256

/* A thread's scheduling state as /proc/self/task/TID/stat shows it ('R'
 * running or runnable, 'S' sleeping, ...), '\0' if it is gone. */
static char thread_state(pid_t listed)
{
    char buf[512];
    const char *close_paren;
    if (!read_task_file(listed, "stat", buf, sizeof buf))
        return '\0';
    close_paren = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
    return close_paren && close_paren[1] == ' ' ? close_paren[2] : '\0';
}

/* The stack pointers of the process's threads, as /proc/self/task/TID/syscall
 * shows them for a thread blocked in the kernel (`NR args... SP PC`, or `-1
 * SP PC`): an idle pool thread waits there. A thread's stack is its own
 * frames, not state a later call reads, and how deep a pool thread's frames
 * go in one call depends on the scheduler (whether it took part at all, a
 * wake-up path, a signal), so its pages are not tracked. Only threads
 * asleep are asked: reading the syscall file of a thread that is runnable
 * but off its CPU waits in the kernel until it leaves the run queue, a
 * scheduler tick at a time (this cost every copy up to 20 ms on a loaded
 * host). A thread that never blocks (a pool thread spinning for work) and
 * the calling thread (always running) are not found here: the first's
 * stack is known by its guard page (is_thread_stack), the second's by its
 * own stack pointer. Returns how many were found. */
static int thread_stack_pointers(unsigned long *sps, int max)
{
    pid_t tids[HIDDEN_MAX_STACKS];
    int n = list_threads(tids, HIDDEN_MAX_STACKS), found = 0;
    n = n < HIDDEN_MAX_STACKS ? n : HIDDEN_MAX_STACKS;
    for (int i = 0; i < n && found < max; i++) {
        char buf[512], *f[16], state = thread_state(tids[i]);
        int k = 0;
        if (state != 'S' && state != 'D')
            continue;
        if (!read_task_file(tids[i], "syscall", buf, sizeof buf))
            continue; /* gone */
        if (strncmp(buf, "running", 7) == 0)
            continue; /* woke meanwhile */
        for (char *save = NULL, *w = strtok_r(buf, " \n", &save); w && k < 16; w = strtok_r(NULL, " \n", &save))
            f[k++] = w;
        if (k >= 3)
            sps[found++] = strtoul(f[k - 2], NULL, 16);
    }
    return found;
}

/* A thread stack as glibc (and most thread libraries) map one: anonymous,
 * writable, right above an inaccessible anonymous guard page. Found so for
 * the threads whose stack pointer cannot be read (thread_stack_pointers). */
static bool is_thread_stack(int i)
{
    const struct mem_range *r = &fork_plan.ranges[i], *below = i > 0 ? &fork_plan.ranges[i - 1] : NULL;
    return below && below->end == r->start && strcmp(r->name, "anonymous") == 0 &&
           strcmp(below->name, "anonymous") == 0 && !below->readable && !below->private_writable &&
           !below->shared_writable;
}

/* The calling thread's restartable-sequences area, which glibc (2.35 and
 * later) registers with the kernel inside each thread's descriptor: the
 * kernel writes the CPU the thread runs on there (cpu_id, node_id, mm_cid)
 * whenever it returns to the thread after a preemption or a migration. So
 * whether a check run writes that page depends on the scheduler: on a
 * loaded machine the first run was preempted and a quick later one was not
 * (the check's fallback 1 run in 4 at load 6-7, on the main thread's
 * descriptor page right below libc). Its page is compared byte for byte
 * without the area; other threads' descriptors are at the top of their
 * stacks, which are not tracked. The registered length is the original
 * ABI's 32 bytes (__rseq_size says how many of them glibc knows). */
extern const ptrdiff_t __rseq_offset __attribute__((weak));
extern const unsigned int __rseq_size __attribute__((weak));
#define RSEQ_REGISTERED_BYTES 32

static void watch_rseq_area(unsigned long page)
{
    unsigned long tp, area;
    if (!&__rseq_size || !&__rseq_offset || __rseq_size == 0)
        return; /* no glibc registration (older glibc, or glibc.pthread.rseq=0) */
    __asm__("mov %%fs:0, %0" : "=r"(tp));
    area = tp + (unsigned long)__rseq_offset;
    watch(area, area + (__rseq_size > RSEQ_REGISTERED_BYTES ? __rseq_size : RSEQ_REGISTERED_BYTES), page);
}

/* Sets up the tracking at the timed call's first start; NULL, or why it
 * cannot be done here. */
static const char *hidden_arm(unsigned long rsp)
{
    unsigned long page = (unsigned long)sysconf(_SC_PAGESIZE), pages = 0;
    struct hw_range excluded[HIDDEN_MAX_EXCLUDED + MAX_OUTPUTS + HIDDEN_MAX_WATCHED];
    int n_excluded = 0;
    char interpreter[PATH_MAX] = "";
    unsigned long sps[HIDDEN_MAX_STACKS];
    int n_sps;
    struct tdg_uffdio_api api = {UFFD_API, TDG_UFFD_FEATURE_WP_ASYNC | TDG_UFFD_FEATURE_WP_UNPOPULATED, 0};
    long fd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return "userfaultfd is not available";
    hidden.uffd = (int)fd;
    if (ioctl(hidden.uffd, TDG_UFFDIO_API, &api) < 0 || !(api.features & TDG_UFFD_FEATURE_WP_ASYNC))
        return "the kernel's userfaultfd has no asynchronous write-protection (Linux 6.7 or later)";
    hidden.pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (hidden.pm < 0)
        return "cannot read /proc/self/pagemap";
    /* What is not tracked: the outputs (put back), tdg's state (compared byte
     * for byte on the pages it shares) and tdg's own tables. */
#define EXCLUDE(a, b)                                                                                  \
    do {                                                                                               \
        unsigned long lo_ = (unsigned long)(a) & ~(page - 1), hi_ = ((unsigned long)(b) + page - 1) & ~(page - 1); \
        if (hi_ > lo_ && n_excluded < (int)(sizeof excluded / sizeof excluded[0]))                    \
            excluded[n_excluded++] = (struct hw_range){lo_, hi_};                                      \
    } while (0)
    for (int i = 0; i < g.n_outputs; i++)
        EXCLUDE(g.outputs[i].data, (const char *)g.outputs[i].data + g.outputs[i].count * g.outputs[i].elem_size);
    EXCLUDE(fork_plan.ranges, fork_plan.ranges + MAX_RANGES);
    if (fork_plan.fds)
        EXCLUDE(fork_plan.fds, fork_plan.fds + MAX_SAVED_FDS);
    hidden.watched = map_private(HIDDEN_MAX_WATCHED * sizeof *hidden.watched);
    hidden.watched_saved = map_private(HIDDEN_MAX_WATCHED * page);
    if (!hidden.watched || !hidden.watched_saved)
        return "cannot allocate the tables of written pages";
    if (__start_tdg_state && (unsigned long)__stop_tdg_state > (unsigned long)__start_tdg_state)
        watch((unsigned long)__start_tdg_state, (unsigned long)__stop_tdg_state, page);
    watch_rseq_area(page);
    dl_iterate_phdr(note_got, &page);
    dl_iterate_phdr(find_interpreter, interpreter);
    for (int i = 0; i < hidden.n_watched; i++) {
        /* the dynamic linker's own pages are not the application's state */
        if (interpreter[0] &&
            strncmp(mapping_of(hidden.watched[i].page), interpreter, sizeof fork_plan.ranges[0].name - 1) == 0) {
            hidden.watched[i--] = hidden.watched[--hidden.n_watched];
            continue;
        }
        EXCLUDE(hidden.watched[i].page, hidden.watched[i].page + page);
    }
#undef EXCLUDE
    qsort(excluded, (size_t)n_excluded, sizeof excluded[0], by_start);
    hidden.registered = map_private((size_t)fork_plan.n_ranges * sizeof *hidden.registered);
    hidden.tracked =
        map_private(((size_t)fork_plan.n_ranges + (size_t)n_excluded + 1) * sizeof *hidden.tracked);
    if (!hidden.registered || !hidden.tracked)
        return "cannot allocate the tables of written pages";
    n_sps = thread_stack_pointers(sps, HIDDEN_MAX_STACKS);
    for (int i = 0; i < fork_plan.n_ranges; i++) {
        const struct mem_range *r = &fork_plan.ranges[i];
        struct tdg_uffdio_register reg;
        unsigned long at;
        bool a_stack =
            strcmp(r->name, "[stack]") == 0 || (rsp >= r->start && rsp < r->end) || is_thread_stack(i);
        for (int t = 0; t < n_sps && !a_stack; t++)
            a_stack = sps[t] >= r->start && sps[t] < r->end;
        if (!r->private_writable || a_stack ||
            (interpreter[0] && strncmp(r->name, interpreter, sizeof r->name - 1) == 0))
            continue;
        reg = (struct tdg_uffdio_register){{r->start, r->end - r->start}, TDG_UFFDIO_REGISTER_MODE_WP, 0};
        if (ioctl(hidden.uffd, TDG_UFFDIO_REGISTER, &reg) < 0)
            continue; /* a mapping userfaultfd cannot take (device memory): not tracked */
        hidden.registered[hidden.n_registered++] = (struct hw_range){r->start, r->end};
        at = r->start;
        for (int e = 0; e < n_excluded && at < r->end; e++) {
            if (excluded[e].end <= at || excluded[e].start >= r->end)
                continue;
            if (excluded[e].start > at)
                hidden.tracked[hidden.n_tracked++] = (struct hw_range){at, excluded[e].start};
            at = excluded[e].end;
        }
        if (at < r->end)
            hidden.tracked[hidden.n_tracked++] = (struct hw_range){at, r->end};
    }
    for (int i = 0; i < hidden.n_tracked; i++)
        pages += (hidden.tracked[i].end - hidden.tracked[i].start) / page;
    hidden.cap = pages + (size_t)hidden.n_watched;
    hidden.written[0] = map_private(hidden.cap * sizeof(unsigned long));
    hidden.written[1] = map_private((HIDDEN_CONFIRMS + 1) * hidden.cap * sizeof(unsigned long));
    if (!hidden.written[0] || !hidden.written[1])
        return "cannot allocate the tables of written pages";
    /* Each implementation of the schedule, twice in a row, in the order
     * the schedule first runs them. */
    for (long i = 0; i < fork_plan.n_samples; i++) {
        int k = fork_plan.schedule[i];
        bool seen = false;
        for (int j = 0; j < hidden.n_checks && !seen; j += 2)
            seen = hidden.checks[j] == k;
        if (!seen) {
            hidden.checks[hidden.n_checks++] = k;
            hidden.checks[hidden.n_checks++] = k;
        }
    }
    return NULL;
}

/* Before a check run, last thing before its window: every tracked page
 * write-protected again, the shared pages' bytes saved. */
static void hidden_reset(void)
{
    unsigned long page = (unsigned long)sysconf(_SC_PAGESIZE);
    for (int i = 0; i < hidden.n_tracked; i++) {
        struct tdg_uffdio_writeprotect wp = {
            {hidden.tracked[i].start, hidden.tracked[i].end - hidden.tracked[i].start},
            TDG_UFFDIO_WRITEPROTECT_MODE_WP};
        (void)ioctl(hidden.uffd, TDG_UFFDIO_WRITEPROTECT, &wp);
    }
    for (int w = 0; w < hidden.n_watched; w++)
        memcpy(hidden.watched_saved + (size_t)w * page, (const void *)hidden.watched[w].page, page);
}

static void hidden_note(int run, unsigned long page)
{
    if (hidden.n_written[run] < (run == 0 ? 1 : HIDDEN_CONFIRMS + 1) * hidden.cap)
        hidden.written[run][hidden.n_written[run]++] = page;
}

/* After a check run: the pages it wrote, into written[run], ascending
 * (added to those already there with `keep`). */
static void hidden_collect(int run, bool keep)
{
    unsigned long page = (unsigned long)sysconf(_SC_PAGESIZE);
    struct tdg_page_region vec[256];
    if (!keep)
        hidden.n_written[run] = 0;
    for (int w = 0; w < hidden.n_watched; w++) {
        const struct watched *wp = &hidden.watched[w];
        const unsigned char *now = (const unsigned char *)wp->page, *was = hidden.watched_saved + (size_t)w * page;
        for (unsigned long b = 0; b < page; b++) {
            unsigned long a = wp->page + b;
            bool skipped = false;
            if (now[b] == was[b])
                continue;
            for (int k = 0; k < wp->n_skip && !skipped; k++)
                skipped = a >= wp->skip[k].start && a < wp->skip[k].end;
            if (!skipped) {
                hidden_note(run, wp->page);
                break;
            }
        }
    }
    for (int i = 0; i < hidden.n_tracked; i++) {
        unsigned long long at = hidden.tracked[i].start;
        while (at < hidden.tracked[i].end) {
            struct tdg_pm_scan_arg arg = {sizeof arg, 0, at, hidden.tracked[i].end, 0,
                                          (unsigned long long)(unsigned long)vec, 256, 0, 0,
                                          TDG_PAGE_IS_WRITTEN, 0, TDG_PAGE_IS_WRITTEN};
            long n = ioctl(hidden.pm, TDG_PAGEMAP_SCAN, &arg);
            if (n < 0)
                break;
            for (long r = 0; r < n; r++)
                for (unsigned long long p = vec[r].start; p < vec[r].end; p += page)
                    hidden_note(run, (unsigned long)p);
            if (arg.walk_end <= at)
                break;
            at = arg.walk_end;
        }
    }
    qsort(hidden.written[run], hidden.n_written[run], sizeof(unsigned long), by_address);
}


/* Pages the first check run wrote that no later one did: how many, the
 * first `max` of them in `pages`. */
static size_t hidden_left(unsigned long *pages, size_t max)
{
    size_t once = 0, j = 0;
    for (size_t i = 0; i < hidden.n_written[0]; i++) {
        unsigned long p = hidden.written[0][i];
        while (j < hidden.n_written[1] && hidden.written[1][j] < p)
            j++;
        if (j < hidden.n_written[1] && hidden.written[1][j] == p)
            continue;
        if (once < max)
            pages[once] = p;
        once++;
    }
    return once;
}

#define HIDDEN_NAMED_PAGES 32

/* After the last check run of implementation k: pages the first run
 * wrote and no later one did mean state the first call left for later
 * ones; the copy falls back (no return). Otherwise one line says how many
 * pages every run rewrites. */
static void hidden_compare(int k)
{
    char line[PATH_MAX + 512];
    unsigned long pages[HIDDEN_NAMED_PAGES], first;
    size_t once = hidden_left(pages, HIDDEN_NAMED_PAGES);
    if (once > 0) {
        char who[48];
        size_t at;
        /* The pages, for tdg to confirm them on a fresh restore: state a
         * first call leaves is left at the same pages on every restore. */
        at = (size_t)snprintf(line, sizeof line, "hidden_pages candidate=%d pages=", k);
        for (size_t i = 0; i < once && i < HIDDEN_NAMED_PAGES && at < sizeof line - 24; i++)
            at += (size_t)snprintf(line + at, sizeof line - at, "%s%#lx", i ? "," : "", pages[i]);
        snprintf(line + at, sizeof line - at, "\n");
        report_line(line);
        first = pages[0];
        if (k > 0)
            snprintf(who, sizeof who, "candidate %d's timed call", k);
        else
            snprintf(who, sizeof who, "the timed call");
        snprintf(line, sizeof line,
                 "%s wrote %zu page(s) besides its declared outputs and the stack on its first run that its "
                 "%d later run(s) did not write again (the first at %#lx, in %s%s%s): state a later call reads instead of "
                 "rebuilding (a table or a cache built once, a flag set once), which every sample replayed in "
                 "place after the first would find",
                 who, once, hidden.confirms + 1, first, mapping_of(first), named_below(first)[0] ? " memory after " : "",
                 named_below(first));
        in_place_fallback(line);
    }
    snprintf(line, sizeof line, "hidden_check candidate=%d written=%zu rewritten=%zu\n", k, hidden.n_written[0],
             hidden.n_written[1]);
    report_line(line);
}

/* After the last check run: tracking off (no write is trapped again). */
static void hidden_stop(void)
{
    for (int i = 0; i < hidden.n_registered; i++) {
        struct tdg_uffdio_range r = {hidden.registered[i].start,
                                     hidden.registered[i].end - hidden.registered[i].start};
        (void)ioctl(hidden.uffd, TDG_UFFDIO_UNREGISTER, &r);
    }
    close(hidden.uffd);
    close(hidden.pm);
    hidden.uffd = hidden.pm = -1;
}

/* The first time at the timed call's start: save the stack and the outputs. */
static void in_place_arm(void)
{
    unsigned long rsp = (unsigned long)in_place.resume.uc_mcontext.gregs[REG_RSP], top = 0, tp;
    const char *problem;
    size_t off = 0;
    int n_shared = 0;
    char line[256];
    if (g.n_outputs == 0 || g.outputs_stale)
        in_place_fallback("the process runs threads and the timed call declares no outputs to put back between "
                          "samples replayed in place (TDG_REGION_OUTPUT before tdg_region_begin, or returns(...) "
                          "in the spec of a shim capture)");
    if ((problem = read_mappings()) != NULL || (problem = save_descriptors()) != NULL)
        in_place_fallback(problem);
    for (int i = 0; i < fork_plan.n_ranges; i++) {
        const struct mem_range *r = &fork_plan.ranges[i];
        if (rsp >= r->start && rsp < r->end)
            top = r->end;
        n_shared += r->shared_writable;
    }
    if (top == 0)
        in_place_fallback("the calling thread's stack is in no mapping of /proc/self/maps");
    /* A thread other than the main one has its TLS and descriptor at the
     * top of its stack mapping: they are the thread's state, not frames. */
    in_place.stack_lo = rsp;
    __asm__("mov %%fs:0, %0" : "=r"(tp));
    if (tp > rsp && tp < top)
        top = tp;
    dl_iterate_phdr(lowest_tls, &top);
    in_place.stack_hi = top;
    for (int i = 0; i < g.n_outputs; i++)
        in_place.output_bytes += g.outputs[i].count * g.outputs[i].elem_size;
    if (in_place.output_bytes > IN_PLACE_MAX_BYTES || top - rsp > IN_PLACE_MAX_BYTES)
        in_place_fallback("the timed call's outputs or the calling thread's stack exceed 1 GiB");
    in_place.stack_saved = map_private(top - rsp);
    in_place.outputs_saved = map_private(in_place.output_bytes);
    in_place.alt = map_private(IN_PLACE_ALT_STACK);
    in_place.shared_sums = map_private((size_t)n_shared * sizeof *in_place.shared_sums);
    if (!in_place.stack_saved || !in_place.outputs_saved || !in_place.alt || !in_place.shared_sums)
        in_place_fallback("cannot allocate the copies of the stack and the outputs");
    memcpy(in_place.stack_saved, (const void *)rsp, top - rsp);
    for (int i = 0; i < g.n_outputs; i++) {
        size_t n = g.outputs[i].count * g.outputs[i].elem_size;
        memcpy(in_place.outputs_saved + off, g.outputs[i].data, n);
        off += n;
    }
    for (int i = 0, k = 0; i < fork_plan.n_ranges; i++)
        if (fork_plan.ranges[i].shared_writable)
            in_place.shared_sums[k++] = checksum(&fork_plan.ranges[i]);
    if ((problem = hidden_arm(rsp)) != NULL) {
        char why[512];
        snprintf(why, sizeof why,
                 "the pages a call writes cannot be found here (%s), so a call that leaves state for the next "
                 "could not be ruled out for samples replayed in place",
                 problem);
        in_place_fallback(why);
    }
    in_place.armed = true;
    snprintf(line, sizeof line, "in_place stack_bytes=%lu output_bytes=%zu threads=%d\n", top - rsp,
             in_place.output_bytes, count_threads());
    report_line(line);
    clock_gettime(CLOCK_MONOTONIC, &in_place.t_last);
}

/* Called right after getcontext(&in_place.resume) in tdg_region_begin: the
 * first time it saves the start, every later time the stack is already
 * back and the outputs and file offsets are put back here. */
static __attribute__((noinline)) void in_place_sample_starts(void)
{
    struct timespec t0, t1;
    size_t off = 0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (!in_place.armed) {
        in_place_arm();
    } else {
        for (int i = 0; i < g.n_outputs; i++) {
            size_t n = g.outputs[i].count * g.outputs[i].elem_size;
            memcpy((void *)g.outputs[i].data, in_place.outputs_saved + off, n);
            off += n;
        }
        restore_offsets();
    }
    in_place.k = hidden_checking() ? hidden.checks[hidden.check_i] : fork_plan.schedule[in_place.sample];
    g.candidate = in_place.k > 0 ? fork_plan.candidates[in_place.k - 1] : NULL;
    g.candidate_ran = false;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    in_place.prepare_ns += elapsed_ns(&t0, &t1);
    if (hidden_checking())
        hidden_reset(); /* last: the check run's window starts here */
}

/* Runs on the private stack: the calling thread's stack back as it was at
 * the timed call's start, then resume there. */
static void in_place_rewind(void)
{
    memcpy((void *)in_place.stack_lo, in_place.stack_saved, in_place.stack_hi - in_place.stack_lo);
    setcontext(&in_place.resume);
    _exit(6); /* setcontext does not return */
}

static void in_place_sample_ended(long long ns, long long cpu_ns, long faults)
{
    char line[512];
    unsigned long long h;
    struct timespec t;
    if (hidden_checking())
        hidden_collect(hidden.check_i % 2, hidden.check_i % 2 == 1 && hidden.confirms > 0); /* first: the window ends here */
    if (g.candidate && !g.candidate_ran)
        fail_copy("was never called: ", "the region makes no TDG_ROUTINE call for its site, so the copy ran "
                  "the application's own code; route the call through TDG_ROUTINE(\"site\", function)");
    h = hash_outputs();
    if (!in_place.hashed[in_place.k]) {
        in_place.hashed[in_place.k] = true;
        in_place.output_hash[in_place.k] = h;
    } else if (h != in_place.output_hash[in_place.k]) {
        snprintf(line, sizeof line,
                 "sample %ld replayed in place wrote other outputs than the first sample of the same code: the "
                 "timed call reads memory it writes besides its declared outputs, or its result depends on its "
                 "threads' timing",
                 in_place.sample + hidden.check_i + 1);
        in_place_fallback(line);
    }
    if (in_place.sample == 0) {
        char why[PATH_MAX + 128];
        const char *problem = unreplayable(in_place.shared_sums, why, sizeof why);
        if (problem)
            in_place_fallback(problem);
    }
    if (hidden_checking()) {
        /* a check run: not a sample */
        unsigned long first;
        bool again = false;
        if (hidden.check_i % 2 == 0) {
            hidden.busy_first = team.busy_last;
            hidden.retries = hidden.confirms = 0;
        } else if (hidden_left(&first, 1) == 0) {
            hidden_compare(in_place.k); /* every page of the first run written again: done */
        } else if (team.busy_last != hidden.busy_first && hidden.confirms == 0 &&
                   hidden.retries < HIDDEN_RETRIES) {
            hidden.retries++; /* not comparable: another team took part */
            again = true;
        } else if (hidden.confirms < HIDDEN_CONFIRMS) {
            hidden.confirms++;
            again = true;
        } else {
            hidden_compare(in_place.k);
        }
        if (!again && ++hidden.check_i == hidden.n_checks)
            hidden_stop();
        clock_gettime(CLOCK_MONOTONIC, &in_place.t_last);
        in_place.prepare_ns = 0;
        goto rewind;
    }
    clock_gettime(CLOCK_MONOTONIC, &t);
    snprintf(line, sizeof line,
             "ns=%lld cpu_ns=%lld overhead_ns=%.1f minflt=%ld sample=%ld fork_ns=0 prepare_ns=%lld "
             "prepare_faults=0 flush_ns=0 delay_ns=0\nsample_end=%ld wall_ns=%lld\n",
             ns, cpu_ns, use_tsc() ? (double)g.overhead / g.tsc_ghz : -1.0, faults, in_place.sample,
             in_place.prepare_ns, in_place.sample, elapsed_ns(&in_place.t_last, &t));
    report_line(line);
    in_place.t_last = t;
    in_place.prepare_ns = 0;
    if (++in_place.sample == fork_plan.n_samples) {
        report_trimmed();
        report_line("fork_done\n");
        _exit(0);
    }
rewind:
    g.timing_depth = 0;
    getcontext(&in_place.rewind);
    in_place.rewind.uc_stack.ss_sp = in_place.alt;
    in_place.rewind.uc_stack.ss_size = IN_PLACE_ALT_STACK;
    in_place.rewind.uc_link = NULL;
    makecontext(&in_place.rewind, in_place_rewind, 0);
    setcontext(&in_place.rewind);
    _exit(6);
}

static void in_place_begin(void)
{
    in_place.on = true;
    in_place.k = fork_plan.schedule[0];
    g.candidate = in_place.k > 0 ? fork_plan.candidates[in_place.k - 1] : NULL;
}
#else
static void in_place_sample_starts(void) {}
static void in_place_sample_ended(long long ns, long long cpu_ns, long faults)
{
    (void)ns, (void)cpu_ns, (void)faults;
}
static void in_place_begin(void)
{
    report_line("fallback=the process runs threads, which fork() does not copy, and samples replayed in place "
                "are implemented for x86-64 only\n");
    _exit(0);
}
#endif

/* Original, before the dump: every mapping with AnonHugePages in smaps,
 * read in place (no allocation: the image holds the heap as it was). */
static void record_huge_ranges(void)
{
    char buf[8192];
    size_t have = 0;
    unsigned long start = 0, end = 0;
    int fd = open("/proc/self/smaps", O_RDONLY | O_CLOEXEC);
    huge_ranges.n = 0;
    if (fd < 0)
        return;
    for (;;) {
        ssize_t n = read(fd, buf + have, sizeof buf - 1 - have);
        if (n <= 0)
            break;
        have += (size_t)n;
        buf[have] = '\0';
        char *line = buf, *nl;
        while ((nl = strchr(line, '\n')) != NULL) {
            unsigned long a, b;
            long kb;
            *nl = '\0';
            if (sscanf(line, "%lx-%lx ", &a, &b) == 2) {
                start = a;
                end = b;
            } else if (sscanf(line, "AnonHugePages: %ld kB", &kb) == 1 && kb > 0 &&
                       huge_ranges.n < MAX_HUGE_RANGES) {
                huge_ranges.start[huge_ranges.n] = start;
                huge_ranges.end[huge_ranges.n++] = end;
            }
            line = nl + 1;
        }
        have = (size_t)(buf + have - line);
        memmove(buf, line, have);
        if (have == sizeof buf - 1) /* a line longer than the buffer: drop it */
            have = 0;
    }
    close(fd);
}

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif
#define HUGE_PAGE (2UL << 20)

/* Restored copy, before any sample: the application's page sizes back,
 * range by range (Linux >= 6.1; where the kernel refuses, e.g. transparent
 * huge pages off, the copy stays in base pages and reports the difference:
 * anon_huge_kb on every sample). */
static void restore_page_sizes(void)
{
    for (int i = 0; i < huge_ranges.n; i++) {
        unsigned long a = (huge_ranges.start[i] + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
        unsigned long b = huge_ranges.end[i] & ~(HUGE_PAGE - 1);
        if (b <= a)
            continue;
        if (madvise((void *)a, b - a, MADV_COLLAPSE) == 0)
            huge_ranges.collapsed_kb += (long)((b - a) >> 10);
        else
            huge_ranges.refused++;
    }
}

/* How long a restored copy waits for CRIU to let go of its threads. */
#define RELEASE_WAIT_NS (5LL * 1000000000LL)

/* Whether thread `tid` (as /proc lists it) still has a tracer. */
static bool traced(pid_t tid)
{
    char buf[2048];
    const char *field;
    if (!read_task_file(tid, "status", buf, sizeof buf))
        return false; /* gone: nothing left to let go of */
    field = strstr(buf, "\nTracerPid:");
    return field && strtol(field + 11, NULL, 10) != 0;
}

/* Restored copy, first thing: wait until CRIU has let go of every thread.
 * CRIU resumes a copy by detaching its threads one after another, and the
 * thread that returns here runs as soon as it is detached. If it ends the
 * copy (a short region, a fallback, an error) while CRIU still holds
 * another thread, that thread dies with the process, CRIU's detach of it
 * fails with ESRCH and CRIU fails the whole restore ("Unable to detach N: No
 * such process", CRIU issue 2072) although the copy did its work. That
 * happens whenever this thread gets the CPU before CRIU does: on a loaded
 * machine, or every time when the copy runs at a real-time priority on
 * CRIU's CPU. Sleeping, not spinning, lets CRIU run on this CPU. Bounded: a
 * thread some other tracer holds does not keep the copy from its work. */
static void wait_until_released(void)
{
    struct timespec nap = {0, 50000}, start, t;
    pid_t *tids;
    int cap = list_threads(NULL, 0), n;
    if (cap <= 1)
        return;
    tids = map_private((size_t)cap * sizeof *tids);
    if (!tids)
        return;
    /* The others are stopped, so none comes or goes meanwhile. */
    n = list_threads(tids, cap);
    n = n < cap ? n : cap;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (int i = 0; i < n;) {
        if (!traced(tids[i])) {
            i++;
            continue;
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (elapsed_ns(&start, &t) > RELEASE_WAIT_NS)
            break;
        nanosleep(&nap, NULL);
    }
    munmap(tids, (size_t)cap * sizeof *tids);
}

/* Every restored copy gets a private copy of each file the process can
 * write (tdg_checkpoint's restore substitutes), so its writes never reach
 * the user's file. Where the copy can also read the file (opened O_RDWR, or
 * mapped shared and writable), its private copy must hold what the file held
 * at the checkpoint, which the file itself no longer does once the original
 * goes on writing: so right after the dump the original keeps that content
 * in the image, one `tdg-seed-N` file each (at most SEED_MAX_BYTES in all),
 * and records `seed=N PATH` (or `seed_skipped=PATH` past the budget). The
 * file is read through a descriptor of its own, leaving the application's
 * offsets alone; the seed is a new file, never written through a link. */
#define SEED_MAX_BYTES (256LL << 20)
#define SEED_MAX_FILES 64

static bool copy_into(int from, int to)
{
    char buf[1 << 16];
    ssize_t n;
    while ((n = read(from, buf, sizeof buf)) != 0) {
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return false;
        }
        for (ssize_t done = 0; done < n;) {
            ssize_t w = write(to, buf + done, (size_t)(n - done));
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                return false;
            done += w;
        }
    }
    return true;
}

static void seed_file(FILE *out, int image_fd, const char *path, char seeded[][PATH_MAX], int *n_seeded,
                      long long *budget)
{
    struct stat st;
    char name[32];
    int from, to;
    for (int i = 0; i < *n_seeded; i++)
        if (strcmp(seeded[i], path) == 0)
            return;
    if (*n_seeded == SEED_MAX_FILES || strchr(path, '\n'))
        return;
    from = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    if (from < 0)
        return;
    if (fstat(from, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(from);
        return;
    }
    snprintf(seeded[*n_seeded], PATH_MAX, "%s", path);
    if (st.st_size > *budget) {
        fprintf(out, "seed_skipped=%s\n", path);
        close(from);
        (*n_seeded)++;
        return;
    }
    snprintf(name, sizeof name, "tdg-seed-%d", *n_seeded);
    to = openat(image_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (to >= 0 && copy_into(from, to)) {
        fprintf(out, "seed=%d %s\n", *n_seeded, path);
        *budget -= st.st_size;
    }
    if (to >= 0)
        close(to);
    close(from);
    (*n_seeded)++;
}

/* The seeds, and `map=PATH` for each file mapped shared and writable
 * (a restored copy's writes through it would reach the file). */
static void write_file_seeds(FILE *out, int image_fd, int skip1, int skip2, int skip3)
{
    static char seeded[SEED_MAX_FILES][PATH_MAX];
    int n_seeded = 0;
    long long budget = SEED_MAX_BYTES;
    char line[PATH_MAX + 128];
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    FILE *maps;
    if (d) {
        while ((e = readdir(d)) != NULL) {
            char link[64], target[PATH_MAX], info[64];
            unsigned long flags = 0;
            ssize_t n;
            FILE *fi;
            int fd = atoi(e->d_name);
            if (e->d_name[0] == '.' || fd == dirfd(d) || fd == skip1 || fd == skip2 || fd == skip3)
                continue;
            snprintf(info, sizeof info, "/proc/self/fdinfo/%d", fd);
            if ((fi = fopen(info, "r")) == NULL)
                continue;
            while (fgets(line, sizeof line, fi))
                if (sscanf(line, "flags: %lo", &flags) == 1)
                    break;
            fclose(fi);
            if ((flags & O_ACCMODE) != O_RDWR)
                continue;
            snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
            n = readlink(link, target, sizeof target - 1);
            if (n <= 0 || target[0] != '/')
                continue;
            target[n] = '\0';
            seed_file(out, image_fd, target, seeded, &n_seeded, &budget);
        }
        closedir(d);
    }
    maps = fopen("/proc/self/maps", "r");
    if (!maps)
        return;
    while (fgets(line, sizeof line, maps)) {
        char perms[8] = "", path[PATH_MAX] = "";
        if (sscanf(line, "%*x-%*x %7s %*s %*s %*s %4095[^\n]", perms, path) < 2)
            continue;
        if (perms[1] != 'w' || perms[3] != 's' || path[0] != '/')
            continue;
        if (strncmp(path, "/dev/", 5) == 0 || strstr(path, " (deleted)"))
            continue;
        fprintf(out, "map=%s\n", path);
        seed_file(out, image_fd, path, seeded, &n_seeded, &budget);
    }
    fclose(maps);
}

/* CRIU opens its dump log in the image directory with O_TRUNC, following
 * links: create it here first, as a new regular file, or accept one only
 * if it is a regular file already (an earlier dump's, in a directory only
 * root may write). */
static bool claim_dump_log(int dirfd)
{
    struct stat st;
    int fd = openat(dirfd, DUMP_LOG, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) {
        close(fd);
        return true;
    }
    return errno == EEXIST && fstatat(dirfd, DUMP_LOG, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

static int checkpoint_here(const char *image, bool pair_api)
{
    struct criu_api api;
    const char *criu = getenv(ENV_CRIU);
    int pipefd[2], dirfd_img, ret, result_fd, control_fd, saved_errno;
    struct stat st, control_st;
    char exe[PATH_MAX];
    ssize_t n;
    FILE *info;

    /* Only root (who restores it) may write an image: CRIU writes its
     * files there following links, and a restore runs what it holds. */
    if (mkdir(image, 0700) < 0 && errno != EEXIST) {
        complain("cannot create the image directory %s", image);
        return TDG_CHECKPOINT_ERROR;
    }
    dirfd_img = open(image, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dirfd_img < 0) {
        complain("cannot open the image directory %s (not a directory, or a symbolic link)", image);
        return TDG_CHECKPOINT_ERROR;
    }
    if (!claim_dump_log(dirfd_img)) {
        complain("%s/" DUMP_LOG " is a symbolic link or not a regular file; refusing to let CRIU write through it", image);
        close(dirfd_img);
        return TDG_CHECKPOINT_ERROR;
    }
    if (!load_libcriu(&api)) {
        close(dirfd_img);
        return TDG_CHECKPOINT_ERROR;
    }
    if (pipe(pipefd) < 0) {
        close(dirfd_img);
        return TDG_CHECKPOINT_ERROR;
    }
    result_fd = move_fd_high(pipefd[1], F_DUPFD);
    close(pipefd[0]);
    if (result_fd < 0 || fstat(result_fd, &st) < 0) {
        close(dirfd_img);
        return TDG_CHECKPOINT_ERROR;
    }
    control_fd = open_control_pipe(&control_st);
    if (control_fd < 0) {
        close(result_fd);
        close(dirfd_img);
        return TDG_CHECKPOINT_ERROR;
    }

    if (api.init_opts() < 0) {
        complain("criu_init_opts failed%s", "");
        close(control_fd);
        close(result_fd);
        close(dirfd_img);
        return TDG_CHECKPOINT_ERROR;
    }
    if (criu && *criu) {
        int service = start_criu_service(criu);
        if (service >= 0)
            api.set_service_fd(service);
        else
            api.set_service_binary(criu);
    }
    api.set_images_dir_fd(dirfd_img);
    api.set_leave_running(true);
    /* Under `tdg checkpoint capture` the application leads its own session;
     * started any other way it may share its shell's (and its terminal). */
    api.set_shell_job(true);
    api.set_log_level(4);
    api.set_log_file(DUMP_LOG);

    record_huge_ranges();
    ret = api.dump();
    saved_errno = errno;

    if (ret > 0) {
        /* A restored copy: the region runs from here. */
        wait_until_released();
        g.restored = true;
        g.result_fd = result_fd;
        close(dirfd_img);
        catch_fatal_signals();
        restore_page_sizes();
        follow_control(control_fd);
        team.on = count_threads() > 1;
        if (fork_plan.n_samples > 0 && team.on && !pair_api)
            in_place_begin(); /* the samples are taken at the timed call */
        else if (fork_plan.n_samples > 0)
            sample_by_fork(); /* returns only in a sample's child */
        if (pair_api) {
            g.timing_depth = 1;
            start_region_clocks();
        }
        return TDG_CHECKPOINT_RESTORED;
    }

    /* The original process. */
    info = NULL;
    {
        /* a new file, never through a link planted in the directory */
        int ifd = openat(dirfd_img, CAPTURE_INFO, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (ifd >= 0)
            info = fdopen(ifd, "w");
    }
    if (info) {
        fprintf(info, "status=%s\n", ret == 0 ? "ok" : "error");
        if (ret < 0)
            fprintf(info, "error=criu_dump returned %d (%s)\n", ret, strerror(saved_errno));
        fprintf(info, "pid=%ld\n", (long)getpid());
        n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n > 0) {
            exe[n] = '\0';
            fprintf(info, "exe=%s\n", exe);
        }
        if (realpath(image, exe))
            fprintf(info, "image=%s\n", exe);
        fprintf(info, "api=%s\n", pair_api ? "pair" : "markers");
        if (!pair_api) {
            fprintf(info, "site=%s\n", g.site);
            fprintf(info, "call=%ld\n", g.call);
            fprintf(info, "delay=%ld\n", g.delay);
        }
        fprintf(info, "result_fd=%d\n", result_fd);
        fprintf(info, "result_channel=pipe:[%lu]\n", (unsigned long)st.st_ino);
        fprintf(info, "control_fd=%d\n", control_fd);
        fprintf(info, "control_channel=pipe:[%lu]\n", (unsigned long)control_st.st_ino);
        /* this library takes many samples per restore (`schedule=`) */
        fprintf(info, "fork_samples=1\n");
        write_descriptors(info, dirfd_img, result_fd, control_fd);
        write_file_seeds(info, dirfd_img, dirfd_img, result_fd, control_fd);
        fclose(info);
    }
    close(control_fd);
    close(result_fd);
    close(dirfd_img);
    if (ret < 0) {
        /* Under `tdg checkpoint capture` tdg reads the log and reports the
         * cause itself; on its own the library says where to look. */
        if (!getenv(ENV_IMAGE))
            fprintf(stderr, "tdg_checkpoint: CRIU could not checkpoint this process (criu_dump: %d); see %s/%s\n",
                    ret, image, DUMP_LOG);
        return TDG_CHECKPOINT_ERROR;
    }
    g.checkpointed = true;
    return TDG_CHECKPOINT_ORIGINAL;
}

/* Restored copy: the declared outputs, back to back, into the file tdg
 * named, and one `output=` line each describing them. */
static void write_outputs(void)
{
    char line[160];
    int fd;
    if (!g.outputs_path[0])
        return;
    /* a new file in tdg's private scratch: never through a link */
    fd = open(g.outputs_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        fail_copy("could not write its outputs: ", strerror(errno));
    for (int i = 0; i < g.n_outputs; i++) {
        const struct output *o = &g.outputs[i];
        const char *p = o->data;
        size_t left = o->count * o->elem_size;
        while (left > 0) {
            ssize_t n = write(fd, p, left);
            if (n <= 0)
                fail_copy("could not write its outputs: ", strerror(errno));
            p += n;
            left -= (size_t)n;
        }
        snprintf(line, sizeof line, "output=%d count=%lu size=%lu kind=%d\n", i, o->count,
                 o->elem_size, o->kind);
        report_line(line);
    }
    close(fd);
}

/* In a restored copy: hand the region's time to tdg and end the copy. */
static void finish_restored_copy(long long ns, long long cpu_ns, long faults)
{
    char line[512], fields[256];
    signal(SIGPIPE, SIG_IGN);
    if (fork_plan.link >= 0) { /* the timed call is over: the sampler may fork the next sample */
        (void)!write(fork_plan.link, "d", 1);
        close(fork_plan.link);
        fork_plan.link = -1;
    }
    if (g.candidate && !g.candidate_ran)
        fail_copy("was never called: ", "the region makes no TDG_ROUTINE call for its site, so the copy ran "
                  "the application's own code; route the call through TDG_ROUTINE(\"site\", function)");
    if (fork_plan.learning) {
        learn_written_pages();
        _exit(0);
    }
    write_outputs();
    fidelity_fields(fields, sizeof fields);
    if (fork_plan.in_child)
        snprintf(line, sizeof line,
                 "ns=%lld cpu_ns=%lld overhead_ns=%.1f minflt=%ld sample=%ld fork_ns=%lld prepare_ns=%lld "
                 "prepare_faults=%ld flush_ns=%lld delay_ns=%lld%s\n",
                 ns, cpu_ns, use_tsc() ? (double)g.overhead / g.tsc_ghz : -1.0, faults, fork_plan.sample,
                 fork_plan.fork_ns, fork_plan.prepare_ns, fork_plan.prepare_faults, fork_plan.flush_ns,
                 fork_plan.delay_ns, fields);
    else
        snprintf(line, sizeof line, "ns=%lld cpu_ns=%lld overhead_ns=%.1f minflt=%ld%s\n", ns, cpu_ns,
                 use_tsc() ? (double)g.overhead / g.tsc_ghz : -1.0, faults, fields);
    report_line(line);
    _exit(0);
}

/* In a plain run with TDG_REGION_REPORT: append the call's time (the in-app
 * reference). Done after the region ends so it does not perturb it. */
static void append_report(long long ns, long long cpu_ns, long faults)
{
    char line[384], fields[256];
    int len, fd = open(g.report, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        complain("cannot open %s for the region report", g.report);
        return;
    }
    fidelity_fields(fields, sizeof fields);
    len = snprintf(line, sizeof line, "ns=%lld cpu_ns=%lld overhead_ns=%.1f minflt=%ld%s\n", ns, cpu_ns,
                   use_tsc() ? (double)g.overhead / g.tsc_ghz : -1.0, faults, fields);
    if (write(fd, line, (size_t)len) != len)
        complain("short write to %s", g.report);
    close(fd);
}

/* In the original after its dump: the timed call as the application ran it,
 * into the image directory (new file only, never through a link). */
static void record_captured_call(long long ns, long long cpu_ns, long faults)
{
    char path[PATH_MAX], line[384], fields[256];
    int len, fd;
    if (snprintf(path, sizeof path, "%s/%s", g.image, CAPTURED_CALL) >= (int)sizeof path)
        return;
    fidelity_fields(fields, sizeof fields);
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    len = snprintf(line, sizeof line, "ns=%lld cpu_ns=%lld minflt=%ld%s\n", ns, cpu_ns, faults, fields);
    if (write(fd, line, (size_t)len) != len)
        complain("short write to %s", path);
    close(fd);
}

/* The end of the timed window: read first thing in the end marker, so its
 * bookkeeping is not timed. */
struct region_end {
    unsigned long long tsc;
    struct timespec clock;
};

static inline void read_region_end(struct region_end *t)
{
    if (use_tsc())
        t->tsc = tdg_tsc_end();
    else
        now(&t->clock);
}

static void region_finished(const struct region_end *t)
{
    struct timespec cpu1;
    long long ns, cpu_ns;
    long faults;
    if (use_tsc()) {
        unsigned long long ticks = t->tsc - g.tsc0;
        ticks = ticks > g.overhead ? ticks - g.overhead : 0;
        ns = (long long)((double)ticks / g.tsc_ghz + 0.5);
    } else {
        ns = elapsed_ns(&g.t0, &t->clock);
    }
    cpu_now(&cpu1);
    cpu_ns = elapsed_ns(&g.cpu0, &cpu1);
    faults = minor_faults() - fork_plan.minflt0;
    fidelity_after_call();
    if (g.restored) {
        if (team.on) {
            struct team_use use = team_end();
            char line[128];
            team.busy_last = use.busy;
            snprintf(line, sizeof line, "team threads=%d busy_threads=%d team_cpu_ns=%lld\n", use.threads,
                     use.busy, use.cpu_ns);
            report_line(line);
        }
        if (in_place.on)
            in_place_sample_ended(ns, cpu_ns, faults); /* rewinds to the next sample, or ends the copy */
        finish_restored_copy(ns, cpu_ns, faults);
    }
    if (g.checkpointed)
        record_captured_call(ns, cpu_ns, faults);
    else if (g.report)
        append_report(ns, cpu_ns, faults);
}

static struct census_site *census_site(const char *site)
{
    for (int i = 0; i < census.n_sites; i++)
        if (strcmp(census.sites[i].name, site) == 0)
            return &census.sites[i];
    if (census.n_sites == CENSUS_SITES)
        return NULL;
    snprintf(census.sites[census.n_sites].name, sizeof census.sites[0].name, "%s", site);
    return &census.sites[census.n_sites++];
}

static void census_begin(const char *site)
{
    struct census_site *c = census_site(site);
    if (!census.calibrated) {
        measure_overhead();
        census.calibrated = true;
    }
    if (!c || c->depth++ > 0)
        return;
    c->calls++;
    if (use_tsc())
        c->t0 = tdg_tsc_begin();
    else
        now(&c->c0);
}

static void census_end(const char *site, const struct region_end *t)
{
    struct census_site *c = census_site(site);
    long long ns;
    if (!c || c->depth == 0 || --c->depth > 0)
        return;
    if (use_tsc()) {
        unsigned long long ticks = t->tsc - c->t0;
        ticks = ticks > g.overhead ? ticks - g.overhead : 0;
        ns = (long long)((double)ticks / g.tsc_ghz + 0.5);
    } else {
        ns = elapsed_ns(&c->c0, &t->clock);
    }
    if (!census.calls)
        census.calls = malloc(sizeof *census.calls * CENSUS_CALLS);
    if (!census.calls || census.n_calls == CENSUS_CALLS) {
        census.overflow = true;
        return;
    }
    census.calls[census.n_calls++] = (struct census_call){(int)(c - census.sites), c->calls, ns};
}

/* At exit: `site NAME` lines, then `call SITE_INDEX CALL NS` per call. */
static void write_census(void)
{
    int fd = open(g.census, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        complain("cannot write the site census to %s", g.census);
        return;
    }
    for (int i = 0; i < census.n_sites; i++)
        fprintf(f, "site %s\n", census.sites[i].name);
    for (long i = 0; i < census.n_calls; i++)
        fprintf(f, "call %d %ld %lld\n", census.calls[i].site, census.calls[i].call, census.calls[i].ns);
    if (census.overflow)
        fprintf(f, "overflow\n");
    fclose(f);
}

int tdg_enter_checkpoint(const char *image_dir)
{
    const char *image;
    if (!g.configured)
        read_environment();
    if (g.restored || g.checkpointed)
        return g.restored ? TDG_CHECKPOINT_RESTORED : TDG_CHECKPOINT_ORIGINAL;
    image = g.image ? g.image : image_dir;
    if (!g.image && g.report) {
        /* A plain profiled run: time the region, checkpoint nothing. */
        g.timing_depth = 1;
        start_region_clocks();
        return TDG_CHECKPOINT_ORIGINAL;
    }
    if (!image || !*image) {
        complain("tdg_enter_checkpoint: no image directory given%s", "");
        return TDG_CHECKPOINT_ERROR;
    }
    return checkpoint_here(image, true);
}

void tdg_stop_checkpoint(void)
{
    struct region_end t;
    if (g.timing_depth > 0) {
        read_region_end(&t);
        g.timing_depth = 0;
        region_finished(&t);
    }
}

void tdg_region_begin(const char *site)
{
    if (!g.configured)
        read_environment();
    if (!g.markers_on || !site)
        return;
    if (g.census) {
        census_begin(site);
        return;
    }
    if (g.site_any) {
        snprintf(g.site, sizeof g.site, "%s", site);
        g.site_any = false;
    } else if (strcmp(site, g.site) != 0) {
        return;
    }
    if (g.timing_depth > 0) {
        g.timing_depth++; /* recursion inside the timed call */
        return;
    }
    g.count++;
    if (g.image && !g.checkpointed && !g.restored && g.count == g.call - g.delay) {
        if (checkpoint_here(g.image, false) == TDG_CHECKPOINT_ERROR)
            g.image = NULL; /* let the application finish normally */
    }
    if (g.count == g.call && (g.restored || g.checkpointed || (!g.image && g.report))) {
        if (in_place.on) {
            /* every sample after the first comes back here (in_place_rewind) */
            getcontext(&in_place.resume);
            in_place_sample_starts();
        }
        g.timing_depth = 1;
        start_region_clocks(); /* last, so the bookkeeping above is not timed */
    }
}

void tdg_region_end(const char *site)
{
    struct region_end t = {0, {0, 0}};
    if (g.timing_depth > 0 || g.census)
        read_region_end(&t);
    if (g.census && site) {
        census_end(site, &t);
        return;
    }
    if (!g.markers_on || !site || strcmp(site, g.site) != 0)
        return;
    if (g.timing_depth <= 0) {
        g.outputs_stale = true;
        if (g.count == g.call - 1)
            fidelity_previous_end();
        return;
    }
    if (--g.timing_depth > 0)
        return;
    region_finished(&t);
}

void *tdg_redirect(const char *site, const char *symbol, void *original)
{
    static const char *cached_symbol TDG_STATE;
    static void *cached TDG_STATE, *cached_from TDG_STATE;
    void *found;
    if (!g.candidate)
        return original;
    if (!site || strcmp(site, g.site) != 0)
        return original;
    g.candidate_ran = true;
    if (symbol == cached_symbol && g.candidate == cached_from)
        return cached;
    found = dlsym(g.candidate, symbol);
    if (!found) {
        char detail[320];
        snprintf(detail, sizeof detail, "defines no `%s`, the function TDG_ROUTINE(\"%s\", %s) calls",
                 symbol, site, symbol);
        fail_copy("", detail);
    }
    cached_symbol = symbol;
    cached = found;
    cached_from = g.candidate;
    return found;
}

void tdg_region_output(const char *site, const void *data, unsigned long count,
                       unsigned long elem_size, int kind)
{
    if (!g.configured)
        read_environment();
    if (!g.markers_on || !site || (!g.site_any && strcmp(site, g.site) != 0))
        return;
    if (g.outputs_stale) {
        g.n_outputs = 0;
        g.outputs_stale = false;
    }
    if (g.n_outputs == MAX_OUTPUTS) {
        complain("more than 16 outputs declared for region %s; the rest are not verified", site);
        return;
    }
    g.outputs[g.n_outputs++] = (struct output){data, count, elem_size, kind};
}
