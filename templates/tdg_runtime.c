/*
 * tdg_runtime.c: timers, aligned allocation, cache flushing, environment
 * checks and statistics for tdg timing drivers, and the spec-independent
 * steps of a driver's main (options, repetition choice, working-set sizing,
 * the report). Plain C, copied unchanged into every driver by tdg from
 * templates/tdg_runtime.c.
 *
 * Kept in its own translation unit on purpose: the read-flush sums a buffer
 * whose contents the compiler cannot see from the driver, so it cannot fold
 * the flush loop away (the paper's advice for defeating dead-code removal).
 */
#define _GNU_SOURCE
#include "tdg_runtime.h"

#include <errno.h>
#include <link.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>


volatile double tdg_sink;

/* ------------------------------------------------------------------ timers */

/* Wall-time wrappers the pair-cost loop can take by address. */
static uint64_t wall_ns(void)
{
    return tdg_clock_ns(TDG_FALLBACK_CLOCK);
}

static uint64_t cpu_ns(void)
{
    return tdg_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
}

/* The TSC rate measured over three busy 2 ms windows; the median, so one
 * preempted window cannot skew it. Both clocks run through a preemption
 * inside a window; what errs is the pairing of the reads at its ends (tens
 * of ns), under 1e-4 of 2 ms: far below any reported figure's uncertainty.
 * Every driver process pays the windows before its first sample, and a
 * tuner starts thousands. */
static double tsc_hz_calibrated(void)
{
    double rates[3];
    int i, j;
    for (i = 0; i < 3; i++)
        rates[i] = tdg_tsc_hz_measured(2000000ull);
    for (i = 0; i < 3; i++)
        for (j = i + 1; j < 3; j++)
            if (rates[j] < rates[i]) {
                double t = rates[i];
                rates[i] = rates[j];
                rates[j] = t;
            }
    return rates[1];
}

int tdg_timer_setup(struct tdg_timer *t, enum tdg_timer_method requested, char *why, size_t why_len)
{
    struct tdg_pair_cost cost;
    why[0] = '\0';
    t->method = requested;
    t->ns_per_tick = 1.0;
    t->tsc_hz = 0.0;
    t->tsc_hz_source = "";
    if (requested == TDG_TIMER_CYCLE) {
        const char *unusable = tdg_tsc_unusable_reason();
        if (unusable != NULL) {
            snprintf(why, why_len, "%s; using wall time", unusable);
            t->method = TDG_TIMER_WALL;
        } else {
            double hz = tdg_tsc_hz_documented();
            t->tsc_hz_source = "cpuid-0x15";
            if (hz <= 0.0) {
                hz = tsc_hz_calibrated();
                t->tsc_hz_source = "calibrated";
            }
            t->tsc_hz = hz;
            t->ns_per_tick = 1e9 / hz;
        }
    }
    /* The empty-interval cost is subtracted from every timed interval. */
    if (t->method == TDG_TIMER_CYCLE)
        cost = tdg_pair_cost(tdg_tsc_begin, tdg_tsc_end, 2000);
    else if (t->method == TDG_TIMER_CPU)
        cost = tdg_pair_cost(cpu_ns, cpu_ns, 2000);
    else
        cost = tdg_pair_cost(wall_ns, wall_ns, 2000);
    t->overhead_ns = tdg_ticks_to_ns(t, cost.min);
    t->resolution_ns = cost.finest == UINT64_MAX ? 0.0 : tdg_ticks_to_ns(t, cost.finest);
    if (t->method == TDG_TIMER_CPU) {
        /* CPU time advances in scheduler-accounting steps; find the step. */
        uint64_t a = tdg_timer_begin(t->method), b;
        do {
            b = tdg_timer_end(t->method);
        } while (b == a);
        if (tdg_ticks_to_ns(t, b - a) > t->resolution_ns)
            t->resolution_ns = tdg_ticks_to_ns(t, b - a);
    }
    return 0;
}

/* -------------------------------------------------------------- allocation */

void *tdg_amalloc(size_t size, size_t align, size_t misalign)
{
    const size_t ps = sizeof(void *);
    size_t base, user, slot, total;
    void *orig;
    if (align == 0)
        align = 1;
    /* A negative size cast to size_t is huge: refuse it instead of letting
     * the padding below wrap round to a small block. */
    if (size > SIZE_MAX / 2 || align > SIZE_MAX / 8)
        return NULL;
    /* Room for the original pointer (one pointer, pointer-aligned) plus the
     * shift to reach alignment, plus one more `align` when we may have to
     * step off a forbidden boundary. */
    total = size + 2 * ps + align + (misalign > align ? align : 0);
    orig = calloc(1, total);
    if (orig == NULL)
        return NULL;
    base = (size_t)orig;
    user = base + 2 * ps;
    if (user % align)
        user += align - user % align;
    if (misalign > align && user % misalign == 0)
        user += align; /* still aligned to align, now not to misalign */
    slot = user - ps;
    slot -= slot % ps;
    *(void **)slot = orig;
    return (void *)user;
}

void tdg_afree(void *user)
{
    const size_t ps = sizeof(void *);
    size_t slot;
    if (user == NULL)
        return;
    slot = (size_t)user - ps;
    slot -= slot % ps;
    free(*(void **)slot);
}

int tdg_buf_alloc(struct tdg_buf *b, size_t rows, size_t row_bytes, int row_pointers, size_t align,
                  size_t misalign)
{
    size_t r;
    memset(b, 0, sizeof *b);
    b->rows = rows;
    b->row_bytes = row_bytes;
    b->row_pointers = row_pointers;
    if (rows > SIZE_MAX / 2 / sizeof(void *))
        return -1; /* a negative row count */
    b->row = calloc(rows ? rows : 1, sizeof(void *));
    if (b->row == NULL)
        return -1;
    for (r = 0; r < rows; r++) {
        b->row[r] = tdg_amalloc(row_bytes ? row_bytes : 1, align, misalign);
        if (b->row[r] == NULL)
            return -1;
    }
    if (row_pointers) {
        /* The routine walks the pointer array too, so it is part of the
         * operand: copied into aligned storage the routine reads. */
        void **ptrs = tdg_amalloc(rows * sizeof(void *), sizeof(void *), 0);
        if (ptrs == NULL)
            return -1;
        memcpy(ptrs, b->row, rows * sizeof(void *));
        b->user = ptrs;
    } else {
        b->user = b->row[0];
    }
    return 0;
}

void tdg_buf_wrap_static(struct tdg_buf *b, void *storage, size_t bytes)
{
    memset(b, 0, sizeof *b);
    b->rows = 1;
    b->row_bytes = bytes;
    b->is_static = 1;
    b->row = calloc(1, sizeof(void *));
    if (b->row != NULL)
        b->row[0] = storage;
    b->user = storage;
}

void tdg_buf_free(struct tdg_buf *b)
{
    size_t r;
    if (b->row == NULL)
        return;
    if (!b->is_static)
        for (r = 0; r < b->rows; r++)
            tdg_afree(b->row[r]);
    if (b->row_pointers)
        tdg_afree(b->user);
    free(b->row);
    b->row = NULL;
    b->user = NULL;
}

size_t tdg_buf_bytes(const struct tdg_buf *b)
{
    return b->rows * b->row_bytes + (b->row_pointers ? b->rows * sizeof(void *) : 0);
}

void tdg_buf_copy(struct tdg_buf *dst, const struct tdg_buf *src)
{
    size_t r;
    for (r = 0; r < src->rows && r < dst->rows; r++)
        memcpy(dst->row[r], src->row[r], src->row_bytes);
}

static int cmp_buf_address(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const struct tdg_buf *)a)->row[0];
    uintptr_t y = (uintptr_t)((const struct tdg_buf *)b)->row[0];
    return (x > y) - (x < y);
}

void tdg_bufs_sort_by_address(struct tdg_buf *bufs, int n)
{
    if (n > 1)
        qsort(bufs, (size_t)n, sizeof *bufs, cmp_buf_address);
}

static size_t line_bytes(void)
{
    static size_t cached;
    if (cached == 0) {
        long l = sysconf(_SC_LEVEL1_DCACHE_LINESIZE);
        cached = l > 0 ? (size_t)l : 64;
    }
    return cached;
}

static double read_lines(const char *p, size_t n)
{
    /* One load per cache line brings the whole line in; summing through a
     * volatile-free loop keeps it fast, the caller sinks the result. */
    size_t step = line_bytes(), i;
    double s = 0.0;
    for (i = 0; i < n; i += step)
        s += (double)p[i];
    if (n)
        s += (double)p[n - 1];
    return s;
}

