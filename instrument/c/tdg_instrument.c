/* tdg_instrument.c: the profiling runtime behind tdg_instrument.h.
 *
 * Design (why, not what):
 * - One arena, allocated and pre-faulted when the first routine registers, so
 *   no page fault or allocation happens while the application runs; threads
 *   claim chunks of it with one atomic add, then fill them without any shared
 *   write, so threaded programs neither contend nor corrupt each other.
 * - A record is whole 64-byte lines written with movnti: a line never
 *   enters the cache (no read-for-ownership, nothing of the application's is
 *   evicted), which is what keeps the measurement from changing the measured.
 *   Five values fit in the first line; a call with more (cblas_dgemm has
 *   fourteen parameters) takes extension lines of seven values each, claimed
 *   with it from the thread's chunk, so a call costs one line unless it
 *   needs more.
 * - Each record says how many threads the process ran with at the call:
 *   OpenMP's team size for the next parallel region where libgomp is loaded
 *   (found with dlsym, so the runtime never links it), else the threads of
 *   the process, read from /proc/self/stat at most every few milliseconds.
 * - When the arena is exhausted the record is counted as dropped instead;
 *   nothing is ever written out of bounds.
 * - The writer uses only async-signal-safe calls (open/write/lseek/rename/
 *   clock_gettime), so the same code serves exit, fatal signals and flushes.
 * - Time is read through tdg_timing.h, as every tdg runtime reads it.
 */
#define _GNU_SOURCE
#include "tdg_instrument.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/membarrier.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* The serialised cycle-counter reads and the fallback clock, shared with
 * every other C runtime of tdg. */
#include "tdg_timing.h"

#if defined(__x86_64__)
#include <x86intrin.h> /* _mm_stream_si64, _mm_sfence */
#define TDG_HAVE_TSC 1
#else
#define TDG_HAVE_TSC 0
#endif

#ifndef TDG_DEFAULT_ROUTINES
#define TDG_DEFAULT_ROUTINES 1
#endif
#define TDG_DEFAULT_CALLS (1u << 18)
#define TDG_MAX_CHUNK 4096u
/* A thread's first claim; each later claim doubles, up to g.chunk, so many
 * short-lived threads (one call each) cannot strand the buffer in big,
 * mostly empty chunks while a thread that records a lot still claims rarely. */
#define TDG_FIRST_CHUNK 64u
#define TDG_VERSION 4u
#define TDG_HEADER_SIZE 80u

#define FLAG_NONTEMPORAL 1u
#define FLAG_TSC 2u
#define RECORD_VALID 1u
/* An extension line: never valid on its own, so a reader that meets one
 * where a record should start skips it. */
#define RECORD_EXTENSION 2u

/* The first line of a record. An extension line has the same layout with
 * other meanings: `start`, `ticks` and `values` hold seven more values (in
 * that order), `routine` repeats the record's routine, `thread` is the
 * extension's position (1, 2, ...), `nvalues` and `threads` are 0 and
 * `flags` is RECORD_EXTENSION. */
struct tdg_record {
    uint64_t start;
    uint64_t ticks;
    uint16_t routine;
    uint16_t thread;  /* the calling thread, numbered as threads first record */
    uint8_t nvalues;  /* values of the whole record, up to TDG_MAX_VALUES */
    uint8_t flags;
    uint16_t threads; /* threads the process ran with at the call; 0 unknown */
    int64_t values[5];
};
_Static_assert(sizeof(struct tdg_record) == 64, "a record line is one cache line");
#define TDG_HEAD_VALUES 5
#define TDG_EXT_VALUES 7
/* Longest record, in lines. */
#define TDG_MAX_LINES (1 + (TDG_MAX_VALUES - TDG_HEAD_VALUES + TDG_EXT_VALUES - 1) / TDG_EXT_VALUES)

/* Extension lines a record of `n` values needs. */
static inline unsigned extension_lines(unsigned n) {
    return n > TDG_HEAD_VALUES ? (n - TDG_HEAD_VALUES + TDG_EXT_VALUES - 1) / TDG_EXT_VALUES : 0;
}

