/*
 * tdg_runtime.h: the measurement machinery shared by every generated timing
 * driver, and the steps of its main that do not depend on the spec. Plain C,
 * copied unchanged into every driver by tdg (from templates/tdg_runtime.h).
 *
 * The methods follow Whaley & Castaldo, "Achieving accurate and
 * context-sensitive timing for code optimization" (the ATLAS timers):
 * serialised cycle-accurate timers converted without round-off, min/median
 * sample selection, single-call flushing (read a large buffer or clflush),
 * self-flushing working sets for multi-call timing, aligned/misaligned
 * allocation, lazy-page-zeroing and instruction-load avoidance.
 */
#ifndef TDG_RUNTIME_H
#define TDG_RUNTIME_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

/* The serialised cycle-counter reads, the fallback clock, the invariance
 * check and the empty-interval cost, shared with every other C runtime of
 * tdg; copied beside this file. */
#include "tdg_timing.h"

enum tdg_timer_method { TDG_TIMER_WALL = 0, TDG_TIMER_CYCLE = 1, TDG_TIMER_CPU = 2 };
enum tdg_flush_method { TDG_FLUSH_NONE = 0, TDG_FLUSH_READ = 1, TDG_FLUSH_CLFLUSH = 2 };

/* ------------------------------------------------------------------ timers */

/* Raw timer reading in the method's own unit (cycles or nanoseconds). */
static inline uint64_t tdg_timer_begin(enum tdg_timer_method m)
{
    if (m == TDG_TIMER_CYCLE)
        return tdg_tsc_begin();
    return tdg_clock_ns(m == TDG_TIMER_CPU ? CLOCK_PROCESS_CPUTIME_ID : TDG_FALLBACK_CLOCK);
}

static inline uint64_t tdg_timer_end(enum tdg_timer_method m)
{
    if (m == TDG_TIMER_CYCLE)
        return tdg_tsc_end();
    return tdg_clock_ns(m == TDG_TIMER_CPU ? CLOCK_PROCESS_CPUTIME_ID : TDG_FALLBACK_CLOCK);
}

struct tdg_timer {
    enum tdg_timer_method method;
    double ns_per_tick;       /* 1.0 for wall and CPU time */
    double tsc_hz;            /* 0 unless the cycle timer is in use */
    const char *tsc_hz_source; /* "cpuid-0x15", "calibrated" or "" */
    double overhead_ns;       /* min cost of an empty begin/end pair */
    double resolution_ns;     /* smallest non-zero difference observed */
};

/*
 * Chooses and characterises the timer. A cycle timer request falls back to
 * wall time (with a message in `why`) when the TSC is missing, not invariant
 * (it would stop or change rate with power states) or not x86.
 */
int tdg_timer_setup(struct tdg_timer *t, enum tdg_timer_method requested, char *why, size_t why_len);

/* Converts an integer tick difference to nanoseconds. */
static inline double tdg_ticks_to_ns(const struct tdg_timer *t, uint64_t ticks)
{
    return (double)ticks * t->ns_per_tick;
}

/* -------------------------------------------------------------- allocation */

/*
 * Memory aligned to `align` bytes but, when `misalign` > `align`, never
 * aligned to `misalign` (after the paper's Figure 7). Zero-filled through
 * calloc, so large blocks are lazily zeroed pages until touched: see
 * tdg_touch_pages. Free with tdg_afree only.
 */
void *tdg_amalloc(size_t size, size_t align, size_t misalign);
void tdg_afree(void *user);

/*
 * One operand's storage: a contiguous block (Vector, Matrix, static) or a
 * row-pointer array with one block per row (Array2D). `user` is what the
 * routine receives.
 */
struct tdg_buf {
    void *user;
    size_t rows;       /* 1 unless row-pointer */
    size_t row_bytes;  /* bytes in each block */
    int row_pointers;  /* Array2D */
    int is_static;     /* storage not owned */
    void **row;        /* the blocks: row[r] */
};

int tdg_buf_alloc(struct tdg_buf *b, size_t rows, size_t row_bytes, int row_pointers, size_t align,
                  size_t misalign);
void tdg_buf_wrap_static(struct tdg_buf *b, void *storage, size_t bytes);
void tdg_buf_free(struct tdg_buf *b);
size_t tdg_buf_bytes(const struct tdg_buf *b);
void tdg_buf_copy(struct tdg_buf *dst, const struct tdg_buf *src);
/*
 * Orders an operand's working-set copies by address, lowest first, so that
 * walking the sets from the last index down really moves from greater to
 * lesser addresses whatever order the allocator handed the blocks out in
 * (heap blocks come out ascending, mmap'd ones descending).
 */
