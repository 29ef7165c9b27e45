/* Body of tdg's CPU probe. tdg prepends the generated part (the kernels:
 * integer chains, floating-point chains at each width and chain count, the
 * live-value kernels, and their tables) and compiles the result with the
 * system C compiler; see probe/src/cpusource.rs. What it shares with the
 * cache probe (random order, the clock, huge-page counts) is in
 * bench_common.c, prepended before it.
 *
 * Every kernel is timed X-Ray's way: its repetition count is doubled until
 * one run lasts at least TDG_MIN_NS, then the fastest of TDG_REPS runs is
 * kept (other work only ever adds time). Floating-point kernels are timed
 * beside a chain of dependent integer adds, one per cycle, so their cost
 * comes out in core cycles whatever the clock does meanwhile. Modes print
 * one line per point so the analysis stays on the Rust side. */

static volatile double fp_sink;
/* The cache line, from the command line of the modes that chase. */
static size_t line_bytes = 64;
static volatile uint64_t int_sink;

typedef double (*fp_kernel)(long);

/* Runs `k` with a repetition count doubled until one run takes at least
 * TDG_MIN_NS; returns that count. */
static long reps_for_min_time(fp_kernel k)
{
    long n = 1;
    for (;;) {
        double t0 = now_ns();
        fp_sink = k(n);
        if (now_ns() - t0 >= TDG_MIN_NS || n > (1L << 40))
            return n;
        n *= 2;
    }
}

/* ns per call of k(n), the fastest of TDG_REPS runs. */
static double best_ns(fp_kernel k, long n)
{
    double best = 1e300;
    int r;
    for (r = 0; r < TDG_REPS; r++) {
        double t0 = now_ns(), t;
        fp_sink = k(n);
        t = now_ns() - t0;
        if (t < best)
            best = t;
    }
    return best;
}

static double int_chain_kernel(long n)
{
    uint64_t x = int_sink, y = int_sink | 1;
    long i;
    for (i = 0; i < n; i++)
        TDG_INT_CHAIN(x, y);
    return (double)x;
}

static double int_parallel_kernel(long n)
{
    uint64_t a = int_sink, b = a + 1, c = a + 2, d = a + 3, e = a + 4, f = a + 5, y = int_sink | 1;
    long i;
    for (i = 0; i < n; i++)
        TDG_INT_PARALLEL(a, b, c, d, e, f, y);
    return (double)(a + b + c + d + e + f);
}

/* ns per dependent integer add: one core cycle. */
static double ns_per_cycle(void)
{
    static long n = 0;
    if (n == 0)
        n = reps_for_min_time(int_chain_kernel);
    return best_ns(int_chain_kernel, n) / ((double)n * TDG_INT_UNROLL);
}

/* fp OP WIDTH K: ns per operation and ns per cycle measured right beside it,
 * for every kernel of the table whose name matches. */
static void run_fp(const char *op, const char *width)
{
    int i;
    for (i = 0; i < TDG_FP_KERNELS; i++) {
        const struct tdg_fp_kernel *k = &tdg_fp_kernels[i];
        long n;
        double cycle_before, t, cycle_after;
        if (strcmp(k->op, op) != 0 || strcmp(k->width, width) != 0)
            continue;
        n = reps_for_min_time(k->fn);
        cycle_before = ns_per_cycle();
        t = best_ns(k->fn, n) / ((double)n * k->ops_per_rep);
        cycle_after = ns_per_cycle();
        printf("%s %s %d %.6g %.6g\n", k->op, k->width, k->chains, t,
               cycle_before < cycle_after ? cycle_before : cycle_after);
    }
}