struct tdg_routine_slot {
    char name[64];
    char params[256];
    char defined_in[512]; /* object the interposer forwards to; "" for markers */
    uint64_t address;     /* where that definition's code is; 0 for markers */
};

static struct {
    struct tdg_record *arena;
    uint64_t capacity;
    uint64_t chunk;
    _Atomic uint64_t next;
    _Atomic uint64_t dropped;
    _Atomic uint64_t dropped_by_routine[TDG_MAX_ROUTINES];
    _Atomic int nroutines;
    _Atomic uint32_t nthreads;
    atomic_flag registry_lock;
    _Atomic int writing;
    /* Set in a forked child: its arena still holds the parent's records, so
     * each chunk it claims is zeroed first (with streaming stores). */
    int recycled;
    /* The process's thread count: OpenMP's, when omp_get_max_threads is
     * loaded; else the count read from /proc at `threads_read_at`. */
    int (*_Atomic omp_max_threads)(void);
    _Atomic uint64_t threads_read_at;
    _Atomic uint32_t threads_cached;
    int membarrier_ok;
    struct tdg_routine_slot routines[TDG_MAX_ROUTINES];
    int disabled;
    int nontemporal;
    char path_pattern[4096];
    char path[4200];
    uint64_t tick0;
    uint64_t ns0;
    uint64_t timer_overhead;
    int status_fd; /* TDG_PROFILE_STATUS_FD: where a lost profile is reported to tdg */
    struct sigaction old_actions[NSIG];
} g = {.registry_lock = ATOMIC_FLAG_INIT, .status_fd = -1};

/* The fatal-signal handler writes the profile (a 4 KiB batch and the
 * header on its stack, ~12 KiB in all): on the stack that overflowed it
 * could not even start, so every thread that records gets an alternate
 * signal stack of this size (unless it has one of its own). */
#define TDG_ALT_STACK (64u * 1024u)
static __thread int t_alt_stack_done;

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static __thread struct tdg_record *t_cursor;
static __thread struct tdg_record *t_limit;
static __thread uint64_t t_chunk;
static __thread int t_thread = -1;

static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT,
                                    SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGXCPU};

/* Serialised on both ends (tdg_timing.h says why), so the routine's
 * interval holds its own instructions and no logging. */
uint64_t tdg_begin(void) {
#if TDG_HAVE_TSC
    return tdg_tsc_begin();
#else
    return tdg_fallback_ns();
#endif
}

static inline uint64_t read_end(void) {
#if TDG_HAVE_TSC
    return tdg_tsc_end();
#else
    return tdg_fallback_ns();
#endif
}

/* ---- environment ---------------------------------------------------- */

/* A positive decimal count from the environment, else `fallback`. Bad text
 * ("1e6", "-1", "abc", "0", out of range) is reported on one stderr line
 * instead of silently becoming the default. */
static uint64_t env_u64(const char *name, uint64_t fallback, const char *fallback_text) {
    const char *s = getenv(name);
    if (!s || !*s)
        return fallback;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    /* strtoull accepts leading blanks and a sign ("-1" wraps to 2^64-1). */
    if (s[0] < '0' || s[0] > '9' || *end != '\0' || v == 0 || errno == ERANGE) {
        if (fallback_text)
            fprintf(stderr,
                    "tdg_instrument: %s=\"%s\" is not a positive whole number; using %s.\n",
                    name, s, fallback_text);
        else
            fprintf(stderr,
                    "tdg_instrument: %s=\"%s\" is not a positive whole number; using %llu.\n",
                    name, s, (unsigned long long)fallback);
        return fallback;
    }
    return (uint64_t)v;
}

/* Appends the decimal `v` to `dst` at `*len` (async-signal-safe). */
static void append_u64(char *dst, size_t *len, size_t cap, uint64_t v) {
    char digits[24];
    int n = 0;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n && *len + 1 < cap)
        dst[(*len)++] = digits[--n];
    dst[*len] = '\0';
}

/* path_pattern with every "%p" replaced by the current pid. */
/* Appends the string `s` to `dst` at `*len` (async-signal-safe). */
static void append_str(char *dst, size_t *len, size_t cap, const char *s) {
    for (; s && *s && *len + 1 < cap; s++)
        dst[(*len)++] = *s;
    dst[*len] = '\0';
}