double tdg_buf_read(const struct tdg_buf *b)
{
    size_t r;
    double s = 0.0;
    for (r = 0; r < b->rows; r++)
        s += read_lines((const char *)b->row[r], b->row_bytes);
    if (b->row_pointers)
        s += read_lines((const char *)b->user, b->rows * sizeof(void *));
    return s;
}

static void touch_range(char *p, size_t n)
{
    /* A write is needed: reading an untouched page maps the shared zero page
     * and the first store would still fault (copy-on-write). */
    static size_t page;
    volatile char *v = (volatile char *)p;
    size_t i;
    if (page == 0) {
        long ps = sysconf(_SC_PAGESIZE);
        page = ps > 0 ? (size_t)ps : 4096;
    }
    if (n == 0)
        return;
    for (i = 0; i < n; i += page)
        v[i] = v[i];
    v[n - 1] = v[n - 1];
}

void tdg_buf_touch_pages(struct tdg_buf *b)
{
    size_t r;
    for (r = 0; r < b->rows; r++)
        touch_range((char *)b->row[r], b->row_bytes);
    if (b->row_pointers)
        touch_range((char *)b->user, b->rows * sizeof(void *));
}

static int has_clflushopt(void)
{
#if TDG_X86
    unsigned a, b, c, d;
    if ((unsigned)__get_cpuid_max(0, NULL) < 7u)
        return 0;
    __cpuid_count(7u, 0, a, b, c, d);
    return (b >> 23) & 1u;
#else
    return 0;
#endif
}

static void clflush_range(const char *p, size_t n, int opt)
{
#if TDG_X86
    size_t step = line_bytes(), i;
    const char *end = p + n;
    /* Start on the line holding p so a misaligned operand loses its first line too. */
    p -= (size_t)p % step;
    if (opt) {
        for (i = 0; p + i < end; i += step)
            __asm__ __volatile__("clflushopt %0" ::"m"(*(const volatile char *)(p + i)));
    } else {
        for (i = 0; p + i < end; i += step)
            __asm__ __volatile__("clflush %0" ::"m"(*(const volatile char *)(p + i)));
    }
#else
    (void)p;
    (void)n;
    (void)opt;
#endif
}

void tdg_buf_clflush(const struct tdg_buf *b)
{
    size_t r;
    int opt = has_clflushopt();
    for (r = 0; r < b->rows; r++)
        clflush_range((const char *)b->row[r], b->row_bytes, opt);
    if (b->row_pointers)
        clflush_range((const char *)b->user, b->rows * sizeof(void *), opt);
#if TDG_X86
    /* clflushopt is weakly ordered: fence so every eviction is done before
     * the timer starts. */
    __asm__ __volatile__("mfence" ::: "memory");
#endif
}

/* ---------------------------------------------------------------- flushing */

/* CPUs this process may run on, captured before any pinning narrows it:
 * the CPUs a parallel routine's threads can land on. */
static cpu_set_t usable_cpus;
static int usable_cpus_known;

void tdg_remember_usable_cpus(void)
{
    if (sched_getaffinity(0, sizeof usable_cpus, &usable_cpus) == 0)
        usable_cpus_known = 1;
}

static int usable_cpu_list(int *out, int max)
{
    int c, n = 0;
    if (!usable_cpus_known) {
        int all = tdg_online_cpus();
        for (c = 0; c < all && n < max; c++)
            out[n++] = c;
        return n;
    }
    for (c = 0; c < CPU_SETSIZE && n < max; c++)
        if (CPU_ISSET(c, &usable_cpus))
            out[n++] = c;
    return n;
}

/* One load in each TLB page, at a different line of each so the loads
 * spread over the cache's sets instead of piling into one. */
static double touch_page_lines(const char *p, size_t pages, size_t page)
{
    size_t step = line_bytes(), per_page = page / step, i;
    double s = 0.0;
    if (per_page == 0)
        per_page = 1;
    for (i = 0; i < pages; i++)
        s += (double)p[i * page + (i % per_page) * step];
    return s;
}

/* What one flush reads: the buffer, then the TLB pages. */
static double flush_pass(const struct tdg_flusher *f)
{
    double s = 0.0;
    if (f->area != NULL)
        s += read_lines(f->area, f->bytes);
    if (f->tlb_area != NULL)
        s += touch_page_lines(f->tlb_area, f->pages, f->page_bytes);
    return s;
}

struct flush_threads {
    pthread_t *tid;
    pthread_barrier_t start, done;
    volatile int stop;
    struct tdg_flusher *f;
    int n;
};

struct flush_thread_arg {
    struct flush_threads *ft;
    int cpu;
};

static void *flush_thread_main(void *p)
{
    struct flush_thread_arg *a = p;
    struct flush_threads *ft = a->ft;
    char err[128];
    /* Named so that counting the routine's threads leaves it out. */
    pthread_setname_np(pthread_self(), "tdg-flush");
    tdg_pin_to_cpu(a->cpu, err, sizeof err);
    for (;;) {
        int cpu;
        pthread_barrier_wait(&ft->start);
        if (ft->stop)
            break;
        tdg_sink = tdg_sink + flush_pass(ft->f);
        cpu = tdg_current_cpu();
        if (cpu >= 0 && cpu < 1024)
            ft->f->cpu_seen[cpu] = 1;
        pthread_barrier_wait(&ft->done);
    }
    free(a);
    return NULL;
}

int tdg_flusher_init(struct tdg_flusher *f, const struct tdg_options *o, char *err, size_t err_len)
{
    size_t i, bytes;
    enum tdg_flush_method method = o->flush;
    int all_cpus = o->flush_all_cpus;
    memset(f, 0, sizeof *f);
    f->method = method;
    f->use_clflushopt = has_clflushopt();
    f->all_cpus = all_cpus;
    {
        int cpus[1024];
        f->ncpus = usable_cpu_list(cpus, 1024);
    }
#if !TDG_X86
    if (method == TDG_FLUSH_CLFLUSH) {
        snprintf(err, err_len, "clflush is x86-only; use --flush=read");
        return -1;
    }
#endif
    f->clflush_operands = TDG_X86 && method == TDG_FLUSH_READ && o->flush_to_memory;
    /* With the operands clflushed, the read only has to evict what else the
     * driver touched: its data in the private caches (evict_kib) and the
     * operands' TLB entries (evict_pages), not the last-level cache. */
    f->evicts = f->clflush_operands && (o->evict_kib > 0 || o->evict_pages > 0);
    bytes = (size_t)(f->evicts ? o->evict_kib : o->flush_kib) * 1024u;
    f->bytes = bytes;
    if (method == TDG_FLUSH_READ && bytes > 0) {
        f->area = malloc(bytes);
        if (f->area == NULL) {
            snprintf(err, err_len, "cannot allocate a %zu-byte flush buffer; lower --flush-kib", bytes);
            return -1;
        }
        /* Distinct non-zero contents: a never-written buffer would be the
         * kernel's shared zero page and would flush nothing. */
        for (i = 0; i < bytes; i++)
            f->area[i] = (char)(i * 7u + 1u);
    }
    if (method == TDG_FLUSH_READ && f->evicts && o->evict_pages > 0) {
        long ps = sysconf(_SC_PAGESIZE);
        void *m;
        f->page_bytes = ps > 0 ? (size_t)ps : 4096u;
        f->pages = (size_t)o->evict_pages;
        m = mmap(NULL, f->pages * f->page_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) {
            snprintf(err, err_len, "cannot map %zu pages to evict the TLB; lower --evict-pages", f->pages);
            f->pages = 0;
            return -1;
        }
        f->tlb_area = m;
#ifdef MADV_NOHUGEPAGE
        /* Each touch must cost a TLB entry of base size: on huge pages the
         * whole area would be a handful of entries and evict nothing. */
        (void)madvise(m, f->pages * f->page_bytes, MADV_NOHUGEPAGE);
#endif
        /* Written, so each page is its own frame, not the zero page. */
        for (i = 0; i < f->pages; i++)
            f->tlb_area[i * f->page_bytes] = (char)(i * 7u + 1u);
    }
    if (all_cpus && method == TDG_FLUSH_READ && (f->area != NULL || f->tlb_area != NULL) && f->ncpus > 1) {
        struct flush_threads *ft = calloc(1, sizeof *ft);
        int c, cpus[1024];
        usable_cpu_list(cpus, 1024);
        if (ft == NULL || (ft->tid = calloc((size_t)f->ncpus, sizeof(pthread_t))) == NULL) {
            snprintf(err, err_len, "out of memory for the per-CPU flush threads; drop --flush-all-cpus");
            free(ft);
            return -1;
        }
        ft->f = f;
        ft->n = f->ncpus;
        pthread_barrier_init(&ft->start, NULL, (unsigned)ft->n + 1);
        pthread_barrier_init(&ft->done, NULL, (unsigned)ft->n + 1);
        for (c = 0; c < ft->n; c++) {
            struct flush_thread_arg *a = malloc(sizeof *a);
            if (a == NULL) {
                snprintf(err, err_len, "out of memory for the per-CPU flush threads; drop --flush-all-cpus");
                return -1;
            }
            a->ft = ft;
            a->cpu = cpus[c];
            if (pthread_create(&ft->tid[c], NULL, flush_thread_main, a) != 0) {
                snprintf(err, err_len, "cannot start the flush thread for CPU %d", cpus[c]);
                return -1;
            }
        }
        f->threads = ft;
    }
    return 0;
}

