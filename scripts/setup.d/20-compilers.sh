#!/usr/bin/env bash
# clang: generated drivers must compile warning-free under gcc and clang
# (tests/cli/driver_specs.rs builds every spec's driver with both, -Werror).
# libomp-dev: clang's OpenMP runtime, for the OpenMP specs' drivers (gcc
# brings its own libgomp).
set -euo pipefail
. "$TDG_ROOT/scripts/lib/common.sh"
apt_install gcc make clang libomp-dev