/* The text of `err`, from a static table: callable in a signal handler. */
static const char *error_text(int err) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
    const char *d = strerrordesc_np(err);
    if (d)
        return d;
#endif
    switch (err) {
    case ENOSPC: return "No space left on device";
    case EDQUOT: return "Disk quota exceeded";
    case EFBIG: return "File too large";
    case EIO: return "Input/output error";
    case EACCES: return "Permission denied";
    case EROFS: return "Read-only file system";
    case ENOENT: return "No such file or directory";
    default: return "write error";
    }
}

/* The profile could not be written: the program's stderr says so, and so
 * does the status descriptor tdg passes (its own pipe, which needs no
 * disk), so `tdg profile` reports the loss instead of a profile that
 * silently lacks this process. Async-signal-safe (write only). */
static void report_lost_profile(int err) {
    char line[sizeof g.path + 256];
    size_t len = 0, cap = sizeof line;
    append_str(line, &len, cap, "tdg_instrument: cannot write the profile ");
    append_str(line, &len, cap, g.path);
    append_str(line, &len, cap, ": ");
    append_str(line, &len, cap, error_text(err));
    append_str(line, &len, cap, "; the calls process ");
    append_u64(line, &len, cap, (uint64_t)getpid());
    append_str(line, &len, cap, " recorded are lost (free space where TDG_PROFILE_OUT points)\n");
    (void)!write(2, line, len);
    if (g.status_fd < 0)
        return;
    len = 0;
    append_str(line, &len, cap, "lost pid=");
    append_u64(line, &len, cap, (uint64_t)getpid());
    append_str(line, &len, cap, " errno=");
    append_u64(line, &len, cap, (uint64_t)err);
    append_str(line, &len, cap, " path=");
    append_str(line, &len, cap, g.path);
    append_str(line, &len, cap, "\n");
    (void)!write(g.status_fd, line, len);
}

static void expand_path(void) {
    size_t len = 0, cap = sizeof g.path;
    for (const char *p = g.path_pattern; *p && len + 1 < cap; p++) {
        if (p[0] == '%' && p[1] == 'p') {
            append_u64(g.path, &len, cap, (uint64_t)getpid());
            p++;
        } else {
            g.path[len++] = *p;
        }
    }
    g.path[len] = '\0';
}

/* ---- writing the profile --------------------------------------------- */