void tdg_bufs_sort_by_address(struct tdg_buf *bufs, int n);
/* Reads every cache line of the operand (keeps it cache resident). */
double tdg_buf_read(const struct tdg_buf *b);
/* Writes every page in place (value-preserving) so no page fault is left. */
void tdg_buf_touch_pages(struct tdg_buf *b);
/* Evicts the operand's lines from every cache level (x86 clflush/clflushopt). */
void tdg_buf_clflush(const struct tdg_buf *b);

/* ---------------------------------------------------------------- flushing */

struct tdg_flusher {
    enum tdg_flush_method method;
    size_t bytes;         /* read-flush buffer size */
    char *area;           /* read-flush buffer (written, so not the shared zero page) */
    size_t pages;         /* pages of tlb_area touched once each (0: none) */
    size_t page_bytes;
    char *tlb_area;       /* base-size pages, one line of each written */
    int use_clflushopt;   /* cpuid.7.EBX[23] */
    int all_cpus;         /* also flush every other CPU's private caches */
    int clflush_operands; /* a read flush meant to reach memory also clflushes
                           * the flushed operands (see tdg_prepare_single_call) */
    int evicts;           /* after the clflush it reads the eviction sizes,
                           * not the full flush (see tdg_flusher_init) */
    int ncpus;
    int cpu_seen[1024];   /* CPUs the per-CPU flush threads really ran on */
    void *threads;        /* opaque per-CPU flush thread state */
    double prepare_ns;    /* wall time of the single-call cache preparations */
    long prepared;        /* how many there were */
};

struct tdg_options;
/* The flush the options ask for: a read flush meant to reach memory on x86
 * clflushes the flushed operands and then reads the eviction sizes
 * (--evict-kib, --evict-pages) when it has them, else the full flush size. */
int tdg_flusher_init(struct tdg_flusher *f, const struct tdg_options *o, char *err, size_t err_len);
/* Read-flush: sums a buffer larger than the target cache (and touches the
 * TLB pages), on this CPU and, with all_cpus, on every CPU at once. Returns
 * the sum, which callers sink. */
double tdg_flush_read(struct tdg_flusher *f);
void tdg_flusher_free(struct tdg_flusher *f);
/* Stores that the compiler must keep, to sink values that prove work was done. */
extern volatile double tdg_sink;

/*
 * Hot code after a cold-data flush. A read flush (or the other tenants of a
 * shared cache) evicts the routine's instructions with its operands, but in
 * the application a routine called again and again has its code cached
 * while its data may well not be. Reading the program's own executable
 * segment as data (the routine and the driver are linked into it) brings
 * those lines back into the unified L2/L3, from which instruction fetch
 * refills L1i in a few cycles; no operand byte is touched, so the operands
 * stay exactly as cold as the flush left them. Code in shared libraries the
 * routine calls (libm, an OpenMP runtime) is not re-warmed. Returns a sum
 * the caller sinks.
 */
double tdg_warm_code(void);
/*
 * Evict the same code to memory by address (--cold-code): a flush that
 * evicts only the private caches leaves the instructions in the last level,
 * which would make "cold code" a last-level hit rather than a trip from
 * memory.
 */
void tdg_clflush_code(void);
/* Bytes tdg_warm_code reads (the executable segment(s), capped). */
size_t tdg_code_bytes(void);

/* ------------------------------------------------------------ environment */

/* Call first thing in main: records the CPUs the process may use, which
 * --flush-all-cpus flushes even after --pin narrows the driver itself. */
void tdg_remember_usable_cpus(void);
int tdg_pin_to_cpu(int cpu, char *err, size_t err_len);
int tdg_current_cpu(void);
int tdg_online_cpus(void);

/*
 * Everything the report warns about, one warning per line in the order they
 * arose. A warning that does not fit whole is dropped rather than cut.
 */
struct tdg_warnings {
    char text[4096];
};
void tdg_warnings_init(struct tdg_warnings *w);
void tdg_warnings_add(struct tdg_warnings *w, const char *format, ...) __attribute__((format(printf, 2, 3)));

