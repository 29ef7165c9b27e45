/* tdg_instrument.h: in-application profiling of routine calls (tdg).
 *
 * Each profiled call stores one record (routine id, calling thread, the
 * number of threads the process ran with, start tick and elapsed ticks from
 * a serialised TSC read, up to TDG_MAX_VALUES parameter values) into a
 * buffer allocated once at start-up, with non-temporal stores so logging
 * does not evict the application's data. A record is whole 64-byte lines,
 * because only a full line can be streamed out without reading it first:
 * one line holds 5 values, each extension line 7 more. The buffer holds
 * TDG_PROFILE_ROUTINES x TDG_PROFILE_CALLS lines (or TDG_PROFILE_RECORDS).
 * Routines register on their first call, after the buffer exists, so their
 * number cannot size it: set TDG_PROFILE_ROUTINES (or build the runtime
 * with -DTDG_DEFAULT_ROUTINES=N). Calls that do not fit are counted as
 * dropped, per routine, and reported.
 * The buffer is written to $TDG_PROFILE_OUT ("%p" becomes the pid) at exit,
 * on fatal signals and on tdg_flush(). See docs/profiling.md for the
 * environment variables and the file format.
 *
 * Two ways in:
 *   - marker macros around a call site (for static or inlined routines):
 *       TDG_PROFILE("mult_su3", "n:i", mult_su3(a, b, c, n), n);
 *     or the begin/end pair:
 *       uint64_t t0 = tdg_begin();  ...  tdg_end(id, t0, nvalues, values);
 *   - a generated interposer (`tdg instrument SPEC`), no source change.
 */
#ifndef TDG_INSTRUMENT_H
#define TDG_INSTRUMENT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Parameter values recorded per call; more are ignored. Five fit in a
 * record's first line; each further 7 take one extension line. */
#define TDG_MAX_VALUES 40
/* Routines one process can register. */
#define TDG_MAX_ROUTINES 64

/* Registers (or looks up) a routine and returns its id, or -1 when the table
 * is full or profiling is disabled. `params` names the recorded values and
 * their kinds, comma-separated "name:kind" with kind i (signed integer),
 * u (unsigned integer), p (pointer, recorded as its address) or f (double,
 * recorded as its bit pattern); e.g. "crc:u,buf:p,len:u". Thread-safe. */
int tdg_routine(const char *name, const char *params);

/* Records where routine `id`'s definition was found (a generated interposer
 * says which loaded object it forwards to); written to the profile. */
void tdg_routine_defined_in(int id, const char *object);

/* Records the address of routine `id`'s code in this process (an
 * interposer knows the definition it forwards to): a driver started at the
 * same offset from a page times the routine as placed here. */
void tdg_routine_address(int id, uint64_t address);

/* Serialised start tick: no earlier instruction is still in flight and no
 * later one has started when the counter is read. */
uint64_t tdg_begin(void);

/* Serialised end tick, then one record for routine `id` that started at
 * `t0`, with `n` values (clamped to TDG_MAX_VALUES), the calling thread and
 * the number of threads the process runs with (OpenMP's team size where
 * libgomp is loaded, else the threads of the process). */
void tdg_end(int id, uint64_t t0, int n, const int64_t *values);

/* Writes everything recorded so far to the profile file now (the exit-time
 * write later replaces it with a superset). Returns 0 or -1 (errno set). */
int tdg_flush(void);

/* Records that could not be stored: the buffer was full, or `id` was not
 * one tdg_routine returned. */
uint64_t tdg_dropped(void);

/* Pointer argument for TDG_PROFILE's value list. */
#define TDG_PTR(p) ((int64_t)(intptr_t)(p))

/* TDG_PROFILE(name, params, call, values...): profiles one execution of the
 * statement `call` (e.g. `r = f(x, n)`), recording `values` (evaluated
 * before the call) under routine `name` described by `params`. */
#define TDG_PROFILE(name, params, call, ...)                                  \
    do {                                                                      \
        static int tdg_id_ = -2; /* registered once, race-free */          \
        int tdg_idv_ = __atomic_load_n(&tdg_id_, __ATOMIC_RELAXED);           \
        if (tdg_idv_ == -2) {                                                 \
            tdg_idv_ = tdg_routine((name), (params));                         \
            __atomic_store_n(&tdg_id_, tdg_idv_, __ATOMIC_RELAXED);           \
        }                                                                     \
        const int64_t tdg_values_[] = {__VA_ARGS__};                          \
        uint64_t tdg_t0_ = tdg_begin();                                       \
        call;                                                                 \
        tdg_end(tdg_idv_, tdg_t0_,                                            \
                (int)(sizeof tdg_values_ / sizeof tdg_values_[0]),            \
                tdg_values_);                                                 \
    } while (0)

#ifdef __cplusplus
}
#endif
#endif