/* live ISA: ns per operation of each live-value kernel. */
static void run_live(const char *isa)
{
    int i;
    for (i = 0; i < TDG_LIVE_KERNELS; i++) {
        const struct tdg_live_kernel *k = &tdg_live_kernels[i];
        long n;
        if (strcmp(k->isa, isa) != 0)
            continue;
        n = reps_for_min_time(k->fn);
        printf("%s %d %.6g %.6g\n", k->isa, k->values, best_ns(k->fn, n) / ((double)n * k->ops_per_rep),
               ns_per_cycle());
    }
}

/* ---- memory: conflict chases, shared caches, bandwidth ---- */

/* Huge-page aligned and advised, every page faulted in. */
static char *alloc_huge(size_t bytes)
{
    void *p = NULL;
    size_t rounded = (bytes + TDG_HUGE_ALIGN - 1) / TDG_HUGE_ALIGN * TDG_HUGE_ALIGN;
    if (posix_memalign(&p, TDG_HUGE_ALIGN, rounded) != 0) {
        fprintf(stderr, "probe: cannot allocate %zu bytes\n", rounded);
        exit(3);
    }
#ifdef MADV_HUGEPAGE
    madvise(p, rounded, MADV_HUGEPAGE);
#endif
    memset(p, 1, rounded);
    return p;
}

static size_t *alloc_index(size_t n)
{
    size_t *v = malloc((n ? n : 1) * sizeof *v);
    if (!v) {
        fprintf(stderr, "probe: out of memory\n");
        exit(3);
    }
    return v;
}

/* Links the given byte offsets of buf into one cycle in random order;
 * returns its first element. */
static void **link_cycle(char *buf, size_t *offsets, size_t n)
{
    size_t i;
    shuffle(offsets, n);
    for (i = 0; i < n; i++)
        *(void **)(buf + offsets[i]) = buf + offsets[(i + 1) % n];
    return (void **)(buf + offsets[0]);
}

static double chase_ns(void **start, size_t accesses)
{
    void **p = start;
    size_t i;
    double t0 = now_ns(), t;
    for (i = 0; i < accesses; i += 8) {
        p = (void **)*p; p = (void **)*p; p = (void **)*p; p = (void **)*p;
        p = (void **)*p; p = (void **)*p; p = (void **)*p; p = (void **)*p;
    }
    t = now_ns() - t0;
    int_sink += (uint64_t)(uintptr_t)p;
    return t / (double)((accesses + 7) / 8 * 8);
}

static double best_chase_ns(void **start, size_t accesses, int reps)
{
    double best = 1e300;
    int r;
    chase_ns(start, accesses);
    for (r = 0; r < reps; r++) {
        double t = chase_ns(start, accesses);
        if (t < best)
            best = t;
    }
    return best;
}

/* ways STRIDE SETS KMAX LINE: for k = 1..KMAX, SETS groups of k addresses
 * STRIDE bytes apart (each group in one cache set, the groups LINE*7 bytes
 * apart so they use different sets), chased in random order. Prints
 * "k ns thp_kb". */
static void run_ways(size_t stride, size_t sets, size_t kmax, size_t line)
{
    size_t k;
    char *buf = alloc_huge(kmax * stride + sets * line * 7);
    size_t *off = alloc_index(kmax * sets);
    long thp = huge_kb();
    for (k = 1; k <= kmax; k++) {
        size_t i, s, n = 0;
        void **first;
        for (s = 0; s < sets; s++)
            for (i = 0; i < k; i++)
                off[n++] = i * stride + s * line * 7;
        first = link_cycle(buf, off, n);
        printf("%zu %.6g %ld\n", k, best_chase_ns(first, 1 << 16, TDG_REPS), thp);
    }
    free(off);
    free(buf);
}

/* ---- eviction sets: a cache's ways whatever the physical placement ----
 *
 * A stride only meets one set of a physically indexed cache when the
 * addresses agree in the physical bits the set index is made of, which a
 * virtual machine's memory does not promise (nor a cache that hashes the
 * index). An eviction set needs no such promise: from a pool of lines
 * several times the cache's size (so every set holds several times its
 * ways of them), drop every line the others can evict the target without;
 * what is left, in a cache with LRU-like replacement, is one line per way. */