static int write_all(int fd, const void *buf, size_t len) {
    const char *p = buf;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static void put_u16(unsigned char *b, uint16_t v) { memcpy(b, &v, 2); }
static void put_u32(unsigned char *b, uint32_t v) { memcpy(b, &v, 4); }
static void put_u64(unsigned char *b, uint64_t v) { memcpy(b, &v, 8); }

static uint64_t ticks_per_second(void) {
#if TDG_HAVE_TSC
    /* The TSC rate is measured against CLOCK_MONOTONIC_RAW over the whole
     * run; a short run is stretched to 20 ms so the rate is good to ~1e-4. */
    uint64_t ns, tick;
    do {
        tdg_tsc_clock_pair(&tick, &ns);
    } while (ns - g.ns0 < 20000000u);
    return (uint64_t)((double)(tick - g.tick0) * 1e9 / (double)(ns - g.ns0));
#else
    return 1000000000u;
#endif
}

/* Writes the profile. `dying` is set by the fatal-signal handler and at exit:
 * if another write is in progress (an explicit tdg_flush on this or another
 * thread), it may never finish, since the process ends right after, so the
 * final write makes a complete profile of its own through a different
 * temporary name, renames it into place and removes the abandoned .part. */
static int write_profile(int dying) {
    if (!g.arena || atomic_load(&g.nroutines) == 0)
        return 0;
    int expected = 0;
    int owns_lock = atomic_compare_exchange_strong(&g.writing, &expected, 1);
    if (!owns_lock && !dying)
        return 0; /* another thread is writing a superset right now */
#if TDG_HAVE_TSC
    _mm_sfence(); /* make this thread's streamed records visible */
#endif
    atomic_thread_fence(memory_order_seq_cst);
    /* Other threads' movnti stores may still sit in their cores'
     * write-combining buffers; an expedited membarrier interrupts every core
     * running this process, which drains them. A record being stored at this
     * very moment can still be missed (its valid flag not yet visible). */
    if (g.membarrier_ok)
        (void)syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
    int rc = -1, err = 0;
    char tmp[sizeof g.path + 16];
    char abandoned[sizeof g.path + 16];
    size_t tl = 0;
    for (; g.path[tl] && tl + 10 < sizeof tmp; tl++)
        tmp[tl] = g.path[tl];
    memcpy(abandoned, tmp, tl);
    memcpy(abandoned + tl, ".part", 6);
    memcpy(tmp + tl, owns_lock ? ".part" : ".sig.part", owns_lock ? 6 : 10);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        err = errno;
        goto out;
    }

    unsigned char header[TDG_HEADER_SIZE];
    memset(header, 0, sizeof header);
    int nroutines = atomic_load(&g.nroutines);
    uint64_t used = atomic_load(&g.next);
    if (used > g.capacity)
        used = g.capacity;
    if (write_all(fd, header, sizeof header)) /* rewritten once counts are known */
        goto failed;
    for (int i = 0; i < nroutines; i++) {
        unsigned char b[8];
        uint16_t nl = (uint16_t)strlen(g.routines[i].name);
        uint16_t pl = (uint16_t)strlen(g.routines[i].params);
        put_u16(b, nl);
        if (write_all(fd, b, 2) || write_all(fd, g.routines[i].name, nl))
            goto failed;
        put_u16(b, pl);
        if (write_all(fd, b, 2) || write_all(fd, g.routines[i].params, pl))
            goto failed;
        uint16_t dl = (uint16_t)strlen(g.routines[i].defined_in);
        put_u16(b, dl);
        if (write_all(fd, b, 2) || write_all(fd, g.routines[i].defined_in, dl))
            goto failed;
        put_u64(b, g.routines[i].address);
        if (write_all(fd, b, 8))
            goto failed;
        put_u64(b, atomic_load(&g.dropped_by_routine[i]));
        if (write_all(fd, b, 8))
            goto failed;
    }
    struct tdg_record batch[64];
    int nb = 0;
    uint64_t lines = 0, unknown_routine = 0;
    for (uint64_t i = 0; i < used;) {
        const struct tdg_record *r = &g.arena[i];
        /* Unused tails of claimed chunks are still zero, hence invalid;
         * an extension line is never valid on its own. */
        if (!(r->flags & RECORD_VALID)) {
            i++;
            continue;
        }
        unsigned ext = extension_lines(r->nvalues);
        int whole = r->routine < nroutines && r->nvalues <= TDG_MAX_VALUES && ext < used - i;
        for (unsigned k = 1; whole && k <= ext; k++) {
            const struct tdg_record *e = &g.arena[i + k];
            whole = e->flags == RECORD_EXTENSION && e->routine == r->routine && e->thread == k;
        }
        if (!whole) {
            /* tdg_end rejects unknown ids and stores a record's extension
             * lines before its first line, so this is a damaged record (or
             * one another thread is storing at this instant): reported as
             * dropped, never silently lost. */
            unknown_routine++;
            i++;
            continue;
        }
        if (nb + 1 + (int)ext > 64) {
            if (write_all(fd, batch, (size_t)nb * sizeof batch[0]))
                goto failed;
            nb = 0;
        }
        for (unsigned k = 0; k <= ext; k++)
            batch[nb++] = g.arena[i + k];
        lines += 1 + ext;
        i += 1 + ext;
    }
    if (nb && write_all(fd, batch, (size_t)nb * sizeof batch[0]))
        goto failed;

    memcpy(header, "TDGPROF", 8);
    put_u32(header + 8, TDG_VERSION);
    put_u32(header + 12, TDG_HEADER_SIZE);
    put_u64(header + 16, ticks_per_second());
    put_u64(header + 24, lines);
    put_u64(header + 32, atomic_load(&g.dropped) + unknown_routine);
    put_u64(header + 40, g.capacity);
    put_u32(header + 48, (uint32_t)getpid());
    put_u32(header + 52, (uint32_t)nroutines);
    put_u32(header + 56, atomic_load(&g.nthreads));
    put_u16(header + 60, (uint16_t)((g.nontemporal ? FLAG_NONTEMPORAL : 0) |
                                    (TDG_HAVE_TSC ? FLAG_TSC : 0)));
    put_u16(header + 62, (uint16_t)sizeof(struct tdg_record));
    put_u64(header + 64, g.timer_overhead);
    if (lseek(fd, 0, SEEK_SET) != 0 || write_all(fd, header, sizeof header))
        goto failed;
    rc = 0;
    goto close;
failed:
    err = errno;
close:
    if (close(fd) != 0 && rc == 0) {
        rc = -1;
        err = errno;
    }
    if (rc == 0 && rename(tmp, g.path) != 0) {
        rc = -1;
        err = errno;
    }
    if (rc != 0)
        unlink(tmp);
    else if (!owns_lock)
        unlink(abandoned);
out:
    if (rc != 0)
        report_lost_profile(err);
    if (owns_lock)
        atomic_store(&g.writing, 0);
    return rc;
}

