/* A candidate mainQSort3 built from bzip2's own blocksort.c (with tdg's
 * patch applied), for `tdg checkpoint time IMAGE --impl` on a bzip2 image:
 *
 *   tdg checkpoint time IMG --impl bzip2-mainQSort3-candidate.c \
 *       --cflags "-O0 -I$TDG_DEPS/bzip2-ckpt/src"
 *
 * mainQSort3 is static in blocksort.c, and a restored copy finds a
 * candidate's routine by name: blocksort.c is compiled here under another
 * name and an exported mainQSort3 calls it. Everything else blocksort.c
 * needs (bzip2's assertion handler, tdg's markers) resolves against the
 * application, which is linked with -rdynamic. */
#define mainQSort3 blocksort_mainQSort3
#include "blocksort.c"
#undef mainQSort3

void mainQSort3(UInt32 *ptr, UChar *block, UInt16 *quadrant, Int32 nblock, Int32 loSt,
                Int32 hiSt, Int32 dSt, Int32 *budget);

void mainQSort3(UInt32 *ptr, UChar *block, UInt16 *quadrant, Int32 nblock, Int32 loSt,
                Int32 hiSt, Int32 dSt, Int32 *budget)
{
    blocksort_mainQSort3(ptr, block, quadrant, nblock, loSt, hiSt, dSt, budget);
}
