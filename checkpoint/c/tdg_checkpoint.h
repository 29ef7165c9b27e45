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

#ifdef __cplusplus
}
#endif

#endif /* TDG_CHECKPOINT_H */
