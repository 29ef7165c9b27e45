#!/usr/bin/env bash
# zlib built from Debian bookworm's source package into $TDG_DEPS/zlib: the
# real open-source program tdg's profiler is tested on. Its shared libz.so and
# `minigzipsh` (minigzip linked against that libz.so) give an LD_PRELOAD
# target (crc32 is exported, so even libz's own calls go through the PLT);
# libz.a plus minigzip.o give a static link for the -Wl,--wrap= path;
# kernel/crc32.c is the implementation the timing driver is built with;
# src/ holds the sources for a build with marker macros in deflate.c.
# Idempotent: skipped when the build products are already there.
set -euo pipefail
: "${TDG_ROOT:?run via scripts/setup}" "${TDG_DEPS:?run via scripts/setup}"
. "$TDG_ROOT/scripts/lib/common.sh"

prefix="$TDG_DEPS/zlib"
if [ -x "$prefix/minigzipsh" ] && [ -e "$prefix/libz.so" ] && [ -e "$prefix/libz.a" ] \
   && [ -e "$prefix/minigzip.o" ] && [ -e "$prefix/zlib.h" ] && [ -e "$prefix/kernel/crc32.c" ] \
   && [ -e "$prefix/src/deflate.c" ] && [ -e "$prefix/src/minigzip.c" ]; then
  echo "zlib already built in $prefix"
  exit 0
fi

apt_install make gcc bzip2 gzip

src_root="$TDG_DEPS/src/zlib"
if ! ls "$src_root"/zlib_*.orig.tar.* >/dev/null 2>&1; then
  fetch_debian_source zlib bookworm "$src_root"
fi
tarball=$(ls "$src_root"/zlib_*.orig.tar.* | sort -V | tail -n1)
build="$src_root/build"
rm -rf "$build"
mkdir -p "$build"
tar -xf "$tarball" -C "$build" --strip-components=1
(
  cd "$build"
  # -O2 -g: an ordinary optimised build, with symbols so profiles are readable.
  CFLAGS="-O2 -g" ./configure --prefix="$prefix" >/dev/null
  make -j2 libz.a minigzipsh minigzip.o >/dev/null
)
mkdir -p "$prefix"
cp "$build"/libz.a "$build"/minigzip.o "$build"/zlib.h "$build"/zconf.h "$prefix"/
# Keep the versioned soname links so minigzipsh finds its own libz at run time.
cp -P "$build"/libz.so* "$prefix"/
cp "$build"/minigzipsh "$prefix"/
# crc32.c and the headers it needs: the routine's own source, which the
# timing driver links as the implementation when predicting minigzip's time.
mkdir -p "$prefix/kernel"
cp "$build"/crc32.c "$build"/crc32.h "$build"/zutil.h "$build"/zlib.h "$build"/zconf.h "$prefix/kernel"/
# The library's and minigzip's sources, for building a copy with TDG_PROFILE
# markers around a static routine (deflate's block compressor).
mkdir -p "$prefix/src"
cp "$build"/*.c "$build"/*.h "$build"/test/minigzip.c "$prefix/src"/
echo "zlib built in $prefix ($(basename "$tarball"))"