static void write_at_exit(void) { write_profile(1); }

static void on_fatal_signal(int sig) {
    int saved = errno;
    write_profile(1);
    /* Hand the signal back to whatever handled it before (normally the
     * default action: terminate, maybe dump core) and deliver it again. */
    sigaction(sig, &g.old_actions[sig], NULL);
    errno = saved;
    raise(sig);
}

static void install_signal_handlers(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fatal_signal;
    sigemptyset(&sa.sa_mask);
    /* SA_ONSTACK: on the thread's alternate stack when it has one, so a
     * stack overflow still leaves its profile. */
    sa.sa_flags = SA_NODEFER | SA_RESETHAND | SA_ONSTACK;
    for (size_t i = 0; i < sizeof fatal_signals / sizeof fatal_signals[0]; i++) {
        int sig = fatal_signals[i];
        struct sigaction old;
        if (sigaction(sig, NULL, &old) != 0)
            continue;
        /* Leave alone signals the program ignores or already handles. */
        if (old.sa_handler != SIG_DFL)
            continue;
        g.old_actions[sig] = old;
        sigaction(sig, &sa, NULL);
    }
}

/* Gives this thread an alternate signal stack for the fatal-signal
 * handler, unless it has one already (the program's own is kept). The
 * stack is never freed: a thread's exit leaves it mapped, 64 KiB a thread
 * that recorded. */
static void ensure_alt_stack(void) {
    if (t_alt_stack_done)
        return;
    t_alt_stack_done = 1;
    stack_t old;
    if (sigaltstack(NULL, &old) != 0 || !(old.ss_flags & SS_DISABLE))
        return;
    size_t size = TDG_ALT_STACK;
    void *mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        return;
    stack_t ss = {.ss_sp = mem, .ss_size = size, .ss_flags = 0};
    if (sigaltstack(&ss, NULL) != 0)
        munmap(mem, size);
}

/* fork() while another thread holds the routine registry's spin lock
 * would leave it held forever in the child (that thread does not exist
 * there), and the child's first profiled call would spin: the lock is
 * taken around fork and released on both sides. */
static void before_fork(void) {
    while (atomic_flag_test_and_set_explicit(&g.registry_lock, memory_order_acquire))
        ;
}

static void after_fork_in_parent(void) {
    atomic_flag_clear_explicit(&g.registry_lock, memory_order_release);
}

/* A forked child starts with an empty log of its own and its own file. */
static void after_fork_in_child(void) {
    atomic_flag_clear_explicit(&g.registry_lock, memory_order_release);
    atomic_store(&g.next, 0);
    atomic_store(&g.dropped, 0);
    for (int i = 0; i < TDG_MAX_ROUTINES; i++)
        atomic_store(&g.dropped_by_routine[i], 0);
    atomic_store(&g.nthreads, 0);
    atomic_store(&g.writing, 0);
    atomic_store(&g.threads_cached, 0);
    g.recycled = 1;
    t_cursor = t_limit = NULL;
    t_chunk = 0;
    t_thread = -1;
    expand_path();
}