double tdg_flush_read(struct tdg_flusher *f)
{
    struct flush_threads *ft = f->threads;
    double s;
    if (f->area == NULL && f->tlb_area == NULL)
        return 0.0;
    if (ft != NULL) {
        /* Every CPU reads the buffer at once, so operands a parallel routine
         * left in other CPUs' private caches are evicted too. */
        pthread_barrier_wait(&ft->start);
        pthread_barrier_wait(&ft->done);
        return tdg_sink;
    }
    s = flush_pass(f);
    tdg_sink = s;
    if (f->all_cpus) {
        /* A single usable CPU: this thread's flush is the every-CPU flush. */
        int cpu = tdg_current_cpu();
        if (cpu >= 0 && cpu < 1024)
            f->cpu_seen[cpu] = 1;
    }
    return s;
}

void tdg_flusher_free(struct tdg_flusher *f)
{
    struct flush_threads *ft = f->threads;
    if (ft != NULL) {
        int c;
        ft->stop = 1;
        pthread_barrier_wait(&ft->start);
        for (c = 0; c < ft->n; c++)
            pthread_join(ft->tid[c], NULL);
        pthread_barrier_destroy(&ft->start);
        pthread_barrier_destroy(&ft->done);
        free(ft->tid);
        free(ft);
        f->threads = NULL;
    }
    free(f->area);
    f->area = NULL;
    if (f->tlb_area != NULL)
        munmap(f->tlb_area, f->pages * f->page_bytes);
    f->tlb_area = NULL;
}

/* ------------------------------------------------------------- hot code */

/* More than any L2: a larger program is warmed only this far. */
#define TDG_CODE_CAP ((size_t)4 << 20)

struct code_ranges {
    const char *start[8];
    size_t len[8];
    int n;
    size_t total;
};

static int collect_main_program_code(struct dl_phdr_info *info, size_t size, void *data)
{
    struct code_ranges *cr = data;
    int i;
    (void)size;
    /* The first object is the program itself, where the routine is linked. */
    for (i = 0; i < info->dlpi_phnum && cr->n < 8; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            size_t len = ph->p_memsz;
            if (cr->total + len > TDG_CODE_CAP)
                len = TDG_CODE_CAP - cr->total;
            cr->start[cr->n] = (const char *)(info->dlpi_addr + ph->p_vaddr);
            cr->len[cr->n++] = len;
            cr->total += len;
        }
    }
    return 1; /* stop after the first object */
}

static struct code_ranges *code_ranges(void)
{
    static struct code_ranges cr;
    static int done;
    if (!done) {
        dl_iterate_phdr(collect_main_program_code, &cr);
        done = 1;
    }
    return &cr;
}

double tdg_warm_code(void)
{
    struct code_ranges *cr = code_ranges();
    double s = 0.0;
    int i;
    for (i = 0; i < cr->n; i++)
        s += read_lines(cr->start[i], cr->len[i]);
    return s;
}

void tdg_clflush_code(void)
{
    struct code_ranges *cr = code_ranges();
    int opt = has_clflushopt(), i;
    for (i = 0; i < cr->n; i++)
        clflush_range(cr->start[i], cr->len[i], opt);
#if TDG_X86
    __asm__ __volatile__("mfence" ::: "memory");
#endif
}

size_t tdg_code_bytes(void)
{
    return code_ranges()->total;
}

/* ------------------------------------------------------------ environment */

int tdg_pin_to_cpu(int cpu, char *err, size_t err_len)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
        snprintf(err, err_len, "cannot pin to CPU %d: %s", cpu, strerror(errno));
        return -1;
    }
    return 0;
}

int tdg_current_cpu(void)
{
    return sched_getcpu();
}

int tdg_online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)(n > 1024 ? 1024 : n) : 1;
}

static int read_first_line(const char *path, char *buf, size_t len)
{
    FILE *fp = fopen(path, "r");
    size_t n;
    if (fp == NULL)
        return -1;
    if (fgets(buf, (int)len, fp) == NULL) {
        fclose(fp);
        return -1;
    }
    fclose(fp);
    n = strlen(buf);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        buf[--n] = '\0';
    return 0;
}

void tdg_warnings_init(struct tdg_warnings *w)
{
    w->text[0] = '\0';
}

void tdg_warnings_add(struct tdg_warnings *w, const char *format, ...)
{
    size_t used = strlen(w->text);
    int n;
    va_list ap;
    va_start(ap, format);
    n = vsnprintf(w->text + used, sizeof w->text - used, format, ap);
    va_end(ap);
    if (n < 0 || used + (size_t)n + 2 > sizeof w->text)
        w->text[used] = '\0'; /* whole lines only */
    else
        strcat(w->text, "\n");
}

void tdg_environment_warnings(struct tdg_warnings *w, int pinned)
{
    tdg_environment_warnings_in("", w, pinned);
}

void tdg_environment_warnings_in(const char *root, struct tdg_warnings *w, int pinned)
{
    char line[256], path[512];
    double load1 = 0.0;
    int cpus = tdg_online_cpus();
#define TDG_READ(rel) (snprintf(path, sizeof path, "%s%s", root, rel), read_first_line(path, line, sizeof line) == 0)
    if (TDG_READ("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor") && strcmp(line, "performance") != 0)
        tdg_warnings_add(w, "CPU frequency governor is '%s', not 'performance': the clock rate may change during timing",
                         line);
    if (TDG_READ("/sys/devices/system/cpu/intel_pstate/no_turbo") && strcmp(line, "0") == 0)
        tdg_warnings_add(w, "turbo boost is on (intel_pstate/no_turbo=0): clock rate depends on load and temperature");
    if (TDG_READ("/sys/devices/system/cpu/cpufreq/boost") && strcmp(line, "1") == 0)
        tdg_warnings_add(w, "CPU boost is on (cpufreq/boost=1): clock rate depends on load and temperature");
    if (TDG_READ("/proc/loadavg") && sscanf(line, "%lf", &load1) == 1 && load1 > 0.5)
        tdg_warnings_add(w,
                         "other load on the machine: 1-minute load average %.2f on %d CPU(s); wall times include it "
                         "(CPU time, --timer cpu with its median, does not)",
                         load1, cpus);
#undef TDG_READ
    if (!pinned)
        tdg_warnings_add(w, "the driver is not pinned to a CPU (--pin): migrations can cold-start the caches mid-run");
}

long tdg_minor_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt + ru.ru_majflt;
}

/* ------------------------------------------------------ random data, stats */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

void tdg_seed(uint64_t seed)
{
    rng_state = seed ? seed : 0x9E3779B97F4A7C15ull;
}

