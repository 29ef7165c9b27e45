/* tdg_checkpoint.h: checkpoint a running application just before (or a few
 * calls before) a region of interest, so `tdg checkpoint time` can restore the
 * image many times and time the region on the application's own memory.
 *
 * Two ways to mark the region:
 *
 *  1. Region markers (tdg picks the call and the delay at run time, no rebuild):
 *         tdg_region_begin("mainSimpleSort");
 *         mainSimpleSort(...);
 *         tdg_region_end("mainSimpleSort");
 *     `tdg checkpoint capture --site S --call N --delay K` checkpoints before
 *     call N-K of site S; every restored copy replays calls N-K..N-1 (rebuilding
 *     the cache state) and times call N. Outside tdg the markers cost one branch.
 *
 *  2. The explicit pair (the delay is wherever you put the enter call):
 *         if (tdg_enter_checkpoint("img") < 0) { ... could not checkpoint ... }
 *         ... region ...
 *         tdg_stop_checkpoint();
 *     In the original process enter checkpoints and returns
 *     TDG_CHECKPOINT_ORIGINAL, and stop does nothing. In a restored copy enter
 *     returns TDG_CHECKPOINT_RESTORED, and stop reports the time since enter
 *     and ends the copy.
 *
 * A redirectable call (so a restored copy can run a candidate implementation):
 *         tdg_region_begin("sort");
 *         TDG_ROUTINE("sort", hybrid_sort)(a, n);
 *         tdg_region_end("sort");
 *     In plain runs and in the original process TDG_ROUTINE yields the
 *     application's own function (one load and a predictable branch). In a
 *     restored copy that `tdg checkpoint time --impl K.c` told to load K.c's
 *     shared object, it yields K.c's function of the same name. Generated
 *     interposition shims call tdg_redirect() directly with the original's
 *     address. Link the application with -rdynamic so a candidate can use the
 *     application's globals and helpers.
 *
 * Outputs to verify a candidate against the original on the image:
 *         TDG_REGION_OUTPUT("sort", a, n);      (before tdg_region_begin)
 *     names n elements at a that the coming call writes. A restored copy hands
 *     them to tdg after the timed call; plain runs only store the pointer.
 *
 * Build: compile tdg_checkpoint.c with the application (C99, Linux; libcriu is
 * loaded at run time from the path tdg passes, so no -lcriu is needed).
 */
#ifndef TDG_CHECKPOINT_H
#define TDG_CHECKPOINT_H

#ifdef __cplusplus
extern "C" {
#endif

#define TDG_CHECKPOINT_ERROR (-1)
#define TDG_CHECKPOINT_ORIGINAL 0
#define TDG_CHECKPOINT_RESTORED 1

int tdg_enter_checkpoint(const char *image_dir);
void tdg_stop_checkpoint(void);

void tdg_region_begin(const char *site);
void tdg_region_end(const char *site);

/* The function to call for `symbol` at `site`: `original` unless this is a
 * restored copy whose candidate defines `symbol`. */
void *tdg_redirect(const char *site, const char *symbol, void *original);

/* Element kinds of an output, for comparing candidate and original. */
#define TDG_OUTPUT_BYTES 0
#define TDG_OUTPUT_SIGNED 1
#define TDG_OUTPUT_UNSIGNED 2
#define TDG_OUTPUT_FLOAT 3
void tdg_region_output(const char *site, const void *data, unsigned long count,
                       unsigned long elem_size, int kind);

#define TDG_ROUTINE(site, fn) ((__typeof__(&(fn)))tdg_redirect((site), #fn, (void *)(fn)))

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define TDG_OUTPUT_KIND(x)                                                                     \
    _Generic((x), float: TDG_OUTPUT_FLOAT, double: TDG_OUTPUT_FLOAT,                           \
             long double: TDG_OUTPUT_FLOAT, signed char: TDG_OUTPUT_SIGNED,                    \
             short: TDG_OUTPUT_SIGNED, int: TDG_OUTPUT_SIGNED, long: TDG_OUTPUT_SIGNED,        \
             long long: TDG_OUTPUT_SIGNED, unsigned char: TDG_OUTPUT_UNSIGNED,                 \
             unsigned short: TDG_OUTPUT_UNSIGNED, unsigned: TDG_OUTPUT_UNSIGNED,               \
             unsigned long: TDG_OUTPUT_UNSIGNED, unsigned long long: TDG_OUTPUT_UNSIGNED,      \
             default: TDG_OUTPUT_BYTES)
#else
#define TDG_OUTPUT_KIND(x) TDG_OUTPUT_BYTES
#endif
#define TDG_REGION_OUTPUT(site, ptr, count)                                                    \
    tdg_region_output((site), (ptr), (unsigned long)(count), (unsigned long)sizeof *(ptr),     \
                      TDG_OUTPUT_KIND(*(ptr)))

#ifdef __cplusplus
}
#endif

#endif /* TDG_CHECKPOINT_H */
