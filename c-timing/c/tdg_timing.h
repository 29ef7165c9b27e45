/*
 * tdg_timing.h: the one C timing layer of tdg. The timing driver's runtime,
 * the profiling runtime and its interposers, the checkpoint host library and
 * the probe's micro-benchmarks all read time through this header, so a tick,
 * an overhead and a fallback mean the same thing in each of them. Plain C
 * (C99 with GNU asm); everything is static inline, so a file that includes
 * it pays only for what it calls.
 *
 * The method is the ATLAS timers' (Whaley & Castaldo, "Achieving accurate
 * and context-sensitive timing for code optimization"):
 *
 * - The cycle counter is read serialised on both ends. A bare rdtsc may
 *   execute before earlier instructions retire or after later ones start,
 *   so a short interval could lose or gain work at either edge. lfence
 *   before the start read waits for earlier work; lfence after it keeps the
 *   timed code from starting early. The end read is rdtscp, which waits for
 *   the timed code's instructions to retire, and the lfence after it keeps
 *   whatever follows (logging, the next sample) out. cpuid would serialise
 *   as well but traps to the hypervisor in a virtual machine, adding
 *   microseconds of noise.
 * - Only the difference of two reads is ever converted to floating point,
 *   in integer first, so no low-order cycles are lost to a double's 53-bit
 *   mantissa.
 * - The counter is trusted only when it is invariant (cpuid 0x80000007
 *   EDX[8]: one rate in every P-state, running in every C-state) and rdtscp
 *   exists. tdg_tsc_unusable_reason() is the one place that decides it;
 *   tdg's Rust side asks a program built with this header instead of
 *   reading /proc/cpuinfo again.
 * - Without a trusted counter, time is CLOCK_MONOTONIC_RAW: monotonic, and
 *   not slewed by NTP, so a difference of two reads is elapsed time at the
 *   hardware clock's rate. It goes through the vDSO (~20-150 ns a read), so
 *   it suits intervals of microseconds and longer.
 * - A timer's own cost is the minimum over many back-to-back begin/end
 *   pairs: other activity only ever adds time, so the minimum is what an
 *   empty interval costs, and it is subtracted from every timed interval.
 */
#ifndef TDG_TIMING_H
#define TDG_TIMING_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#define TDG_X86 1
#include <cpuid.h>
#else
#define TDG_X86 0
#endif

/* The clock every runtime falls back to without a trusted cycle counter. */
#define TDG_FALLBACK_CLOCK CLOCK_MONOTONIC_RAW

static inline uint64_t tdg_clock_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t tdg_fallback_ns(void)
{
    return tdg_clock_ns(TDG_FALLBACK_CLOCK);
}

/* Start of a timed interval: nothing earlier leaks in, nothing timed starts
 * before the read. 0 where there is no cycle counter. */
static inline uint64_t tdg_tsc_begin(void)
{
#if TDG_X86
    uint32_t lo, hi;
    __asm__ __volatile__("lfence\n\trdtsc\n\tlfence" : "=a"(lo), "=d"(hi)::"memory");
    return ((uint64_t)hi << 32) | lo;
#else
    return 0;
#endif
}

/* End of a timed interval: the timed instructions have retired, nothing
 * later has started. */
static inline uint64_t tdg_tsc_end(void)
{
#if TDG_X86
    uint32_t lo, hi, aux;
    __asm__ __volatile__("rdtscp\n\tlfence" : "=a"(lo), "=d"(hi), "=c"(aux)::"memory");
    (void)aux;
    return ((uint64_t)hi << 32) | lo;
#else
    return 0;
#endif
}

/* An unserialised read, for pairing the counter with a clock read (rate
 * measurement, timestamps), where a few cycles of reordering are below the
 * clock's own resolution and the fences would only widen the bracket. */
static inline uint64_t tdg_tsc_read(void)
{
#if TDG_X86
    uint32_t lo, hi;
    __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi)::"memory");
    return ((uint64_t)hi << 32) | lo;
#else
    return 0;
#endif
}

/* NULL when the cycle counter can time intervals on this processor, else
 * why not (one phrase, no trailing punctuation). */