uint64_t tdg_rand_u64(void)
{
    /* xorshift64*: cheap enough to draw RANDOM scalars inside the timed loop. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

double tdg_urand(void)
{
    return (double)(tdg_rand_u64() >> 11) * (1.0 / 9007199254740992.0) - 0.5;
}

long long tdg_rand_int(long long lo, long long hi)
{
    uint64_t span;
    if (hi <= lo)
        return lo;
    span = (uint64_t)(hi - lo) + 1u;
    return lo + (long long)(span ? tdg_rand_u64() % span : tdg_rand_u64());
}

double tdg_rand_real(double lo, double hi)
{
    return lo + (hi - lo) * (tdg_urand() + 0.5);
}

int tdg_fill_from_file(void *dst, size_t bytes, const char *path, char *err, size_t err_len)
{
    FILE *fp = fopen(path, "rb");
    size_t got;
    long size;
    if (fp == NULL) {
        snprintf(err, err_len, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    fseek(fp, 0, SEEK_END);
    size = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    if (size < 0 || (size_t)size != bytes) {
        snprintf(err, err_len, "%s holds %ld bytes but the operand needs %zu; record it again or fix the sizes",
                 path, size, bytes);
        fclose(fp);
        return -1;
    }
    got = fread(dst, 1, bytes, fp);
    fclose(fp);
    if (got != bytes) {
        snprintf(err, err_len, "short read from %s", path);
        return -1;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void tdg_stats_compute(const double *x, int n, struct tdg_stats *s)
{
    double *sorted, sum = 0.0, sq = 0.0;
    int i;
    memset(s, 0, sizeof *s);
    if (n <= 0)
        return;
    sorted = malloc((size_t)n * sizeof *sorted);
    if (sorted == NULL)
        return;
    memcpy(sorted, x, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_double);
    for (i = 0; i < n; i++)
        sum += sorted[i];
    s->min = sorted[0];
    s->max = sorted[n - 1];
    s->median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
    s->mean = sum / n;
    for (i = 0; i < n; i++)
        sq += (sorted[i] - s->mean) * (sorted[i] - s->mean);
    s->stddev = n > 1 ? sqrt(sq / (n - 1)) : 0.0;
    free(sorted);
}

double tdg_estimate(const double *x, int n, int median)
{
    struct tdg_stats s;
    tdg_stats_compute(x, n, &s);
    return median ? s.median : s.min;
}

double tdg_halves_disagreement(const double *x, int n, int median)
{
    double a, b, all;
    if (n < 4)
        return -1.0;
    a = tdg_estimate(x, n / 2, median);
    b = tdg_estimate(x + n / 2, n - n / 2, median);
    all = tdg_estimate(x, n, median);
    if (all <= 0.0)
        return a == b ? 0.0 : 1.0;
    return fabs(a - b) / all;
}

int tdg_sampler_init(struct tdg_sampler *s, int min_samples, int fixed, int median, double min_time_ms,
                     double max_time_ms, double stable_pct)
{
    memset(s, 0, sizeof *s);
    s->cap = min_samples > 256 ? min_samples : 256;
    s->ns = malloc((size_t)s->cap * sizeof *s->ns);
    s->cpu = malloc((size_t)s->cap * sizeof *s->cpu);
    if (s->ns == NULL || s->cpu == NULL)
        return -1;
    s->min_samples = min_samples;
    s->fixed = fixed;
    s->median = median;
    s->min_time_ms = min_time_ms;
    s->max_time_ms = max_time_ms;
    s->stable_pct = stable_pct;
    s->next_check = min_samples;
    s->spread = -1.0;
    s->start = tdg_clock_ns(CLOCK_MONOTONIC_RAW);
    return 0;
}

static int sampler_finish(struct tdg_sampler *s)
{
    const char *estimator = s->median ? "median" : "minimum";
    s->spread = tdg_halves_disagreement(s->ns, s->n, s->median);
    if (s->fixed) {
        s->stable = s->spread >= 0.0 && s->spread * 100.0 <= s->stable_pct;
        if (s->spread < 0.0)
            snprintf(s->why, sizeof s->why,
                     "%d sample(s) (--samples) are too few to judge stability; drop --samples to sample until the figure settles",
                     s->n);
        else if (!s->stable)
            snprintf(s->why, sizeof s->why,
                     "the %s over the first and the second half of the %d samples (--samples) differ by %.2f%%, more than %g%%; "
                     "drop --samples to sample until the figure settles",
                     estimator, s->n, s->spread * 100.0, s->stable_pct);
    } else if (!s->stable && s->why[0] == '\0') {
        snprintf(s->why, sizeof s->why,
                 "the %g ms budget ran out before the %s over the first and the second half of the samples agreed "
                 "within %g%% (they differ by %.2f%%): the machine's speed changed while measuring; raise "
                 "--max-time-ms, or on a loaded machine time CPU time (--timer cpu, median), which other processes do not inflate",
                 s->max_time_ms, estimator, s->stable_pct, s->spread * 100.0);
    }
    return 1;
}

int tdg_sampler_add(struct tdg_sampler *s, double ns, int cpu)
{
    s->ns[s->n] = ns;
    s->cpu[s->n] = cpu;
    s->n++;
    s->elapsed_ms = (double)(tdg_clock_ns(CLOCK_MONOTONIC_RAW) - s->start) * 1e-6;
    if (s->n == s->cap) {
        double *more = realloc(s->ns, (size_t)s->cap * 2 * sizeof *s->ns);
        int *more_cpu = more ? realloc(s->cpu, (size_t)s->cap * 2 * sizeof *s->cpu) : NULL;
        if (more != NULL)
            s->ns = more;
        if (more_cpu != NULL)
            s->cpu = more_cpu;
        if (more == NULL || more_cpu == NULL) {
            snprintf(s->why, sizeof s->why, "out of memory for more than %d samples", s->n);
            return sampler_finish(s);
        }
        s->cap *= 2;
    }
    if (s->n < s->min_samples)
        return 0;
    if (s->fixed)
        return sampler_finish(s);
    if (s->elapsed_ms >= s->min_time_ms && s->n >= s->next_check) {
        double d = tdg_halves_disagreement(s->ns, s->n, s->median);
        if (d >= 0.0 && d * 100.0 <= s->stable_pct) {
            s->stable = 1;
            return sampler_finish(s);
        }
        s->next_check = s->n + s->n / 8 + 1; /* sorting after every sample would cost O(n^2 log n) */
    }
    if (s->elapsed_ms >= s->max_time_ms)
        return sampler_finish(s);
    return 0;
}

void tdg_sampler_free(struct tdg_sampler *s)
{
    free(s->ns);
    free(s->cpu);
    s->ns = NULL;
    s->cpu = NULL;
}

void tdg_json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c < 0x20)
            fprintf(out, "\\u%04x", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}

void tdg_json_double(FILE *out, double v)
{
    if (isnan(v) || isinf(v))
        fputs("null", out);
    else
        fprintf(out, "%.17g", v);
}

/* ================================================================== *
 * The driver's spec-independent steps (see tdg_runtime.h).
 * ================================================================== */

/* ----------------------------------------------------------------- options */

void tdg_options_init(struct tdg_options *o)
{
    memset(o, 0, sizeof *o); /* the spec's and the machine's are the driver's to set */
    o->hot_code = 1;
    o->touch = o->dummy = o->guard = o->verify = 1;
    o->threads = 1;
    o->first_touch_threads = 1;
    o->pin = -1;
    o->max_flush_mib = 2048;
}

void tdg_usage(FILE *out, const struct tdg_options *defaults)
{
    fprintf(out,
            "usage: driver [options]\n"
            "The defaults are built in: the settings tdg resolved when it generated the\n"
            "driver (its command line, else the spec's timer={...}, else the machine). tdg\n"
            "passes a setting here only when one run differs from the build (a flush\n"
            "sweep's sizes); the options are for overriding by hand, e.g. a `make` build.\n"
            "  --timer=wall|cycle|cpu     timer (default from the spec)\n"
            "  --samples=N                exactly N timing samples (default: at least %d, adaptive)\n"
            "  --min-samples=N            at least N samples, then as the sampling budget says\n"
            "  --min-time-ms=T            spread the samples over at least T ms (default %lld)\n"
            "  --max-time-ms=T            stop sampling at T ms, marking the result unstable (default %lld)\n"
            "  --stable-pct=P             halves of the run must agree within P%% (default %g)\n"
            "  --select=min|median        reported statistic\n"
            "  --flush=read|clflush|none  cache flush before each timed call\n"
            "  --flush-kib=K              read-flush / working-set area size in KiB (read as\n"
            "                             given, with no clflush of the flushed operands)\n"
            "  --evict-kib=K              after the operands' clflush, read K KiB (the private caches)\n"
            "  --evict-pages=P            ... and touch one line in each of P pages (the TLB); both 0:\n"
            "                             read the full --flush-kib instead\n"
            "  --flush-all-cpus           flush on every CPU (parallel routines)\n"
            "  --no-flush-all-cpus        flush on the driver's CPU only (one thread)\n"
            "  --min-interval-ns=NS       shortest timed interval (0: one call per sample)\n"
            "  --reps=R                   force R calls per sample\n"
            "  --pin=CPU[,CPU...]         pin to a CPU; with --threads, thread k to the k-th\n"
            "  --threads=N                the routine's team size (OpenMP; exported to others)\n"
            "  --first-touch=threads|main who writes the operands' pages first (default:\n"
            "                             the threads that use them, when N > 1)\n"
            "  --no-touch                 do not pre-write operand pages\n"
            "  --no-dummy-call            no untimed call before timing\n"
            "  --cold-code                after a flush leave the routine's code cold too\n"
            "  --no-overflow-guard        no alpha alternation / output restore\n"
            "  --no-verify                skip checking against the reference\n"
            "  --tolerance=X              relative verification tolerance\n"
            "  --max-flush-mib=M          cap on self-flushing working-set memory\n"
            "  --json                     one JSON object on stdout\n"
            "  --describe                 print sizes and flops, then exit\n",
            defaults->samples, defaults->min_time_ms, defaults->max_time_ms, defaults->stable_pct);
}