static void init(void) {
    const char *off = getenv("TDG_PROFILE");
    if (off && strcmp(off, "0") == 0) {
        g.disabled = 1;
        return;
    }
    const char *out = getenv("TDG_PROFILE_OUT");
    if (!out || !*out)
        out = "tdg-profile.%p.tdgp";
    size_t n = strlen(out);
    if (n >= sizeof g.path_pattern)
        n = sizeof g.path_pattern - 1;
    memcpy(g.path_pattern, out, n);
    g.path_pattern[n] = '\0';
    expand_path();
    const char *status = getenv("TDG_PROFILE_STATUS_FD");
    if (status && *status) {
        char *end;
        long fd = strtol(status, &end, 10);
        if (*end == '\0' && fd > 2 && fd < 1 << 20 && fcntl((int)fd, F_GETFD) >= 0)
            g.status_fd = (int)fd;
    }
    const char *stores = getenv("TDG_PROFILE_STORES");
    g.nontemporal = !(stores && strcmp(stores, "cached") == 0);

    /* Fig. 2 of the POET paper sizes the log as routines x recorded values x
     * expected calls. Here the values live inside the record, which is one
     * 64-byte line whatever their number (a full line is what lets movnti
     * write it without a read-for-ownership), so the size is routines x
     * calls x one line. The routine count is not known here: routines
     * register lazily, on their first call; hence TDG_PROFILE_ROUTINES (or
     * -DTDG_DEFAULT_ROUTINES when building the runtime for N routines). */
    uint64_t records = env_u64("TDG_PROFILE_RECORDS", 0, "TDG_PROFILE_ROUTINES x TDG_PROFILE_CALLS");
    const char *too_big = "TDG_PROFILE_RECORDS";
    if (!records) {
        uint64_t routines = env_u64("TDG_PROFILE_ROUTINES", TDG_DEFAULT_ROUTINES, NULL);
        uint64_t calls = env_u64("TDG_PROFILE_CALLS", TDG_DEFAULT_CALLS, NULL);
        too_big = "TDG_PROFILE_ROUTINES x TDG_PROFILE_CALLS";
        if (__builtin_mul_overflow(routines, calls, &records))
            records = UINT64_MAX;
    }
    size_t bytes;
    /* Unchecked, a huge count wraps to a small mapping while the capacity
     * stays huge, and records would be written past its end. */
    if (__builtin_mul_overflow(records, (uint64_t)sizeof(struct tdg_record), &bytes) ||
        (uint64_t)bytes / sizeof(struct tdg_record) != records) {
        fprintf(stderr,
                "tdg_instrument: %s is too large (%llu records do not fit in memory); "
                "use e.g. TDG_PROFILE_RECORDS=1000000 (64 MB). Profiling is off.\n",
                too_big, (unsigned long long)records);
        g.disabled = 1;
        return;
    }
    void *arena = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (arena == MAP_FAILED) {
        static const char msg[] =
            "tdg_instrument: cannot allocate the profile buffer; lower "
            "TDG_PROFILE_RECORDS or TDG_PROFILE_CALLS. Profiling is off.\n";
        (void)!write(2, msg, sizeof msg - 1);
        g.disabled = 1;
        return;
    }
    g.capacity = records;
    /* Chunks small enough that a tiny buffer is still shared between
     * threads, large enough that claiming is rare. */
    g.chunk = records / 64;
    if (g.chunk < 1)
        g.chunk = 1;
    if (g.chunk > TDG_MAX_CHUNK)
        g.chunk = TDG_MAX_CHUNK;

    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 200; i++) {
        uint64_t t0 = tdg_begin();
        uint64_t t1 = read_end();
        if (t1 - t0 < best)
            best = t1 - t0;
    }
    g.timer_overhead = best;
#if TDG_HAVE_TSC
    tdg_tsc_clock_pair(&g.tick0, &g.ns0);
#endif
    g.membarrier_ok =
        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
    g.arena = arena;
    atexit(write_at_exit);
    pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);
    install_signal_handlers();
    ensure_alt_stack();
}

