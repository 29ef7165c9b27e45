/* tdg_resolve.h: finding the definition a generated interposer forwards to
 * (tdg). Compiled into every LD_PRELOAD shim `tdg instrument` builds.
 *
 * An interposer placed first by LD_PRELOAD must call the definition the
 * program would have called without it. dlsym(RTLD_NEXT) only searches the
 * global scope after the shim; a library an interpreter or plugin host
 * opened with dlopen(RTLD_LOCAL) (numpy's BLAS under python3) is not in it.
 * So the search goes on through the calling object's own dependencies and
 * then every loaded object, and it happens on the first call, not at load
 * time, so a library dlopen'ed later is found too. See docs/profiling.md. */
#ifndef TDG_RESOLVE_H
#define TDG_RESOLVE_H

#ifdef __cplusplus
extern "C" {
#endif

/* Exit status of a program whose interposed routine is defined nowhere:
 * there is nothing to forward the call to, so it cannot go on. Distinct
 * from the statuses programs and shells commonly use; `tdg profile`
 * recognises it and explains. */
#define TDG_EXIT_UNRESOLVED 87

/* Address of the definition of `symbol` that the program would have called
 * without the interposer containing `self`, searched in this order:
 *   1. dlsym(RTLD_NEXT): the global scope after the interposer (the
 *      program, its DT_NEEDED libraries, RTLD_GLOBAL dlopens);
 *   2. the object that made the call (`caller`, an address in it, may be
 *      NULL) and its dependencies, as the dynamic linker searched them;
 *   3. every loaded object in load order (dl_iterate_phdr), each with its
 *      dependencies (dlopen(RTLD_NOLOAD) + dlsym).
 * Definitions inside the interposer itself are skipped. Stores the path of
 * the object holding the definition in `defined_in` (size `cap`).
 * When no object defines it, writes one line naming the routine and every
 * object searched to stderr, writes the program's pending stdio output and
 * ends the process with TDG_EXIT_UNRESOLVED (never an abort or core dump);
 * `before_exit`, if not NULL, runs first (the profiler writes its file). */
void *tdg_resolve(const char *symbol, const void *self, const void *caller, char *defined_in,
                  unsigned long cap, void (*before_exit)(void));

#ifdef __cplusplus
}
#endif
#endif