/* Adds one warning each for governor, turbo, load, unpinned. */
void tdg_environment_warnings(struct tdg_warnings *w, int pinned);
/* The same, reading sysfs/procfs under `root` ("" for the real ones). */
void tdg_environment_warnings_in(const char *root, struct tdg_warnings *w, int pinned);
long tdg_minor_faults(void);

/* ------------------------------------------------------ random data, stats */

void tdg_seed(uint64_t seed);
uint64_t tdg_rand_u64(void);
/* Uniform in [-0.5, 0.5): mixed sign keeps repeated accumulations bounded. */
double tdg_urand(void);
/* Uniform in [lo, hi] for integers, [lo, hi) for floating point. */
long long tdg_rand_int(long long lo, long long hi);
double tdg_rand_real(double lo, double hi);
int tdg_fill_from_file(void *dst, size_t bytes, const char *path, char *err, size_t err_len);

struct tdg_stats {
    double min, median, mean, max, stddev;
};
void tdg_stats_compute(const double *x, int n, struct tdg_stats *s);
/* The reported estimator of x[0..n): its minimum, or its median. */
double tdg_estimate(const double *x, int n, int median);
/*
 * Stability of the estimator: the relative difference between the estimator
 * over the first half of the samples and over the second half, each spread
 * over half the measuring time. A figure that still moves from one half of
 * the run to the other has not settled (a machine that alternates between
 * fast and slow states shows up here). Negative when n < 4.
 */
double tdg_halves_disagreement(const double *x, int n, int median);

/*
 * When to stop taking samples. With a fixed count (--samples) exactly
 * min_samples are taken. Otherwise at least min_samples, spread over at
 * least min_time_ms of wall time, until the estimator over the first and
 * the second half of the samples agree within stable_pct per cent; at
 * max_time_ms sampling stops anyway and the result is unstable. A fixed
 * count is judged by the same rule once taken.
 */
struct tdg_sampler {
    double *ns;         /* per-call time of every sample */
    int *cpu;           /* CPU each sample ended on */
    int n, cap;
    int min_samples, fixed, median;
    double min_time_ms, max_time_ms, stable_pct;
    uint64_t start;     /* CLOCK_MONOTONIC_RAW when sampling began */
    int next_check;     /* the halves are compared at geometric steps */
    double elapsed_ms;  /* wall time the samples took */
    double spread;      /* tdg_halves_disagreement of all samples (<0: too few) */
    int stable;
    char why[512];      /* why not stable, and what to do */
};
int tdg_sampler_init(struct tdg_sampler *s, int min_samples, int fixed, int median, double min_time_ms,
                     double max_time_ms, double stable_pct);
/* Records one sample; returns 1 when sampling is over (then spread, stable
 * and why are final). */
int tdg_sampler_add(struct tdg_sampler *s, double ns, int cpu);
void tdg_sampler_free(struct tdg_sampler *s);

/* JSON helpers for the report line. */
void tdg_json_string(FILE *out, const char *s);
void tdg_json_double(FILE *out, double v);

/* ================================================================== *
 * The driver's steps that do not depend on the spec. The generated main
 * calls them in the order of the methodology; what they need from the
 * routine (timing a block of calls, allocating working sets) it passes in.
 * ================================================================== */

/* ----------------------------------------------------------------- options */

#define TDG_MAX_THREADS 1024

struct tdg_options {
    enum tdg_timer_method timer;
    int samples, samples_fixed, median, pin, flush_all_cpus, touch, dummy, guard, verify, json, describe;
    int threads;             /* the routine's team size (1: serial) */
    int first_touch_threads; /* operand pages first written by the threads' CPUs */
    int pins[TDG_MAX_THREADS], npins; /* --pin list; pin is pins[0] or -1 */
    int hot_code, min_interval_given;
    int flush_to_memory; /* the flush size is the full flush, not a chosen one */
    enum tdg_flush_method flush;
    long long flush_kib, min_interval_ns, reps, max_flush_mib, min_time_ms, max_time_ms;
    long long evict_kib, evict_pages; /* after the operands' clflush (tdg_flusher_init) */
    double tol, stable_pct;
};

/* The defaults that are the same for every spec; the driver then sets the
 * spec's and the machine's (timer, samples, flush, interval, ...). */
void tdg_options_init(struct tdg_options *o);
void tdg_usage(FILE *out, const struct tdg_options *defaults);
/* Parses argv over `defaults`; --help prints the usage and exits. Returns -1
 * (after one line on stderr) on a bad option. */
