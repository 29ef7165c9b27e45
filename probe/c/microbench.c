/* Body of tdg's machine probe. tdg prepends the generated part (the unrolled
 * chase step, the sweep parameters and the timer table) and compiles the
 * result with the system C compiler; see probe/src/csource.rs. What it
 * shares with the CPU probe (random order, the clock, huge-page counts) is
 * in bench_common.c, prepended before it.
 *
 * Every experiment is a pointer chase: the addresses live in the buffer, so
 * the compiler cannot reorder or hoist the loads and no prefetcher can guess
 * the next one when the order is random. Modes print one "x y" line per
 * point so the statistics stay on the Rust side. */

static volatile uintptr_t chase_sink;

enum page_policy { PAGES_DEFAULT, PAGES_SMALL, PAGES_HUGE };

static void *alloc_buffer(size_t bytes, enum page_policy pages)
{
    void *p = NULL;
    size_t rounded = (bytes + TDG_HUGE_ALIGN - 1) / TDG_HUGE_ALIGN * TDG_HUGE_ALIGN;
    if (posix_memalign(&p, TDG_HUGE_ALIGN, rounded) != 0) {
        fprintf(stderr, "probe: cannot allocate %zu bytes\n", rounded);
        exit(3);
    }
#if defined(MADV_NOHUGEPAGE) && defined(MADV_HUGEPAGE)
    /* Small pages for the TLB curve (huge ones would hide its steps); huge
     * pages for the cache curve where available, so the physical placement
     * of 4 KiB pages does not cause conflict misses below the capacity. */
    if (pages == PAGES_SMALL)
        madvise(p, rounded, MADV_NOHUGEPAGE);
    else if (pages == PAGES_HUGE)
        madvise(p, rounded, MADV_HUGEPAGE);
#else
    (void)pages;
#endif
    memset(p, 0, rounded); /* fault every page in before anything is timed */
    return p;
}

/* Walks `accesses` links starting at `start`; returns ns per access. */
static double time_chase(void **start, size_t accesses)
{
    void **p = start;
    size_t rounds = accesses / TDG_UNROLL + 1, r;
    double t0, t1;
    t0 = now_ns();
    for (r = 0; r < rounds; r++) {
        TDG_CHASE_STEP
    }
    t1 = now_ns();
    chase_sink = (uintptr_t)p;
    return (t1 - t0) / (double)(rounds * TDG_UNROLL);
}

static double min_of_reps(void **start, size_t accesses, int reps)
{
    double best = 1e300;
    int i;
    for (i = 0; i < reps; i++) {
        double t = time_chase(start, accesses);
        if (t < best)
            best = t;
    }
    return best;
}

/* Many short repetitions rather than a few long ones: on a shared machine
 * another process evicting the cache inflates some repetitions, and the
 * minimum keeps the ones it did not touch. */
static size_t accesses_for(size_t elements)
{
    size_t a = elements * 2;
    return a < TDG_MIN_ACCESSES ? TDG_MIN_ACCESSES : a;
}

static int reps_for(size_t elements)
{
    return elements > ((size_t)1 << 16) ? TDG_REPS_LARGE : TDG_REPS;
}

/* A pointer chain through a buffer: one element per `stride` bytes; pages
 * are visited in random order and every line of a page is visited (in
 * random order) before the next page, so a TLB miss is amortised over
 * page/stride cache misses. */
struct chain {
    char *buf;
    void **first;
    size_t n;
};

static struct chain build_chain(size_t bytes, size_t stride, size_t page, enum page_policy policy)
{
    size_t per_page = page / stride, pages, n = bytes / stride, i, k = 0;
    size_t *page_order, *line_order, *order;
    struct chain c;
    if (n < 2)
        n = 2;
    pages = (n + per_page - 1) / per_page;
    c.buf = alloc_buffer(pages * page, policy);
    page_order = malloc(pages * sizeof *page_order);
    line_order = malloc(per_page * sizeof *line_order);
    order = malloc(n * sizeof *order);
    if (!page_order || !line_order || !order) {
        fprintf(stderr, "probe: out of memory\n");
        exit(3);
    }
    for (i = 0; i < pages; i++)
        page_order[i] = i;
    shuffle(page_order, pages);
    for (i = 0; i < pages && k < n; i++) {
        size_t lines = per_page, j;
        /* the last page visited may be partial when bytes is not page-sized */
        if (lines > n - k)
            lines = n - k;
        for (j = 0; j < per_page; j++)
            line_order[j] = j;
        shuffle(line_order, lines);
        for (j = 0; j < lines; j++)
            order[k++] = page_order[i] * page + line_order[j] * stride;
    }
    for (i = 0; i < n; i++)
        *(void **)(c.buf + order[i]) = c.buf + order[(i + 1) % n];
    c.first = (void **)(c.buf + order[0]);
    c.n = n;
    free(order);
    free(line_order);
    free(page_order);
    return c;
}

