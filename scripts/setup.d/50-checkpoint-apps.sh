#!/usr/bin/env bash
# bzip2 1.0.8 built from Debian bookworm's source package, with tdg's region
# markers around the mainQSort3 bucket sorts of mainSort (the routine family
# of seed 003's mainGtU experiment): the real open-source program the
# checkpoint tests capture and time. Its own manual.ps is the input.
# Linked with -rdynamic, so a candidate mainQSort3 built from the same
# blocksort.c (checkpoint/apps/bzip2-mainQSort3-candidate.c) resolves bzip2's
# helpers in a restored copy; src/ keeps the sources such a candidate needs,
# and bzip2-sort-O0 is the same program with blocksort.c at -O0 (the in-app
# side of the -O0/-O2 candidate comparison).
# Idempotent: skipped when the build matches the current patch and host library.
set -euo pipefail
: "${TDG_ROOT:?run via scripts/setup}" "${TDG_DEPS:?run via scripts/setup}"
. "$TDG_ROOT/scripts/lib/common.sh"

prefix="$TDG_DEPS/bzip2-ckpt"
patch_file="$TDG_ROOT/checkpoint/apps/bzip2-1.0.8-tdg-regions.patch"
hostlib="$TDG_ROOT/checkpoint/c"
# The host library reads the clock through the one timing header.
timing="$TDG_ROOT/c-timing/c"
stamp=$( (cat "$patch_file" "$hostlib/tdg_checkpoint.c" "$hostlib/tdg_checkpoint.h" "$timing/tdg_timing.h"; echo rdynamic-sort-O0) | sha256sum | cut -c1-16)
if [ -x "$prefix/bzip2" ] && [ -x "$prefix/bzip2-sort-O0" ] && [ -e "$prefix/manual.ps" ] &&
  [ "$(cat "$prefix/.stamp" 2>/dev/null)" = "$stamp" ]; then
  echo "bzip2 (with tdg region markers) already built in $prefix"
  exit 0
fi

apt_install gcc patch

src_root="$TDG_DEPS/src/bzip2"
if ! ls "$src_root"/bzip2_*.orig.tar.* >/dev/null 2>&1; then
  fetch_debian_source bzip2 bookworm "$src_root"
fi
tarball=$(ls "$src_root"/bzip2_*.orig.tar.* | sort -V | tail -n1)
build="$src_root/build-ckpt"
rm -rf "$build"
mkdir -p "$build"
tar -xf "$tarball" -C "$build" --strip-components=1
(
  cd "$build"
  patch -p1 --quiet < "$patch_file"
  # bzip2's own flags (its Makefile: -O2 -g -D_FILE_OFFSET_BITS=64), plus the
  # host library compiled in.
  flags=(-g -Wall -D_FILE_OFFSET_BITS=64 -I"$hostlib" -I"$timing")
  others=(huffman.c crctable.c randtable.c compress.c decompress.c bzlib.c bzip2.c "$hostlib/tdg_checkpoint.c")
  gcc -O2 "${flags[@]}" -rdynamic blocksort.c "${others[@]}" -o bzip2
  gcc -O0 "${flags[@]}" -c blocksort.c -o blocksort-O0.o
  gcc -O2 "${flags[@]}" -rdynamic blocksort-O0.o "${others[@]}" -o bzip2-sort-O0
  # They must still be bzip2: round-trip its own test file.
  for b in ./bzip2 ./bzip2-sort-O0; do
    "$b" -c -9 sample3.ref | "$b" -dc | cmp - sample3.ref
  done
)
mkdir -p "$prefix/src"
install -m 0755 "$build/bzip2" "$build/bzip2-sort-O0" "$prefix/"
cp "$build/blocksort.c" "$build/bzlib_private.h" "$build/bzlib.h" "$hostlib/tdg_checkpoint.h" "$prefix/src/"
cp "$build/manual.ps" "$prefix/manual.ps"
echo "$stamp" > "$prefix/.stamp"
echo "bzip2 with tdg region markers built in $prefix"