int tdg_parse_options(int argc, char **argv, const struct tdg_options *defaults, struct tdg_options *o);
/* "0,1,3" into o->pins (and o->pin, the first); "" is no pinning. -1 on a
 * malformed list. */
int tdg_parse_cpu_list(const char *text, struct tdg_options *o);
const char *tdg_timer_name(enum tdg_timer_method m);
const char *tdg_flush_name(enum tdg_flush_method m);

/* ---------------------------------------------------------- crash reporting */

/* What the driver is doing now ("timing sample 3 (16 call(s) of ddot)"). If
 * the routine crashes, the signal handler prints it, so the report can say
 * which call died (warm-up, timing sample k, verification). With
 * TDG_TRACE_PHASES set every phase is also printed as it starts. */
void tdg_phase(const char *what);
/* Installs the handlers that print the phase on SIGSEGV, SIGFPE, SIGBUS,
 * SIGILL and SIGABRT before dying of the signal. */
void tdg_report_crashes(void);

/* ---------------------------------------------------- timer and repetitions */

/* Times `reps` back-to-back calls of the routine as one interval (raw ns).
 * Generated per routine: the calls are the spec's. */
typedef double (*tdg_block_timer)(const struct tdg_timer *t, long long reps);
/* The least of several such intervals (see tdg_least_block in the driver). */
typedef double (*tdg_least_block_timer)(const struct tdg_timer *t, long long reps, int restore, double enough_ns);

/* Sets t->overhead_ns: the least of 2000 `time_block` intervals with zero
 * calls. Called through the pointer from this translation unit, so the
 * driver's compiler cannot make a zero-call copy of the timing path: the
 * overhead is that of the code every sample runs. */
void tdg_measure_timer_overhead(struct tdg_timer *t, tdg_block_timer time_block);
/* Sets o->min_interval_ns for the timer in use unless given; `why` says
 * where the figure comes from when it is derived here. */
void tdg_min_interval_for_timer(struct tdg_options *o, const struct tdg_timer *t, char *why, size_t why_len);
/* The repetition count one call's least time `one_call_ns` calls for: the
 * forced --reps, 1, or 2 to start doubling from. */
long long tdg_reps_after_one_call(const struct tdg_options *o, double one_call_ns);
/* Working sets for self-flushing R-call samples, each `set_bytes` of
 * flushed operands (1: no self-flushing). */
long long tdg_self_flushing_sets(const struct tdg_options *o, int flush_cpus, size_t set_bytes, struct tdg_warnings *w);
/* Doubles `reps` until one interval of that many calls reaches the minimum. */
long long tdg_double_reps(const struct tdg_timer *t, long long reps, long long min_interval_ns, tdg_least_block_timer least_block);
/* "single-call", "self-flushing" or "repeated". */
const char *tdg_mode_name(long long reps, int working_sets);

/* ------------------------------------------------------------------ report */

/* One operand as the report lists it. */
struct tdg_operand_report {
    const char *name;   /* NULL ends a table */
    int align, misalign;
    const char *cache;  /* "flushed", "warm", ... as the model says */
    size_t bytes;       /* one copy, row pointers included */
    size_t address;     /* of working set 0 */
    int copies;         /* working sets with their own copy */
};

/* What one run measured, filled by the driver's main and printed here. */
struct tdg_result {
    int json_version;           /* the JSON contract's version (docs/drivers.md) */
    const char *routine;
    const struct tdg_options *options;
    const struct tdg_timer *timer;
    const struct tdg_flusher *flusher;
    const struct tdg_sampler *sampler;
    char min_interval_why[160]; /* where a derived minimum interval comes from */
    long long reps;
    int working_sets;
    struct tdg_stats stats;
    double reported_ns;         /* the minimum or the median of the samples */
    double flops_per_call;
    long page_faults;           /* inside timed intervals */
    int code_page_offset;       /* the routine's address modulo 4096; -1 unknown */
    const struct tdg_team *team; /* the routine's threads */
    const char *overflow_guard; /* what the guard did, or "off" */
    int outputs_finite;
    long outputs_denormal;      /* values that drifted into denormals while timed */
    const struct tdg_operand_report *operands;
    const char *verification;   /* "passed", "failed" or "skipped" */
    char verification_detail[1024];
    struct tdg_warnings warnings;
    double sink;
};

/* An empty result reading the run's options, timer, flusher and sampler as
 * they are when it is reported. */