int tdg_parse_options(int argc, char **argv, const struct tdg_options *defaults, struct tdg_options *o)
{
    int i, selected = 0; /* an explicit --select wins over --timer's default */
    *o = *defaults;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = strchr(a, '=');
        v = v ? v + 1 : "";
#define TDG_IS(name) (strncmp(a, name, strlen(name)) == 0)
        if (TDG_IS("--timer=")) {
            if (!strcmp(v, "wall")) o->timer = TDG_TIMER_WALL;
            else if (!strcmp(v, "cycle")) o->timer = TDG_TIMER_CYCLE;
            else if (!strcmp(v, "cpu")) o->timer = TDG_TIMER_CPU;
            else goto bad;
            if (!selected) /* CPU time's error goes both ways: its median */
                o->median = o->timer == TDG_TIMER_CPU;
        } else if (TDG_IS("--samples=")) {
            o->samples = atoi(v);
            o->samples_fixed = 1;
            if (o->samples < 1) goto bad;
        } else if (TDG_IS("--min-samples=")) {
            o->samples = atoi(v);
            o->samples_fixed = 0;
            if (o->samples < 1) goto bad;
        } else if (TDG_IS("--min-time-ms=")) {
            o->min_time_ms = atoll(v);
            if (o->min_time_ms < 0) goto bad;
        } else if (TDG_IS("--max-time-ms=")) {
            o->max_time_ms = atoll(v);
            if (o->max_time_ms < 1) goto bad;
        } else if (TDG_IS("--stable-pct=")) {
            o->stable_pct = atof(v);
            if (!(o->stable_pct > 0.0)) goto bad;
        } else if (!strcmp(a, "--cold-code")) {
            o->hot_code = 0;
        } else if (TDG_IS("--select=")) {
            if (!strcmp(v, "min")) o->median = 0;
            else if (!strcmp(v, "median")) o->median = 1;
            else goto bad;
            selected = 1;
        } else if (TDG_IS("--flush=")) {
            if (!strcmp(v, "read")) o->flush = TDG_FLUSH_READ;
            else if (!strcmp(v, "clflush")) o->flush = TDG_FLUSH_CLFLUSH;
            else if (!strcmp(v, "none")) o->flush = TDG_FLUSH_NONE;
            else goto bad;
        } else if (TDG_IS("--flush-kib=")) {
            o->flush_kib = atoll(v);
            /* A chosen size is read as chosen (a flush sweep's point), with
             * no clflush to make up for what it leaves behind. */
            o->flush_to_memory = 0;
            if (o->flush_kib < 0) goto bad;
        } else if (TDG_IS("--evict-kib=")) {
            o->evict_kib = atoll(v);
            if (o->evict_kib < 0) goto bad;
        } else if (TDG_IS("--evict-pages=")) {
            o->evict_pages = atoll(v);
            if (o->evict_pages < 0) goto bad;
        } else if (!strcmp(a, "--flush-all-cpus")) {
            o->flush_all_cpus = 1;
        } else if (!strcmp(a, "--no-flush-all-cpus")) {
            o->flush_all_cpus = 0; /* a team of more than one still flushes on every CPU */
        } else if (TDG_IS("--min-interval-ns=")) {
            o->min_interval_ns = atoll(v);
            o->min_interval_given = 1;
            if (o->min_interval_ns < 0) goto bad;
        } else if (TDG_IS("--reps=")) {
            o->reps = atoll(v);
            if (o->reps < 1) goto bad;
        } else if (TDG_IS("--pin=")) {
            if (tdg_parse_cpu_list(v, o))
                goto bad;
        } else if (TDG_IS("--threads=")) {
            char *end;
            long n = strtol(v, &end, 10);
            if (*v == '\0' || *end != '\0' || n < 1 || n > TDG_MAX_THREADS)
                goto bad;
            o->threads = (int)n;
        } else if (TDG_IS("--first-touch=")) {
            if (!strcmp(v, "threads")) o->first_touch_threads = 1;
            else if (!strcmp(v, "main")) o->first_touch_threads = 0;
            else goto bad;
        } else if (!strcmp(a, "--no-touch")) {
            o->touch = 0;
        } else if (!strcmp(a, "--no-dummy-call")) {
            o->dummy = 0;
        } else if (!strcmp(a, "--no-overflow-guard")) {
            o->guard = 0;
        } else if (!strcmp(a, "--no-verify")) {
            o->verify = 0;
        } else if (TDG_IS("--tolerance=")) {
            o->tol = atof(v);
        } else if (TDG_IS("--max-flush-mib=")) {
            o->max_flush_mib = atoll(v);
        } else if (!strcmp(a, "--json")) {
            o->json = 1;
        } else if (!strcmp(a, "--describe")) {
            o->describe = 1;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            tdg_usage(stdout, defaults);
            exit(0);
        } else {
        bad:
            fprintf(stderr, "driver: bad option '%s' (see --help)\n", a);
            return -1;
        }
#undef TDG_IS
    }
    return 0;
}

int tdg_parse_cpu_list(const char *text, struct tdg_options *o)
{
    const char *p = text;
    o->npins = 0;
    o->pin = -1;
    if (*p == '\0')
        return 0; /* "": not pinned */
    for (;;) {
        char *end;
        long c = strtol(p, &end, 10);
        if (end == p || c < 0 || c >= CPU_SETSIZE || o->npins == TDG_MAX_THREADS)
            return -1;
        o->pins[o->npins++] = (int)c;
        if (*end == '\0')
            break;
        if (*end != ',')
            return -1;
        p = end + 1;
    }
    o->pin = o->pins[0];
    return 0;
}

const char *tdg_timer_name(enum tdg_timer_method m)
{
    return m == TDG_TIMER_CYCLE ? "cycle" : m == TDG_TIMER_CPU ? "cpu" : "wall";
}

const char *tdg_flush_name(enum tdg_flush_method m)
{
    return m == TDG_FLUSH_READ ? "read" : m == TDG_FLUSH_CLFLUSH ? "clflush" : "none";
}

/* ---------------------------------------------------------- crash reporting */

static char tdg_phase_text[160] = "start-up";
static int tdg_trace_phases;

void tdg_phase(const char *what)
{
    snprintf(tdg_phase_text, sizeof tdg_phase_text, "%s", what);
    if (tdg_trace_phases) {
        fprintf(stderr, "tdg-phase: %s\n", what);
        fflush(stderr);
    }
}

static void on_fatal_signal(int sig)
{
    /* Only async-signal-safe calls here: write, signal, raise. */
    static const char head[] = "tdg-phase: ";
    size_t n = strlen(tdg_phase_text);
    ssize_t w = write(2, head, sizeof head - 1);
    w += write(2, tdg_phase_text, n);
    w += write(2, "\n", 1);
    (void)w;
    signal(sig, SIG_DFL);
    raise(sig);
}

void tdg_report_crashes(void)
{
    tdg_trace_phases = getenv("TDG_TRACE_PHASES") != NULL;
    signal(SIGSEGV, on_fatal_signal);
    signal(SIGFPE, on_fatal_signal);
    signal(SIGBUS, on_fatal_signal);
    signal(SIGILL, on_fatal_signal);
    signal(SIGABRT, on_fatal_signal);
}

/* ---------------------------------------------------- timer and repetitions */

void tdg_measure_timer_overhead(struct tdg_timer *t, tdg_block_timer time_block)
{
    int k;
    /* The timer's own cost, measured the way every sample is taken: the same
     * function and loop set-up, only with no call inside. */
    for (k = 0; k < 2000; k++) {
        double empty = time_block(t, 0);
        if (k == 0 || empty < t->overhead_ns)
            t->overhead_ns = empty;
    }
}

void tdg_min_interval_for_timer(struct tdg_options *o, const struct tdg_timer *t, char *why, size_t why_len)
{
    /* The shortest interval worth timing comes from the timer actually used.
     * The machine default is the cycle timer's; wall and CPU time advance in
     * their own (for CPU time far coarser) steps. 1000 steps keep the
     * reading error under 0.1% (ATLAS's rule), never below 10 us. */
    if (!o->min_interval_given && t->method != TDG_TIMER_CYCLE) {
        double own = 1000.0 * t->resolution_ns;
        o->min_interval_ns = own > 10000.0 ? (long long)ceil(own) : 10000;
        snprintf(why, why_len, "1000 x the %s timer's measured step (%.0f ns), at least 10 us",
                 t->method == TDG_TIMER_CPU ? "cpu" : "wall", t->resolution_ns);
    }
}

long long tdg_reps_after_one_call(const struct tdg_options *o, double one_call_ns)
{
    /* One call per sample when a call is long enough to time, otherwise R
     * calls per sample, doubling R (tdg_double_reps) until the interval is. */
    if (o->reps > 0)
        return o->reps;
    return one_call_ns >= (double)o->min_interval_ns ? 1 : 2;
}