static volatile const char *tlb_neighbour;

/* TSC ticks to load *p, fenced so only that load is between the reads. */
static uint64_t timed_load(const volatile char *p)
{
    uint64_t t0, t1;
    (void)*tlb_neighbour; /* its page's translation, so the load pays none */
    _mm_mfence();
    t0 = tdg_tsc_begin();
    (void)*p;
    t1 = tdg_tsc_end();
    return t1 - t0;
}

/* Does touching every line of set[0..n) (TDG_EVICT_PASSES times) push x out
 * of the cache? The fastest of `reps` reloads decides: other work only
 * ever slows a reload. */
static int evicts(const volatile char *x, char **set, size_t n, uint64_t threshold, int reps)
{
    uint64_t best = UINT64_MAX;
    int r, pass;
    size_t i;
    for (r = 0; r < reps; r++) {
        uint64_t t;
        (void)*x;
        for (pass = 0; pass < TDG_EVICT_PASSES; pass++)
            for (i = 0; i < n; i++)
                (void)*(volatile char *)set[i];
        t = timed_load(x);
        if (t < best)
            best = t;
    }
    return best > threshold;
}

/* Reduces set[0..n) to a minimal eviction set of x: chunks of halving size
 * are dropped while the rest still evicts x. Returns its size, or 0 when
 * the whole set does not evict x or the result fails a longer test. */
static size_t reduce(const volatile char *x, char **set, size_t n, uint64_t threshold)
{
    size_t chunk = n / 2, i;
    char **rest = malloc(n * sizeof *rest);
    if (!rest) {
        fprintf(stderr, "probe: out of memory\n");
        exit(3);
    }
    if (!evicts(x, set, n, threshold, TDG_EVICT_REPS)) {
        free(rest);
        return 0;
    }
    while (chunk >= 1) {
        i = 0;
        while (i < n) {
            size_t len = i + chunk <= n ? chunk : n - i, m = 0, j;
            for (j = 0; j < n; j++)
                if (j < i || j >= i + len)
                    rest[m++] = set[j];
            if (m > 0 && evicts(x, rest, m, threshold, TDG_EVICT_REPS)) {
                memcpy(set, rest, m * sizeof *rest);
                n = m;
            } else {
                i += len;
            }
        }
        chunk /= 2;
    }
    free(rest);
    /* A set that only looked sufficient under noise fails a longer test. */
    return evicts(x, set, n, threshold, 3 * TDG_EVICT_REPS) ? n : 0;
}

/* evict POOL_BYTES LINE PAGE FLUSH_BYTES TARGETS: eviction sets for TARGETS
 * (at most 8) lines, each alone in its 64 KiB, from a pool of every line of
 * POOL_BYTES. First the reload times of a target just pushed out of L1 only
 * by lines of its L1 set ("hit"), and after reading FLUSH_BYTES (pushed out
 * of the cache under test into the next level, "next"); the threshold is
 * halfway. Prints "hit T", "next T", then one "set SIZE" per target (0: no
 * eviction set found). */