void tdg_result_init(struct tdg_result *r, int json_version, const char *routine, const struct tdg_options *o,
                     const struct tdg_timer *t, const struct tdg_flusher *f, const struct tdg_sampler *s);
/* Sets stats and reported_ns from the sampler. */
void tdg_result_summarise(struct tdg_result *r);
/* The warnings about the timed outputs and the figure itself (denormals,
 * overflow, page faults, a figure near the timer's step), after the rest. */
void tdg_result_warnings(struct tdg_result *r);
/* One JSON object on one line: the contract tdg run reads. */
void tdg_report_json(FILE *out, const struct tdg_result *r);
/* The same for a person. */
void tdg_report_text(FILE *out, const struct tdg_result *r);

/* ----------------------------------------------------------------- threads */

/*
 * A parallel routine's threads, after the ATLAS timing paper's section on
 * shared-memory parallel timing: a known team size, each thread on its own
 * CPU (so the flush and the first touch reach the caches and memory the
 * threads really use), the team started before timing, and the number of
 * threads that ran the timed calls measured, not assumed.
 */
struct tdg_team {
    int threads;                 /* asked for */
    int cpus[TDG_MAX_THREADS];   /* thread k runs on cpus[k] */
    int ncpus;                   /* 0: unpinned */
    int openmp;                  /* the driver was built with OpenMP */
    int omp_team;                /* omp_get_num_threads() in the start-up region; 0 without OpenMP */
    int pinned_others;           /* other runtimes' threads pinned after the warm-up call */
    int first_touch;             /* operand pages are first written by the threads' CPUs */
    long touch_faults[TDG_MAX_THREADS]; /* page faults each thread took while first-touching */
    int ran;                     /* threads that ran during the timed calls, measured */
    unsigned long long self_cpu_ns; /* the calling thread's CPU time when sampling started */
    double busy_ms[TDG_MAX_THREADS]; /* CPU time of each such thread while sampling */
    /* CPU time of the process's threads when sampling started */
    int ntasks;
    int tid[TDG_MAX_THREADS];
    unsigned long long cpu_ns[TDG_MAX_THREADS];
};

/* The environment other runtimes read at start-up (OMP_NUM_THREADS,
 * OPENBLAS_NUM_THREADS, MKL_NUM_THREADS, BLIS_NUM_THREADS) set to `threads`;
 * when it said otherwise the driver starts again with it (execv of itself),
 * because those runtimes size their pools before main. Call before anything
 * else in main; returns only if no restart was needed or possible. */
void tdg_threads_environment(int threads, char **argv);
/* Chooses each thread's CPU (the --pin list, else the first CPUs of the
 * affinity mask when threads > 1), pins the calling thread to the first and
 * sets OpenMP's team size. -1 with `err` set when the threads cannot each
 * have a CPU of their own. */
int tdg_team_init(struct tdg_team *t, const struct tdg_options *o, char *err, size_t err_len);
/* Starts the team before anything is timed: one parallel region in which
 * each OpenMP thread pins itself to its CPU and the team's size is read. */
void tdg_team_start(struct tdg_team *t);
/* After the warm-up call: pins the threads another runtime (OpenBLAS's
 * pthreads, say) started, one per remaining CPU, round robin. */
void tdg_team_pin_other_threads(struct tdg_team *t);
/* Writes the buffer's pages, thread k its k-th contiguous share (the split
 * of a static schedule), so each page is first touched on the CPU of the
 * thread that uses it. */
void tdg_team_first_touch(struct tdg_team *t, struct tdg_buf *b);
/* The same split for the outputs' restore and the warm operands' re-read
 * before a sample: done by the main thread alone, they would pull every
 * thread's share into the main thread's caches, which no call of the
 * routine leaves there. One thread: tdg_buf_copy and tdg_buf_read. */
void tdg_team_copy(struct tdg_team *t, struct tdg_buf *dst, const struct tdg_buf *src);
double tdg_team_read(struct tdg_team *t, const struct tdg_buf *b);
/* Records the CPU time of the process's threads (tdg's own helpers, named
 * "tdg-*", left out) before the samples ... */
void tdg_team_sampling_starts(struct tdg_team *t);
/* ... and counts, after them, the threads whose CPU time grew by at least a
 * quarter of `timed_ns`, the least time the timed calls took; the calling
 * thread always counts. Sets t->ran and t->busy_ms. */
void tdg_team_sampling_ends(struct tdg_team *t, double timed_ns);

#endif /* TDG_RUNTIME_H */