long long tdg_self_flushing_sets(const struct tdg_options *o, int flush_cpus, size_t set_bytes, struct tdg_warnings *w)
{
    /* Self-flushing: enough working sets that, by the time one is used
     * again, the others have pushed it out of the flushed cache. */
    double area = (double)o->flush_kib * 1024.0 * (o->flush_all_cpus ? flush_cpus : 1);
    long long nsets = 1;
    if (o->flush != TDG_FLUSH_NONE && set_bytes > 0 && area > 0.0) {
        nsets = (long long)ceil(area / (double)set_bytes) + 1;
        if (nsets < 2)
            nsets = 2;
        if ((double)nsets * (double)set_bytes > (double)o->max_flush_mib * 1048576.0) {
            nsets = (long long)((double)o->max_flush_mib * 1048576.0 / (double)set_bytes);
            if (nsets < 2)
                nsets = 2;
            tdg_warnings_add(w, "working sets capped at %lld (--max-flush-mib=%lld): the flush may be partial", nsets,
                             o->max_flush_mib);
        }
    }
    return nsets;
}

long long tdg_double_reps(const struct tdg_timer *t, long long reps, long long min_interval_ns, tdg_least_block_timer least_block)
{
    for (;;) {
        double raw = least_block(t, reps, 0, HUGE_VAL);
        if (raw - t->overhead_ns >= (double)min_interval_ns || reps >= (1LL << 40))
            return reps;
        reps *= 2;
    }
}

const char *tdg_mode_name(long long reps, int working_sets)
{
    return reps == 1 ? "single-call" : working_sets > 1 ? "self-flushing" : "repeated";
}

/* ------------------------------------------------------------------ report */

void tdg_result_init(struct tdg_result *r, int json_version, const char *routine, const struct tdg_options *o,
                     const struct tdg_timer *t, const struct tdg_flusher *f, const struct tdg_sampler *s)
{
    memset(r, 0, sizeof *r);
    r->json_version = json_version;
    r->routine = routine;
    r->options = o;
    r->timer = t;
    r->flusher = f;
    r->sampler = s;
    r->verification = "skipped";
    r->overflow_guard = "off";
    r->outputs_finite = 1;
    r->code_page_offset = -1;
    tdg_warnings_init(&r->warnings);
}

void tdg_result_summarise(struct tdg_result *r)
{
    tdg_stats_compute(r->sampler->ns, r->sampler->n, &r->stats);
    r->reported_ns = r->options->median ? r->stats.median : r->stats.min;
}

void tdg_result_warnings(struct tdg_result *r)
{
    const struct tdg_options *o = r->options;
    if (r->outputs_denormal > 0)
        tdg_warnings_add(&r->warnings,
                         "%ld output value(s) drifted into denormals during timing: the figure includes slow denormal arithmetic%s",
                         r->outputs_denormal,
                         o->guard ? "; the calls of one sample already drift, lower --min-interval-ns or --reps"
                                  : "; keep the overflow guard on");
    if (!r->outputs_finite)
        tdg_warnings_add(&r->warnings, "outputs became non-finite during timing (overflow): timings may include slow-path "
                                       "arithmetic; keep the overflow guard on or change the fill");
    if (r->page_faults > 0)
        tdg_warnings_add(&r->warnings,
                         "%ld page fault(s) inside the timed phase (lazily zeroed or first-touched pages): times include them%s",
                         r->page_faults, o->touch ? "" : "; drop --no-touch");
    if (r->reps == 1 && r->timer->resolution_ns > 0.0 && r->reported_ns < 100.0 * r->timer->resolution_ns &&
        r->reported_ns > 0.0)
        tdg_warnings_add(&r->warnings, "the reported time is within 100 timer steps (%.1f ns each); raise --min-interval-ns",
                         r->timer->resolution_ns);
}

static void json_key_double(FILE *out, const char *key, double v)
{
    fprintf(out, "\"%s\":", key);
    tdg_json_double(out, v);
}

/* ,"threads":N,... : the team asked for, where it ran and what it did. */
static void json_team(FILE *out, const struct tdg_team *t)
{
    int k;
    fprintf(out, ",\"threads\":%d,\"threads_requested\":%d,\"openmp\":%s,\"omp_team\":%d,\"thread_cpus\":[", t->ran,
            t->threads, t->openmp ? "true" : "false", t->omp_team);
    for (k = 0; k < t->ncpus; k++)
        fprintf(out, "%s%d", k ? "," : "", t->cpus[k]);
    fprintf(out, "],\"thread_busy_ms\":[");
    for (k = 0; k < t->ran; k++) {
        if (k)
            fputc(',', out);
        tdg_json_double(out, t->busy_ms[k]);
    }
    fprintf(out, "],\"first_touch\":\"%s\",\"first_touch_faults\":[", t->first_touch ? "threads" : "main");
    for (k = 0; t->first_touch && k < t->threads; k++)
        fprintf(out, "%s%ld", k ? "," : "", t->touch_faults[k]);
    fputc(']', out);
}

void tdg_report_json(FILE *out, const struct tdg_result *r)
{
    const struct tdg_options *o = r->options;
    const struct tdg_timer *t = r->timer;
    const struct tdg_sampler *s = r->sampler;
    const struct tdg_operand_report *op;
    const char *line;
    int c, k, first;

    fprintf(out, "{\"tdg_driver\":%d,\"routine\":", r->json_version);
    tdg_json_string(out, r->routine);
    fprintf(out, ",\"timer\":\"%s\",\"timer_requested\":\"%s\",", tdg_timer_name(t->method), tdg_timer_name(o->timer));
    json_key_double(out, "tsc_hz", t->tsc_hz);
    fprintf(out, ",\"tsc_hz_source\":\"%s\",", t->tsc_hz_source);
    json_key_double(out, "timer_overhead_ns", t->overhead_ns);
    fputc(',', out);
    json_key_double(out, "timer_resolution_ns", t->resolution_ns);
    fprintf(out, ",\"mode\":\"%s\",\"reps\":%lld,\"working_sets\":%d,\"flush\":\"%s\",\"flush_kib\":%lld,\"flush_all_cpus\":%s,",
            tdg_mode_name(r->reps, r->working_sets), r->reps, r->working_sets, tdg_flush_name(o->flush), o->flush_kib,
            o->flush_all_cpus ? "true" : "false");
    fprintf(out, "\"flush_cpus\":[");
    for (c = 0, first = 1; c < 1024; c++)
        if (r->flusher->cpu_seen[c]) {
            fprintf(out, "%s%d", first ? "" : ",", c);
            first = 0;
        }
    fprintf(out, "],\"flush_clflushes_operands\":%s",
            r->reps == 1 && r->flusher->method == TDG_FLUSH_READ && r->flusher->clflush_operands ? "true" : "false");
    fprintf(out, ",\"flush_evict_kib\":%lld,\"flush_evict_pages\":%lld,",
            r->reps == 1 && r->flusher->evicts ? (long long)(r->flusher->bytes / 1024u) : 0LL,
            r->reps == 1 && r->flusher->evicts ? (long long)r->flusher->pages : 0LL);
    json_key_double(out, "flush_ns_per_sample",
                    r->flusher->prepared > 0 ? r->flusher->prepare_ns / (double)r->flusher->prepared : 0.0);
    fprintf(out, ",\"min_interval_ns\":%lld,\"min_interval_why\":", o->min_interval_ns);
    tdg_json_string(out, r->min_interval_why);
    fprintf(out, ",\"code\":\"%s\",\"code_page_offset\":%d,\"selection\":\"%s\",\"samples_ns\":[",
            o->hot_code ? "hot" : "cold", r->code_page_offset, o->median ? "median" : "min");
    for (k = 0; k < s->n; k++) {
        if (k)
            fputc(',', out);
        tdg_json_double(out, s->ns[k]);
    }
    fprintf(out, "],\"sample_cpus\":[");
    for (k = 0; k < s->n; k++)
        fprintf(out, "%s%d", k ? "," : "", s->cpu[k]);
    fprintf(out, "],\"stats\":{");
    json_key_double(out, "min", r->stats.min);
    fputc(',', out);
    json_key_double(out, "median", r->stats.median);
    fputc(',', out);
    json_key_double(out, "mean", r->stats.mean);
    fputc(',', out);
    json_key_double(out, "max", r->stats.max);
    fputc(',', out);
    json_key_double(out, "stddev", r->stats.stddev);
    fprintf(out, "},");
    json_key_double(out, "reported_ns", r->reported_ns);
    fputc(',', out);
    json_key_double(out, "uncertainty_pct", s->spread >= 0.0 ? s->spread * 100.0 : NAN);
    fprintf(out, ",\"stable\":%s,\"unstable_reason\":", s->stable ? "true" : "false");
    tdg_json_string(out, s->why);
    fprintf(out, ",\"sampling\":{\"adaptive\":%s,\"min_samples\":%d,\"min_time_ms\":%lld,\"max_time_ms\":%lld,",
            o->samples_fixed ? "false" : "true", o->samples, o->min_time_ms, o->max_time_ms);
    json_key_double(out, "stable_pct", o->stable_pct);
    fputc(',', out);
    json_key_double(out, "elapsed_ms", s->elapsed_ms);
    fprintf(out, "},");
    json_key_double(out, "flops_per_call", r->flops_per_call);
    fprintf(out, ",\"page_faults_during_timing\":%ld,\"pinned_cpu\":%d,\"touch_pages\":%s,\"dummy_call\":%s,\"overflow_guard\":",
            r->page_faults, o->pin, o->touch ? "true" : "false", o->dummy ? "true" : "false");
    tdg_json_string(out, r->overflow_guard);
    if (r->team != NULL)
        json_team(out, r->team);
    fprintf(out, ",\"outputs_finite\":%s,\"outputs_denormal\":%ld,\"operands\":[", r->outputs_finite ? "true" : "false",
            r->outputs_denormal);
    for (op = r->operands; op->name != NULL; op++) {
        fprintf(out, "%s{\"name\":", op == r->operands ? "" : ",");
        tdg_json_string(out, op->name);
        fprintf(out, ",\"bytes\":%zu,\"address\":%zu,\"align\":%d,\"misalign\":%d,\"cache\":\"%s\",\"copies\":%d}", op->bytes,
                op->address, op->align, op->misalign, op->cache, op->copies);
    }
    fprintf(out, "],\"verification\":{\"status\":\"%s\",\"detail\":", r->verification);
    tdg_json_string(out, r->verification_detail);
    fprintf(out, "},\"warnings\":[");
    for (line = r->warnings.text, first = 1; *line != '\0';) {
        const char *nl = strchr(line, '\n');
        size_t len = nl != NULL ? (size_t)(nl - line) : strlen(line);
        char one[sizeof r->warnings.text];
        memcpy(one, line, len);
        one[len] = '\0';
        if (!first)
            fputc(',', out);
        tdg_json_string(out, one);
        first = 0;
        line += len + (nl != NULL);
    }
    fprintf(out, "],");
    json_key_double(out, "sink", r->sink);
    fprintf(out, "}\n");
}