static void run_evict(size_t pool_bytes, size_t line, size_t page, size_t flush_bytes, int targets)
{
    size_t lines = pool_bytes / line, i;
    char *pool = alloc_huge(pool_bytes);
    char *flush = alloc_huge(flush_bytes);
    /* The targets, 64 KiB apart, and the line whose load warms their
     * translation, far from them: a neighbour in the target's own page
     * that misses makes the region prefetchers fetch the target back. */
    char *homes = alloc_huge(TDG_HUGE_ALIGN);
    char **all = malloc(lines * sizeof *all), **set = malloc(lines * sizeof *set);
    uint64_t hit = UINT64_MAX, next = UINT64_MAX, threshold;
    int t, r;
    if (!all || !set) {
        fprintf(stderr, "probe: out of memory\n");
        exit(3);
    }
    for (i = 0; i < lines; i++)
        all[i] = pool + i * line;
    tlb_neighbour = homes + TDG_HUGE_ALIGN / 2 + page / 2;
    for (t = 0; t < targets; t++) {
        const volatile char *x = homes + (size_t)t * (64 << 10) + page / 2;
        size_t k;
        for (r = 0; r < 4 * TDG_EVICT_REPS; r++) {
            uint64_t th;
            (void)*x;
            /* Lines one L1 way apart push x out of L1 and, being few, not
             * out of the next level. */
            for (k = 1; k <= 32; k++)
                (void)*(volatile char *)(flush + k * page + page / 2);
            th = timed_load(x);
            if (th < hit)
                hit = th;
            (void)*x;
            for (k = 0; k < flush_bytes; k += line)
                (void)*(volatile char *)(flush + k);
            th = timed_load(x);
            if (th < next)
                next = th;
        }
    }
    threshold = hit + (next > hit ? (next - hit) / 2 : 0);
    printf("hit %llu\nnext %llu\n", (unsigned long long)hit, (unsigned long long)next);
    for (t = 0; t < targets; t++) {
        const volatile char *x = homes + (size_t)t * (64 << 10) + page / 2;
        memcpy(set, all, lines * sizeof *set);
        printf("set %zu\n", reduce(x, set, lines, threshold));
    }
    free(set);
    free(all);
    free(homes);
    free(flush);
    free(pool);
}