static inline const char *tdg_tsc_unusable_reason(void)
{
#if TDG_X86
    unsigned a, b, c, d;
    if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u)
        return "the processor does not report whether its TSC is invariant (no cpuid leaf 0x80000007)";
    __get_cpuid(0x80000007u, &a, &b, &c, &d);
    if (!((d >> 8) & 1u))
        return "the TSC is not invariant (cpuid 0x80000007 EDX[8] clear)";
    if (!__get_cpuid(0x80000001u, &a, &b, &c, &d) || !((d >> 27) & 1u))
        return "the CPU has no rdtscp";
    return NULL;
#else
    return "no cycle counter on this architecture";
#endif
}

/* The counter's rate as the processor documents it (cpuid leaf 0x15:
 * crystal clock times the TSC/crystal ratio), 0 when it does not. */
static inline double tdg_tsc_hz_documented(void)
{
#if TDG_X86
    unsigned a, b, c, d;
    if ((unsigned)__get_cpuid_max(0, NULL) < 0x15u)
        return 0.0;
    __cpuid_count(0x15u, 0, a, b, c, d);
    if (a == 0 || b == 0 || c == 0)
        return 0.0;
    return (double)c * (double)b / (double)a;
#else
    return 0.0;
#endif
}

/* One (counter, fallback clock) pair taken at the same instant: the clock
 * read bracketed by two counter reads, the tightest bracket of 32 tries
 * kept. A preemption inside a single bracket would otherwise shift the pair
 * by a time slice and skew any rate derived from it. */
static inline void tdg_tsc_clock_pair(uint64_t *tick, uint64_t *ns)
{
    uint64_t best = UINT64_MAX;
    int i;
    *tick = 0;
    *ns = 0;
    for (i = 0; i < 32; i++) {
        uint64_t a = tdg_tsc_read();
        uint64_t t = tdg_fallback_ns();
        uint64_t b = tdg_tsc_read();
        if (b - a < best) {
            best = b - a;
            *tick = a + (b - a) / 2;
            *ns = t;
        }
    }
}

/* The counter's rate in Hz measured against the fallback clock over a busy
 * window of at least `window_ns`. */
static inline double tdg_tsc_hz_measured(uint64_t window_ns)
{
    uint64_t t0, n0, t1, n1;
    tdg_tsc_clock_pair(&t0, &n0);
    do
        tdg_tsc_clock_pair(&t1, &n1);
    while (n1 - n0 < window_ns);
    return (double)(t1 - t0) * 1e9 / (double)(n1 - n0);
}

/* What an empty interval costs with a begin/end pair of reads: the minimum
 * over `pairs` back-to-back pairs (the overhead to subtract), the smallest
 * non-zero difference seen (the resolution), and the smallest difference
 * between two distinct pair costs (the step the counter advances in as read
 * this way: a VM's TSC can move several ticks at once, so a short region's
 * times come in that step); UINT64_MAX where none was seen. Given the inline
 * readers above, the compiler inlines them into the loop; given out-of-line
 * functions, every pair pays their calls, as an interval timed through those
 * functions does. */
struct tdg_pair_cost {
    uint64_t min;
    uint64_t finest;
    uint64_t step;
};

/* Pair costs cluster on a few values; the step is read from the first this
 * many distinct ones. */
#define TDG_PAIR_COST_VALUES 64

static inline struct tdg_pair_cost tdg_pair_cost(uint64_t (*begin)(void), uint64_t (*end)(void), int pairs)
{
    struct tdg_pair_cost c = {UINT64_MAX, UINT64_MAX, UINT64_MAX};
    uint64_t seen[TDG_PAIR_COST_VALUES];
    int i, j, distinct = 0;
    for (i = 0; i < pairs; i++) {
        uint64_t a = begin();
        uint64_t b = end();
        uint64_t d = b - a;
        if (d < c.min)
            c.min = d;
        if (d > 0 && d < c.finest)
            c.finest = d;
        for (j = 0; j < distinct && seen[j] != d; j++)
            ;
        if (j == distinct && distinct < TDG_PAIR_COST_VALUES)
            seen[distinct++] = d;
    }
    for (i = 0; i < distinct; i++)
        for (j = i + 1; j < distinct; j++) {
            uint64_t gap = seen[i] > seen[j] ? seen[i] - seen[j] : seen[j] - seen[i];
            if (gap < c.step)
                c.step = gap;
        }
    return c;
}

#endif