void tdg_report_text(FILE *out, const struct tdg_result *r)
{
    const struct tdg_options *o = r->options;
    const struct tdg_sampler *s = r->sampler;
    double flops = r->flops_per_call, reported = r->reported_ns;
    fprintf(out, "%s: %s timer, %s, R=%lld call(s)/sample, %d working set(s), flush %s %lld KiB\n", r->routine,
            tdg_timer_name(r->timer->method), tdg_mode_name(r->reps, r->working_sets), r->reps, r->working_sets,
            tdg_flush_name(o->flush), o->flush_kib);
    fprintf(out, "  per call: min %.1f ns  median %.1f ns  mean %.1f ns  max %.1f ns  stddev %.1f ns\n", r->stats.min,
            r->stats.median, r->stats.mean, r->stats.max, r->stats.stddev);
    fprintf(out, "  reported (%s): %.1f ns", o->median ? "median" : "min", reported);
    if (s->spread >= 0.0)
        fprintf(out, " +- %.2f%% (%d samples over %.0f ms)", s->spread * 100.0, s->n, s->elapsed_ms);
    if (flops > 0.0 && reported > 0.0)
        fprintf(out, "  = %.1f MFLOPS (average %.1f)", flops / reported * 1e3,
                r->stats.mean > 0 ? flops / r->stats.mean * 1e3 : 0.0);
    fprintf(out, "\n  timer overhead %.1f ns (subtracted), verification %s%s%s\n", r->timer->overhead_ns, r->verification,
            r->verification_detail[0] ? ": " : "", r->verification_detail);
    if (r->team != NULL && (r->team->threads > 1 || r->team->ran > 1))
        fprintf(out, "  threads %d ran (of %d asked for)%s, pages first touched by %s\n", r->team->ran, r->team->threads,
                r->team->openmp ? ", OpenMP" : "", r->team->first_touch ? "the threads" : "the main thread");
    if (r->code_page_offset >= 0)
        fprintf(out, "  code %s, %s at page offset %d\n", o->hot_code ? "hot" : "cold", r->routine, r->code_page_offset);
    if (!s->stable)
        fprintf(out, "  UNSTABLE: %s\n", s->why);
    if (r->warnings.text[0])
        fprintf(out, "  warnings:\n%s", r->warnings.text);
    fprintf(out, "  (sink %g)\n", r->sink);
}

/* ----------------------------------------------------------------- threads */

#ifdef _OPENMP
#include <omp.h>
#endif
#include <dirent.h>
#include <sys/syscall.h>

static const char *const thread_count_variables[] = {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                                                     "BLIS_NUM_THREADS"};

void tdg_threads_environment(int threads, char **argv)
{
    char want[16];
    size_t k;
    int differs = 0;
    if (threads < 1)
        return;
    snprintf(want, sizeof want, "%d", threads);
    for (k = 0; k < sizeof thread_count_variables / sizeof *thread_count_variables; k++) {
        const char *have = getenv(thread_count_variables[k]);
        if (have == NULL || strcmp(have, want) != 0) {
            differs = 1;
            setenv(thread_count_variables[k], want, 1);
        }
    }
    /* Once only: a runtime that rewrites the variables must not make the
     * driver start itself forever. */
    if (!differs || getenv("TDG_THREADS_RESTARTED") != NULL)
        return;
    setenv("TDG_THREADS_RESTARTED", "1", 1);
    execv("/proc/self/exe", argv);
    /* No /proc: the team size still reaches OpenMP through omp_set_num_threads. */
}

static int gettid_portable(void)
{
    return (int)syscall(SYS_gettid);
}

static int pin_task(int tid, int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(tid, sizeof set, &set);
}

int tdg_team_init(struct tdg_team *t, const struct tdg_options *o, char *err, size_t err_len)
{
    int k;
    memset(t, 0, sizeof *t);
    t->threads = o->threads < 1 ? 1 : o->threads;
#ifdef _OPENMP
    t->openmp = 1;
#endif
    t->first_touch = t->threads > 1 && o->first_touch_threads;
    if (o->npins > 0) {
        if (o->npins < t->threads) {
            snprintf(err, err_len, "%d threads need a CPU each but --pin lists %d; list %d CPUs or lower --threads",
                     t->threads, o->npins, t->threads);
            return -1;
        }
        for (k = 0; k < o->npins; k++)
            t->cpus[k] = o->pins[k];
        t->ncpus = t->threads > 1 ? t->threads : 1;
    } else if (t->threads > 1) {
        int usable[TDG_MAX_THREADS], n = usable_cpu_list(usable, TDG_MAX_THREADS);
        if (n < t->threads) {
            snprintf(err, err_len,
                     "%d threads need a CPU each but this process may use %d (its affinity mask); lower --threads to %d or "
                     "run where more CPUs are allowed",
                     t->threads, n, n);
            return -1;
        }
        for (k = 0; k < t->threads; k++)
            t->cpus[k] = usable[k];
        t->ncpus = t->threads;
    }
    for (k = 0; k < t->ncpus; k++) {
        int j;
        for (j = 0; j < k; j++)
            if (t->cpus[j] == t->cpus[k]) {
                snprintf(err, err_len, "--pin lists CPU %d twice; each thread needs a CPU of its own", t->cpus[k]);
                return -1;
            }
    }
    if (t->ncpus > 0 && tdg_pin_to_cpu(t->cpus[0], err, err_len))
        return -1;
#ifdef _OPENMP
    omp_set_num_threads(t->threads);
#endif
    return 0;
}

void tdg_team_start(struct tdg_team *t)
{
#ifdef _OPENMP
    int team = 0;
#pragma omp parallel num_threads(t->threads)
    {
        int me = omp_get_thread_num();
        if (t->ncpus > 0)
            (void)pin_task(0, t->cpus[me % t->ncpus]);
        if (me == 0)
            team = omp_get_num_threads();
    }
    t->omp_team = team;
#else
    (void)t;
#endif
}

/* Calls fn(tid, arg) for every thread of the process but the caller and
 * tdg's own helpers (named "tdg-..."). */
static void for_each_other_task(void (*fn)(int tid, void *arg), void *arg)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int self = gettid_portable();
    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        char path[96], name[32] = "";
        FILE *fp;
        int tid = atoi(e->d_name);
        if (tid <= 0 || tid == self)
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%d/comm", tid);
        fp = fopen(path, "r");
        if (fp != NULL) {
            if (fgets(name, sizeof name, fp) == NULL)
                name[0] = '\0';
            fclose(fp);
        }
        if (strncmp(name, "tdg-", 4) == 0)
            continue;
        fn(tid, arg);
    }
    closedir(d);
}

