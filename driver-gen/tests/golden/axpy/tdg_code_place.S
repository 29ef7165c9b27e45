/* Code placement for the timed routine, linked by tdg between the driver's
 * own objects and the implementation's.
 *
 * Where a routine's instructions fall relative to 64-byte fetch blocks can
 * move its speed a lot: a hot loop across a block boundary can run at two
 * speeds in turn, in stretches of tens to hundreds of milliseconds, where
 * the same loop inside one block runs at one (docs/drivers.md, "Code
 * placement"). Linked after the driver's code, the implementation
 * would start wherever the driver's code ends, so any change to the spec, to
 * the runtime or to the compiler of the driver would move it. This section is
 * aligned to a page and TDG_CODE_OFFSET bytes long, so the implementation's
 * code starts TDG_CODE_OFFSET bytes past a 4096-byte boundary in every
 * driver (rounded up to the object's own alignment, 16 for gcc and clang).
 * `tdg run` picks the length that puts the routine itself at the spec's
 * code_offset (its address modulo 4096 in the application, 0 by default),
 * whatever precedes it in its file; `make CODE_OFFSET=N` sets it directly. */
#ifndef TDG_CODE_OFFSET
#define TDG_CODE_OFFSET 0
#endif
        .text
        .p2align 12
#if TDG_CODE_OFFSET > 0
        .skip TDG_CODE_OFFSET
#endif
/* No executable stack for the driver because of this object. */
#if defined(__ELF__)
        .section .note.GNU-stack,"",%progbits
#endif