int tdg_routine(const char *name, const char *params) {
    pthread_once(&init_once, init);
    if (g.disabled || !name)
        return -1;
    while (atomic_flag_test_and_set_explicit(&g.registry_lock, memory_order_acquire))
        ;
    int n = atomic_load(&g.nroutines);
    int id = -1;
    for (int i = 0; i < n; i++)
        if (strncmp(g.routines[i].name, name, sizeof g.routines[i].name - 1) == 0) {
            id = i;
            break;
        }
    if (id < 0 && n < TDG_MAX_ROUTINES) {
        struct tdg_routine_slot *s = &g.routines[n];
        strncpy(s->name, name, sizeof s->name - 1);
        strncpy(s->params, params ? params : "", sizeof s->params - 1);
        id = n;
        atomic_store(&g.nroutines, n + 1);
    }
    atomic_flag_clear_explicit(&g.registry_lock, memory_order_release);
    return id;
}

void tdg_routine_defined_in(int id, const char *object) {
    if (id < 0 || id >= atomic_load(&g.nroutines) || !object)
        return;
    while (atomic_flag_test_and_set_explicit(&g.registry_lock, memory_order_acquire))
        ;
    struct tdg_routine_slot *s = &g.routines[id];
    strncpy(s->defined_in, object, sizeof s->defined_in - 1);
    atomic_flag_clear_explicit(&g.registry_lock, memory_order_release);
}

void tdg_routine_address(int id, uint64_t address) {
    if (id < 0 || id >= atomic_load(&g.nroutines))
        return;
    while (atomic_flag_test_and_set_explicit(&g.registry_lock, memory_order_acquire))
        ;
    g.routines[id].address = address;
    atomic_flag_clear_explicit(&g.registry_lock, memory_order_release);
}

/* Zeroes lines [from, to) of the arena without reading them into the
 * cache: a forked child's arena holds the parent's records. */
static void zero_lines(struct tdg_record *from, struct tdg_record *to) {
    for (long long *d = (long long *)from; d < (long long *)to; d++) {
#if TDG_HAVE_TSC
        _mm_stream_si64(d, 0);
#else
        *d = 0;
#endif
    }
}

/* Claims a chunk of at least `lines` contiguous lines for this thread. */
static int claim_chunk(uint64_t lines) {
    /* Once full, stay off the shared counter (and never let it wrap). */
    if (atomic_load_explicit(&g.next, memory_order_relaxed) >= g.capacity)
        return 0;
    uint64_t want = t_chunk ? t_chunk * 2 : TDG_FIRST_CHUNK;
    if (want > g.chunk)
        want = g.chunk;
    if (want < lines)
        want = lines;
    uint64_t start = atomic_fetch_add(&g.next, want);
    if (start >= g.capacity || g.capacity - start < lines)
        return 0;
    t_chunk = want;
    uint64_t end = start + want;
    if (end > g.capacity)
        end = g.capacity;
    if (t_thread < 0) {
        t_thread = (int)atomic_fetch_add(&g.nthreads, 1);
        ensure_alt_stack();
    }
    t_cursor = g.arena + start;
    t_limit = g.arena + end;
    if (g.recycled)
        zero_lines(t_cursor, t_limit);
    return 1;
}

static inline void store_record(struct tdg_record *dst, const struct tdg_record *src) {
#if TDG_HAVE_TSC
    if (g.nontemporal) {
        long long *d = (long long *)dst;
        const long long *s = (const long long *)src;
        for (int i = 0; i < 8; i++)
            _mm_stream_si64(d + i, s[i]);
        return;
    }
#endif
    *dst = *src;
}

/* Threads of this process, from field 20 of /proc/self/stat; 0 when it
 * cannot be read (no /proc). */
static uint32_t threads_in_process(void) {
    char buf[1024];
    int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    /* The command name (field 2) may hold spaces and parentheses: count
     * fields from the last ')'. */
    char *p = strrchr(buf, ')');
    for (int field = 2; p && field < 20; field++)
        p = strchr(p + 1, ' ');
    if (!p)
        return 0;
    unsigned long v = strtoul(p + 1, NULL, 10);
    return v > 0xffff ? 0xffff : (uint32_t)v;
}

/* Re-read the process's thread count at most this often (in ticks: about
 * 6 ms at 2.6 GHz, 17 ms where ticks are nanoseconds): reading /proc costs
 * microseconds, a call may cost nanoseconds. */
#define TDG_THREADS_REFRESH (1ull << 24)