static int pin_to(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

/* Pairs and bandwidth run one measuring thread, timed pass by pass in its
 * own CPU time (so being descheduled by other work on the machine does not
 * count), beside pressure threads on the other CPUs that repeat the same
 * work until it is done. The median pass counts. */
static volatile int stop_flag, ready_count;

enum pair_work { WORK_COMPUTE, WORK_CHASE, WORK_READ };

struct worker {
    pthread_t thread;
    int cpu;
    enum pair_work work;
    size_t bytes;   /* chase or read buffer */
    char *buf;
    void **cursor;  /* chase: where the next pass continues */
    size_t read_at; /* read: where the next pass continues */
    long unit;      /* per pass: compute repetitions, chase accesses, bytes read */
    int passes;     /* 0: a pressure thread, until stop_flag */
    double ns;      /* median CPU ns per unit of work */
    int failed;
};

static double thread_cpu_ns(void)
{
    return (double)tdg_clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

static void prepare(struct worker *w)
{
    if (w->buf)
        return;
    w->buf = alloc_huge(w->bytes);
    if (w->work == WORK_CHASE) {
        size_t n = w->bytes / line_bytes, i;
        size_t *off = alloc_index(n);
        for (i = 0; i < n; i++)
            off[i] = i * line_bytes;
        w->cursor = link_cycle(w->buf, off, n);
        free(off);
    }
}

/* One pass of the worker's work; returns its CPU time in ns. */
static double one_pass(struct worker *w)
{
    double t0 = thread_cpu_ns();
    switch (w->work) {
    case WORK_COMPUTE:
        fp_sink = int_parallel_kernel(w->unit);
        break;
    case WORK_CHASE: {
        void **p = w->cursor;
        long i;
        for (i = 0; i < w->unit; i += 4) {
            p = (void **)*p; p = (void **)*p; p = (void **)*p; p = (void **)*p;
        }
        w->cursor = p;
        break;
    }
    case WORK_READ: {
        const uint64_t *word;
        size_t i, n = (size_t)w->unit / sizeof *word;
        uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        if (w->read_at + (size_t)w->unit > w->bytes)
            w->read_at = 0;
        word = (const uint64_t *)(w->buf + w->read_at);
        for (i = 0; i + 8 <= n; i += 8) {
            s0 += word[i] + word[i + 4];
            s1 += word[i + 1] + word[i + 5];
            s2 += word[i + 2] + word[i + 6];
            s3 += word[i + 3] + word[i + 7];
        }
        int_sink += s0 + s1 + s2 + s3;
        w->read_at += (size_t)w->unit;
        break;
    }
    }
    return thread_cpu_ns() - t0;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    if (pin_to(w->cpu) != 0) {
        w->failed = 1;
        __atomic_fetch_add(&ready_count, 1, __ATOMIC_SEQ_CST);
        return NULL;
    }
    prepare(w);
    /* Warm: a chase walks its whole buffer, the others one pass. */
    if (w->work == WORK_CHASE) {
        long unit = w->unit;
        w->unit = (long)(2 * (w->bytes / line_bytes));
        one_pass(w);
        w->unit = unit;
    } else {
        one_pass(w);
    }
    __atomic_fetch_add(&ready_count, 1, __ATOMIC_SEQ_CST);
    if (w->passes == 0) {
        while (!__atomic_load_n(&stop_flag, __ATOMIC_SEQ_CST))
            one_pass(w);
    } else {
        double t[TDG_PASSES];
        int i, n = w->passes < TDG_PASSES ? w->passes : TDG_PASSES;
        for (i = 0; i < n; i++)
            t[i] = one_pass(w);
        qsort(t, (size_t)n, sizeof t[0], by_value);
        w->ns = t[n / 2] / (double)w->unit;
    }
    return NULL;
}

static void start(struct worker *w)
{
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
        fprintf(stderr, "probe: cannot start a thread\n");
        exit(3);
    }
}

/* Measures w[0] with w[1..count-1] as pressure threads (none: alone);
 * returns w[0]'s median CPU ns per unit. */
static double measure_beside(struct worker *w, int count)
{
    int i;
    stop_flag = 0;
    ready_count = 0;
    for (i = 1; i < count; i++) {
        w[i].passes = 0;
        w[i].failed = 0;
        start(&w[i]);
    }
    while (__atomic_load_n(&ready_count, __ATOMIC_SEQ_CST) < count - 1)
        sched_yield();
    w[0].passes = TDG_PASSES;
    w[0].failed = 0;
    start(&w[0]);
    pthread_join(w[0].thread, NULL);
    __atomic_store_n(&stop_flag, 1, __ATOMIC_SEQ_CST);
    for (i = 1; i < count; i++)
        pthread_join(w[i].thread, NULL);
    for (i = 0; i < count; i++)
        if (w[i].failed) {
            fprintf(stderr, "probe: cannot run on CPU %d\n", w[i].cpu);
            exit(4);
        }
    return w[0].ns;
}

/* pair A B LINE BYTES...: how much B doing the same work slows A down.
 * First the saturating integer kernel, then a chase of each buffer size.
 * Prints "compute alone together" and "chase BYTES alone together" (CPU ns
 * per repetition or per access). */
static void run_pair(int a, int b, int nbytes, char **bytes)
{
    struct worker w[2];
    double alone, together;
    long n = reps_for_min_time(int_parallel_kernel);
    int i;
    memset(w, 0, sizeof w);
    w[0].cpu = a;
    w[1].cpu = b;
    w[0].work = w[1].work = WORK_COMPUTE;
    w[0].unit = w[1].unit = n;
    alone = measure_beside(w, 1);
    together = measure_beside(w, 2);
    printf("compute %.6g %.6g\n", alone, together);
    for (i = 0; i < nbytes; i++) {
        size_t size = strtoull(bytes[i], NULL, 10);
        memset(w, 0, sizeof w);
        w[0].cpu = a;
        w[1].cpu = b;
        w[0].work = w[1].work = WORK_CHASE;
        w[0].bytes = w[1].bytes = size;
        w[0].unit = w[1].unit = TDG_CHASE_PASS;
        alone = measure_beside(w, 1);
        together = measure_beside(w, 2);
        printf("chase %zu %.6g %.6g\n", size, alone, together);
        free(w[0].buf);
        free(w[1].buf);
    }
}

/* bandwidth BYTES CPU...: reading BYTES from memory on the first CPU alone,
 * then BYTES split over every listed CPU, all reading at once. Prints
 * "one GB/s" and "all GB/s" (the first CPU's rate times the CPU count). */
static void run_bandwidth(size_t bytes, int ncpus, char **cpus)
{
    struct worker *w = calloc((size_t)ncpus, sizeof *w);
    double one, all;
    int i;
    if (!w) {
        fprintf(stderr, "probe: out of memory\n");
        exit(3);
    }
    w[0].cpu = atoi(cpus[0]);
    w[0].work = WORK_READ;
    w[0].bytes = bytes;
    w[0].unit = TDG_READ_PASS;
    one = measure_beside(w, 1);
    free(w[0].buf);
    memset(w, 0, (size_t)ncpus * sizeof *w);
    for (i = 0; i < ncpus; i++) {
        w[i].cpu = atoi(cpus[i]);
        w[i].work = WORK_READ;
        w[i].bytes = bytes / (size_t)ncpus / TDG_READ_PASS * TDG_READ_PASS;
        if (w[i].bytes < TDG_READ_PASS)
            w[i].bytes = TDG_READ_PASS;
        w[i].unit = TDG_READ_PASS;
    }
    all = measure_beside(w, ncpus) / (double)ncpus;
    for (i = 0; i < ncpus; i++)
        free(w[i].buf);
    free(w);
    /* ns per byte -> GB/s */
    printf("one %.6g\nall %.6g\n", 1.0 / one, 1.0 / all);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s clock|fp|live|fused|ways|evict|pair|bandwidth ARGS\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    {
        /* Let the core leave its idle frequency before anything is timed. */
        double t0 = now_ns();
        while (now_ns() - t0 < 50e6)
            int_sink++;
    }
    if (strcmp(argv[1], "clock") == 0) {
        int k;
        for (k = 0; k < 5; k++)
            printf("%.6g\n", ns_per_cycle());
    } else if (strcmp(argv[1], "fp") == 0 && argc >= 4 && argc % 2 == 0) {
        int i;
        for (i = 2; i + 1 < argc; i += 2)
            run_fp(argv[i], argv[i + 1]);
    } else if (strcmp(argv[1], "live") == 0 && argc >= 3) {
        int i;
        for (i = 2; i < argc; i++)
            run_live(argv[i]);
    } else if (strcmp(argv[1], "fused") == 0) {
        tdg_fused_check();
    } else if (strcmp(argv[1], "ways") == 0 && argc == 6) {
        run_ways(strtoull(argv[2], NULL, 10), strtoull(argv[3], NULL, 10), strtoull(argv[4], NULL, 10),
                 strtoull(argv[5], NULL, 10));
    } else if (strcmp(argv[1], "evict") == 0 && argc == 7 && atoi(argv[6]) > 0 && atoi(argv[6]) <= 8) {
        run_evict(strtoull(argv[2], NULL, 10), strtoull(argv[3], NULL, 10), strtoull(argv[4], NULL, 10),
                  strtoull(argv[5], NULL, 10), atoi(argv[6]));
    } else if (strcmp(argv[1], "pair") == 0 && argc >= 5) {
        line_bytes = strtoull(argv[4], NULL, 10);
        if (line_bytes < sizeof(void *))
            line_bytes = 64;
        run_pair(atoi(argv[2]), atoi(argv[3]), argc - 5, argv + 5);
    } else if (strcmp(argv[1], "bandwidth") == 0 && argc >= 4) {
        run_bandwidth(strtoull(argv[2], NULL, 10), argc - 3, argv + 3);
    } else {
        fprintf(stderr, "probe: bad arguments for mode %s\n", argv[1]);
        return 2;
    }
    return 0;
}
