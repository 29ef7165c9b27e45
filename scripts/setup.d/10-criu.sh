#!/usr/bin/env bash
# CRIU >= 4.1 (binary + libcriu) under $TDG_DEPS, built from Debian trixie's
# source package. Bookworm's packaged criu (3.17) cannot dump on kernels that
# expose a [vvar_vclock] mapping ("vdso: Unexpected rt vDSO area bounds").
# Idempotent: skipped when a good enough criu and libcriu are already there.
set -euo pipefail
: "${TDG_ROOT:?run via scripts/setup}" "${TDG_DEPS:?run via scripts/setup}"
. "$TDG_ROOT/scripts/lib/common.sh"

min_major=4 min_minor=1
criu_bin="$TDG_DEPS/bin/criu"
# CRIU caches its kernel probe (criu.kdat, ~40 ms per run otherwise) only on
# tmpfs; /run is not tmpfs on every machine, so point it at a directory on
# /dev/shm that tdg creates root-owned, mode 0700, before running criu.
# (Keep in step with checkpoint::criu::KDAT_CACHE_DIR.)
rundir=/dev/shm/tdg-criu
build_flags="rundir=$rundir"
flags_file="$TDG_DEPS/lib/criu-build-flags"

version_ok() { # version_ok X.Y[.Z]: is it >= min?
  local major minor
  IFS=. read -r major minor _ <<<"$1"
  [ "${major:-0}" -gt "$min_major" ] || { [ "${major:-0}" -eq "$min_major" ] && [ "${minor:-0}" -ge "$min_minor" ]; }
}

installed_version() { "$criu_bin" --version 2>/dev/null | awk '/^Version:/ {print $2}'; }

if [ -x "$criu_bin" ] && [ -e "$TDG_DEPS/lib/libcriu.so" ] && [ -e "$TDG_DEPS/include/criu/criu.h" ] \
   && [ "$(cat "$flags_file" 2>/dev/null)" = "$build_flags" ] \
   && v=$(installed_version) && [ -n "$v" ] && version_ok "$v"; then
  echo "criu $v already in $TDG_DEPS"
  exit 0
fi

# A good CRIU the system already has (>= 4.1, with libcriu for the self-dump)
# is used as it is: tdg finds criu on PATH and libcriu through the loader.
if sys_criu=$(command -v criu 2>/dev/null) && [ "$sys_criu" != "$criu_bin" ] \
   && v=$("$sys_criu" --version 2>/dev/null | awk '/^Version:/ {print $2}') && [ -n "$v" ] \
   && version_ok "$v" && ldconfig -p 2>/dev/null | grep -q 'libcriu\.so'; then
  echo "criu $v already installed at $sys_criu; nothing to build"
  exit 0
fi

apt_install make gcc pkg-config xz-utils python3 \
  libprotobuf-c-dev protobuf-c-compiler libprotobuf-dev protobuf-compiler libcap-dev libnl-3-dev \
  libnet1-dev libbsd-dev libnftables-dev libgnutls28-dev uuid-dev python3-protobuf libaio-dev

src_root="$TDG_DEPS/src/criu"
if ! ls "$src_root"/criu_*.orig.tar.* >/dev/null 2>&1; then
  fetch_debian_source criu trixie "$src_root"
fi
tarball=$(ls "$src_root"/criu_*.orig.tar.* | sort -V | tail -n1)
ver=$(basename "$tarball" | sed -E 's/^criu_([0-9.]+)\.orig\..*/\1/')
version_ok "$ver" || { echo "setup: Debian trixie offers criu $ver, tdg needs >= $min_major.$min_minor" >&2; exit 1; }

build="$src_root/criu-$ver"
# Always from a fresh tree: make does not notice a changed RUNDIR.
rm -rf "$build"
tar -C "$src_root" -xf "$tarball"
echo "setup: building criu $ver (about a minute)"
# criu's own build flags trip nothing here, but keep the log out of the way.
log="$src_root/build.log"
if ! make -C "$build" -j"$(nproc)" criu lib RUNDIR="$rundir" >"$log" 2>&1; then
  echo "setup: building criu failed; last lines of $log:" >&2
  tail -n 20 "$log" >&2
  exit 1
fi

mkdir -p "$TDG_DEPS/bin" "$TDG_DEPS/lib" "$TDG_DEPS/include/criu"
install -m 0755 "$build/criu/criu" "$criu_bin"
# libcriu: the shared object (with its soname link) plus the public headers.
for f in "$build"/lib/c/libcriu.so*; do cp -P "$f" "$TDG_DEPS/lib/"; done
[ -e "$TDG_DEPS/lib/libcriu.so" ] || ln -sf "$(basename "$(ls "$build"/lib/c/libcriu.so.* | head -n1)")" "$TDG_DEPS/lib/libcriu.so"
[ -e "$build/lib/c/libcriu.a" ] && cp "$build/lib/c/libcriu.a" "$TDG_DEPS/lib/"
install -m 0644 "$build/lib/c/criu.h" "$TDG_DEPS/include/criu/"
for h in "$build/criu/include/version.h" "$build"/images/rpc.pb-c.h "$build"/lib/c/images/rpc.pb-c.h; do
  [ -e "$h" ] && install -m 0644 "$h" "$TDG_DEPS/include/criu/"
done
echo "$build_flags" > "$flags_file"
echo "criu $(installed_version) installed in $TDG_DEPS"