/* How many threads the process runs with at this call (tick `now`); 0
 * when neither OpenMP nor /proc can say. */
static uint16_t threads_now(uint64_t now) {
    int (*omp)(void) = atomic_load_explicit(&g.omp_max_threads, memory_order_relaxed);
    if (!omp) {
        /* threads_cached is the count plus one: 0 means never read. */
        uint64_t last = atomic_load_explicit(&g.threads_read_at, memory_order_relaxed);
        uint32_t cached = atomic_load_explicit(&g.threads_cached, memory_order_relaxed);
        if (cached && now - last < TDG_THREADS_REFRESH)
            return (uint16_t)(cached - 1);
        /* One thread refreshes; the others keep the cached count. */
        if (cached && !atomic_compare_exchange_strong(&g.threads_read_at, &last, now))
            return (uint16_t)(cached - 1);
        atomic_store(&g.threads_read_at, now);
        /* libgomp may be loaded late (dlopen), so it is looked for again at
         * every refresh until found. */
        omp = (int (*)(void))dlsym(RTLD_DEFAULT, "omp_get_max_threads");
        if (!omp) {
            uint32_t count = threads_in_process();
            atomic_store_explicit(&g.threads_cached, count + 1, memory_order_relaxed);
            return (uint16_t)count;
        }
        atomic_store_explicit(&g.omp_max_threads, omp, memory_order_relaxed);
    }
    int n = omp();
    return n <= 0 ? 0 : n > 0xffff ? 0xffff : (uint16_t)n;
}

void tdg_end(int id, uint64_t t0, int n, const int64_t *values) {
    uint64_t t1 = read_end();
    if (id < 0 || !g.arena)
        return;
    if (id >= atomic_load_explicit(&g.nroutines, memory_order_relaxed)) {
        /* Not an id tdg_routine handed out: the record could not be
         * attributed, so it counts as dropped rather than vanishing. */
        atomic_fetch_add_explicit(&g.dropped, 1, memory_order_relaxed);
        return;
    }
    if (n > TDG_MAX_VALUES)
        n = TDG_MAX_VALUES;
    if (n < 0 || !values)
        n = 0;
    unsigned ext = extension_lines((unsigned)n);
    /* A record's lines are contiguous: what is left of the chunk stays
     * zero (skipped by the writer) when the record does not fit. */
    if ((uint64_t)(t_limit - t_cursor) < 1 + ext && !claim_chunk(1 + ext)) {
        atomic_fetch_add_explicit(&g.dropped, 1, memory_order_relaxed);
        if (id < TDG_MAX_ROUTINES)
            atomic_fetch_add_explicit(&g.dropped_by_routine[id], 1, memory_order_relaxed);
        return;
    }
    struct tdg_record r;
    /* Extension lines first, so a record whose first line is seen whole
     * has its values (the writer checks them in any case). */
    for (unsigned k = 1; k <= ext; k++) {
        int64_t v[TDG_EXT_VALUES];
        for (int j = 0; j < TDG_EXT_VALUES; j++) {
            int at = TDG_HEAD_VALUES + (int)(k - 1) * TDG_EXT_VALUES + j;
            v[j] = at < n ? values[at] : 0;
        }
        r.start = (uint64_t)v[0];
        r.ticks = (uint64_t)v[1];
        r.routine = (uint16_t)id;
        r.thread = (uint16_t)k;
        r.nvalues = 0;
        r.flags = RECORD_EXTENSION;
        r.threads = 0;
        memcpy(r.values, v + 2, sizeof r.values);
        store_record(t_cursor + k, &r);
    }
    r.start = t0;
    r.ticks = t1 - t0;
    r.routine = (uint16_t)id;
    r.thread = (uint16_t)t_thread;
    r.nvalues = (uint8_t)n;
    r.flags = RECORD_VALID;
    r.threads = threads_now(t1);
    for (int i = 0; i < TDG_HEAD_VALUES; i++)
        r.values[i] = i < n ? values[i] : 0;
    store_record(t_cursor, &r);
    t_cursor += 1 + ext;
}

int tdg_flush(void) {
    if (!g.arena)
        return 0;
    return write_profile(0);
}

uint64_t tdg_dropped(void) { return atomic_load(&g.dropped); }