/* Cache curve point: ns per access over a warm buffer of `bytes`. */
static double chase_latency(size_t bytes, size_t stride, size_t page, long *thp_kb)
{
    struct chain c = build_chain(bytes, stride, page, PAGES_HUGE);
    double t;
    *thp_kb = huge_kb();
    time_chase(c.first, c.n * 2); /* warm: bring the buffer into the cache */
    t = min_of_reps(c.first, accesses_for(c.n), reps_for(c.n));
    free(c.buf);
    return t;
}

/* Flush sufficiency: an operand is made warm, a flush buffer of `bytes` is
 * read one word per line (as the drivers' read-flush does), then one pass
 * over the operand is timed. Enough flush makes that pass run at memory
 * latency. The minimum over repetitions keeps the most-cached outcome, so
 * a flush is only called sufficient when it evicts every time. */
static double after_flush_latency(struct chain *op, const char *flush, size_t bytes, size_t line, int reps)
{
    double best = 1e300;
    int r;
    for (r = 0; r < reps; r++) {
        uintptr_t s = 0;
        size_t i;
        double t;
        time_chase(op->first, op->n * 2);
        for (i = 0; i < bytes; i += line)
            s += *(const volatile uintptr_t *)(flush + i);
        chase_sink += s;
        t = time_chase(op->first, op->n);
        if (t < best)
            best = t;
    }
    return best;
}

/* Line size: pairs of accesses, the first to a random 512-byte-aligned slot
 * of a buffer far larger than the caches, the second `extent - ptr` bytes
 * further. While both fall in one line the second is a hit. */
static double pair_latency(size_t extent, size_t buffer_bytes)
{
    size_t slots = buffer_bytes / 512, i;
    size_t *slot = malloc(slots * sizeof *slot);
    char *buf = alloc_buffer(buffer_bytes, PAGES_DEFAULT);
    void **first;
    double t;
    if (!slot) {
        fprintf(stderr, "probe: out of memory\n");
        exit(3);
    }
    for (i = 0; i < slots; i++)
        slot[i] = i;
    shuffle(slot, slots);
    for (i = 0; i < slots; i++) {
        char *odd = buf + slot[i] * 512;
        char *even = odd + extent - sizeof(void *);
        *(void **)odd = even;
        *(void **)even = buf + slot[(i + 1) % slots] * 512;
    }
    first = (void **)(buf + slot[0] * 512);
    time_chase(first, slots * 2);
    /* per pair, so the step is the cost of the second access */
    t = 2.0 * min_of_reps(first, slots * 2, reps_for(slots));
    free(slot);
    free(buf);
    return t;
}

/* TLB curve: one element per page, each on a different line of its page so
 * the elements spread over the cache sets instead of piling into one. */
static double tlb_latency(size_t pages, size_t page, size_t line)
{
    size_t per_page = page / line, i;
    size_t *order = malloc(pages * sizeof *order);
    char *buf = alloc_buffer(pages * page, PAGES_SMALL);
    void **first;
    double t;
    if (!order) {
        fprintf(stderr, "probe: out of memory\n");
        exit(3);
    }
    for (i = 0; i < pages; i++)
        order[i] = i;
    shuffle(order, pages);
    for (i = 0; i < pages; i++) {
        char *from = buf + order[i] * page + (order[i] % per_page) * line;
        size_t nx = order[(i + 1) % pages];
        *(void **)from = buf + nx * page + (nx % per_page) * line;
    }
    first = (void **)(buf + order[0] * page + (order[0] % per_page) * line);
    time_chase(first, pages * 2);
    t = min_of_reps(first, accesses_for(pages), TDG_REPS);
    free(order);
    free(buf);
    return t;
}

/* Resolution: smallest non-zero step between consecutive distinct readings.
 * Overhead: mean cost of one reading, measured on CLOCK_MONOTONIC over a
 * long burst so its own resolution does not matter. */