struct pin_round {
    struct tdg_team *t;
    int next;
};

static void pin_one_other(int tid, void *arg)
{
    struct pin_round *pr = arg;
    if (pin_task(tid, pr->t->cpus[1 + pr->next % (pr->t->ncpus - 1)]) == 0)
        pr->t->pinned_others++;
    pr->next++;
}

void tdg_team_pin_other_threads(struct tdg_team *t)
{
    struct pin_round pr;
    /* OpenMP's threads pinned themselves in the start-up region. */
    if (t->openmp || t->ncpus < 2)
        return;
    pr.t = t;
    pr.next = 0;
    for_each_other_task(pin_one_other, &pr);
}


static long thread_minor_faults(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_minflt : 0;
}

/* Work split over the team: fn(t, k, n, arg) runs once for each k < n,
 * share k on the CPU of thread k. */
typedef void (*team_share_fn)(struct tdg_team *t, int k, int n, void *arg);

#ifndef _OPENMP
struct share_job {
    struct tdg_team *t;
    team_share_fn fn;
    void *arg;
    int k;
};

static void *share_thread_main(void *p)
{
    struct share_job *j = p;
    if (j->k < j->t->ncpus)
        (void)pin_task(0, j->t->cpus[j->k]);
    j->fn(j->t, j->k, j->t->threads, j->arg);
    return NULL;
}
#endif

static void team_run(struct tdg_team *t, team_share_fn fn, void *arg)
{
#ifdef _OPENMP
    /* The routine's own OpenMP threads, pinned in the start-up region. */
#pragma omp parallel num_threads(t->threads)
    fn(t, omp_get_thread_num(), omp_get_num_threads(), arg);
#else
    /* Threads of tdg's own on the CPUs the runtime's threads are pinned to
     * after the warm-up call; the calling thread takes share 0. */
    pthread_t tid[TDG_MAX_THREADS];
    struct share_job jobs[TDG_MAX_THREADS];
    int k, started[TDG_MAX_THREADS];
    for (k = 1; k < t->threads; k++) {
        jobs[k].t = t;
        jobs[k].fn = fn;
        jobs[k].arg = arg;
        jobs[k].k = k;
        started[k] = pthread_create(&tid[k], NULL, share_thread_main, &jobs[k]) == 0;
        if (!started[k])
            fn(t, k, t->threads, arg);
    }
    fn(t, 0, t->threads, arg);
    for (k = 1; k < t->threads; k++)
        if (started[k])
            pthread_join(tid[k], NULL);
#endif
}

/* Share k of n of a block of `bytes`, in whole pages: the contiguous split
 * of a static schedule. */
static void page_share(size_t bytes, int k, int n, size_t *lo, size_t *hi)
{
    static size_t page;
    size_t pages;
    if (page == 0) {
        long ps = sysconf(_SC_PAGESIZE);
        page = ps > 0 ? (size_t)ps : 4096;
    }
    pages = (bytes + page - 1) / page;
    *lo = pages * (size_t)k / (size_t)n * page;
    *hi = pages * (size_t)(k + 1) / (size_t)n * page;
    if (*hi > bytes)
        *hi = bytes;
    if (*lo > *hi)
        *lo = *hi;
}

static void touch_share(struct tdg_team *t, int k, int n, void *arg)
{
    struct tdg_buf *b = arg;
    long before = thread_minor_faults();
    size_t r, lo, hi;
    for (r = 0; r < b->rows; r++) {
        page_share(b->row_bytes, k, n, &lo, &hi);
        if (lo < hi)
            touch_range((char *)b->row[r] + lo, hi - lo);
    }
    t->touch_faults[k] += thread_minor_faults() - before;
}

void tdg_team_first_touch(struct tdg_team *t, struct tdg_buf *b)
{
    if (t->first_touch)
        team_run(t, touch_share, b);
}

struct copy_job {
    struct tdg_buf *dst;
    const struct tdg_buf *src;
};

static void copy_share(struct tdg_team *t, int k, int n, void *arg)
{
    struct copy_job *c = arg;
    size_t r, lo, hi;
    (void)t;
    for (r = 0; r < c->src->rows && r < c->dst->rows; r++) {
        page_share(c->src->row_bytes, k, n, &lo, &hi);
        memcpy((char *)c->dst->row[r] + lo, (const char *)c->src->row[r] + lo, hi - lo);
    }
}

void tdg_team_copy(struct tdg_team *t, struct tdg_buf *dst, const struct tdg_buf *src)
{
    struct copy_job c;
    if (t->threads < 2) {
        tdg_buf_copy(dst, src);
        return;
    }
    c.dst = dst;
    c.src = src;
    team_run(t, copy_share, &c);
}

struct read_job {
    const struct tdg_buf *b;
    double sum[TDG_MAX_THREADS];
};

static void read_share(struct tdg_team *t, int k, int n, void *arg)
{
    struct read_job *j = arg;
    size_t r, lo, hi;
    (void)t;
    for (r = 0; r < j->b->rows; r++) {
        page_share(j->b->row_bytes, k, n, &lo, &hi);
        j->sum[k] += read_lines((const char *)j->b->row[r] + lo, hi - lo);
    }
}

double tdg_team_read(struct tdg_team *t, const struct tdg_buf *b)
{
    static struct read_job j;
    double s = 0.0;
    int k;
    if (t->threads < 2)
        return tdg_buf_read(b);
    memset(&j, 0, sizeof j);
    j.b = b;
    team_run(t, read_share, &j);
    for (k = 0; k < t->threads; k++)
        s += j.sum[k];
    if (b->row_pointers)
        s += read_lines((const char *)b->user, b->rows * sizeof(void *));
    return s;
}

/* Nanoseconds the task has run. First its CPU-time clock, the clock id
 * glibc's pthread_getcpuclockid builds from a thread id: the kernel brings
 * a thread that is running at that moment up to date, where schedstat lags
 * by up to a scheduler tick (a spinning OpenMP worker would read 0 ns over a
 * few short samples). Then schedstat, then utime+stime in clock ticks. */
static unsigned long long task_cpu_ns(int tid)
{
    char path[96], buf[1024];
    unsigned long long ns = 0;
    FILE *fp;
    struct timespec ts;
    clockid_t clock = (clockid_t)((~(unsigned)tid << 3) | 6u);
    if (clock_gettime(clock, &ts) == 0)
        return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
    snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", tid);
    fp = fopen(path, "r");
    if (fp != NULL) {
        int ok = fscanf(fp, "%llu", &ns) == 1;
        fclose(fp);
        if (ok)
            return ns;
    }
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
    fp = fopen(path, "r");
    if (fp != NULL) {
        if (fgets(buf, sizeof buf, fp) != NULL) {
            /* Fields 14 and 15, counted after the command's closing paren. */
            const char *q = strrchr(buf, ')');
            unsigned long long ut = 0, st = 0;
            if (q != NULL && sscanf(q + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) == 2) {
                long hz = sysconf(_SC_CLK_TCK);
                ns = (ut + st) * (1000000000ull / (unsigned long long)(hz > 0 ? hz : 100));
            }
        }
        fclose(fp);
    }
    return ns;
}

static void record_task(int tid, void *arg)
{
    struct tdg_team *t = arg;
    if (t->ntasks < TDG_MAX_THREADS) {
        t->tid[t->ntasks] = tid;
        t->cpu_ns[t->ntasks++] = task_cpu_ns(tid);
    }
}

void tdg_team_sampling_starts(struct tdg_team *t)
{
    t->self_cpu_ns = task_cpu_ns(gettid_portable());
    t->ntasks = 0;
    for_each_other_task(record_task, t);
}

struct busy_count {
    struct tdg_team *t;
    double threshold_ns;
};

static void count_busy(int tid, void *arg)
{
    struct busy_count *bc = arg;
    struct tdg_team *t = bc->t;
    unsigned long long before = 0, now = task_cpu_ns(tid);
    int k;
    /* A thread started during the samples ran all its time in them. */
    for (k = 0; k < t->ntasks; k++)
        if (t->tid[k] == tid)
            before = t->cpu_ns[k];
    if (now > before && (double)(now - before) >= bc->threshold_ns && t->ran < TDG_MAX_THREADS)
        t->busy_ms[t->ran++] = (double)(now - before) / 1e6;
}

void tdg_team_sampling_ends(struct tdg_team *t, double timed_ns)
{
    struct busy_count bc;
    bc.t = t;
    bc.threshold_ns = timed_ns / 4.0;
    t->ran = 1; /* this thread made every timed call */
    t->busy_ms[0] = (double)(task_cpu_ns(gettid_portable()) - t->self_cpu_ns) / 1e6;
    for_each_other_task(count_busy, &bc);
}