static void measure_timer(int which)
{
    uint64_t best = UINT64_MAX;
    double t0, t1;
    int i, k;
    for (k = 0; k < 200; k++) {
        uint64_t a = tdg_read_timer(which), b;
        long spins = 0;
        do {
            b = tdg_read_timer(which);
        } while (b == a && ++spins < 100000000L);
        if (b > a && b - a < best)
            best = b - a;
    }
    t0 = now_ns();
    for (i = 0; i < TDG_TIMER_CALLS; i++)
        chase_sink += (uintptr_t)tdg_read_timer(which);
    t1 = now_ns();
    /* name, resolution (timer units), overhead (ns), claimed resolution (ns) */
    printf("%s %llu %.6g %.6g\n", tdg_timer_names[which], (unsigned long long)best,
           (t1 - t0) / TDG_TIMER_CALLS, tdg_timer_claimed_ns(which));
}

/* The TSC's rate in ticks per ns over five 40 ms windows; the Rust side
 * takes the median. Nothing where there is no TSC. */
static void measure_tsc(void)
{
#if TDG_X86
    int k;
    for (k = 0; k < 5; k++)
        printf("%.9g\n", tdg_tsc_hz_measured(40000000u) * 1e-9);
#endif
}

int main(int argc, char **argv)
{
    int i;
    if (argc < 2) {
        fprintf(stderr, "usage: %s chase|line|tlb|timers|tsc ARGS\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (strcmp(argv[1], "chase") == 0 && argc >= 5) {
        /* chase STRIDE PAGE BYTES... */
        size_t stride = strtoull(argv[2], NULL, 10), page = strtoull(argv[3], NULL, 10);
        double t0 = now_ns();
        /* Let the core leave its idle frequency before the first point. */
        while (now_ns() - t0 < 50e6)
            chase_sink++;
        for (i = 4; i < argc; i++) {
            size_t bytes = strtoull(argv[i], NULL, 10);
            long thp_kb = -1;
            double ns = chase_latency(bytes, stride, page, &thp_kb);
            printf("%zu %.6g %ld\n", bytes, ns, thp_kb);
        }
    } else if (strcmp(argv[1], "line") == 0 && argc >= 4) {
        /* line BUFFER_BYTES EXTENT... */
        size_t buffer = strtoull(argv[2], NULL, 10);
        for (i = 3; i < argc; i++) {
            size_t extent = strtoull(argv[i], NULL, 10);
            printf("%zu %.6g\n", extent, pair_latency(extent, buffer));
        }
    } else if (strcmp(argv[1], "tlb") == 0 && argc >= 5) {
        /* tlb PAGE LINE PAGES... */
        size_t page = strtoull(argv[2], NULL, 10), line = strtoull(argv[3], NULL, 10);
        for (i = 4; i < argc; i++) {
            size_t pages = strtoull(argv[i], NULL, 10);
            printf("%zu %.6g\n", pages, tlb_latency(pages, page, line));
        }
    } else if (strcmp(argv[1], "flush") == 0 && argc >= 7) {
        /* flush OPERAND_BYTES LINE PAGE FLUSH_BYTES... (ascending) */
        size_t op_bytes = strtoull(argv[2], NULL, 10), line = strtoull(argv[3], NULL, 10);
        size_t page = strtoull(argv[4], NULL, 10), max_flush = 0;
        struct chain op = build_chain(op_bytes, line, page, PAGES_HUGE);
        char *flush;
        for (i = 5; i < argc; i++)
            if (strtoull(argv[i], NULL, 10) > max_flush)
                max_flush = strtoull(argv[i], NULL, 10);
        flush = alloc_buffer(max_flush, PAGES_DEFAULT);
        time_chase(op.first, op.n * 2);
        printf("warm %.6g\n", min_of_reps(op.first, op.n, TDG_REPS));
        for (i = 5; i < argc; i++) {
            size_t bytes = strtoull(argv[i], NULL, 10);
            printf("%zu %.6g\n", bytes, after_flush_latency(&op, flush, bytes, line, TDG_REPS_LARGE));
        }
        free(flush);
        free(op.buf);
    } else if (strcmp(argv[1], "timers") == 0) {
        for (i = 0; i < TDG_TIMER_COUNT; i++)
            measure_timer(i);
    } else if (strcmp(argv[1], "tsc") == 0) {
        measure_tsc();
    } else {
        fprintf(stderr, "probe: bad arguments for mode %s\n", argv[1]);
        return 2;
    }
    return 0;
}
