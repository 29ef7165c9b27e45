#!/usr/bin/env bash
# clang: generated drivers must compile warning-free under gcc and clang
# (tests/cli/driver_specs.rs builds every spec's driver with both, -Werror).
set -euo pipefail
. "$TDG_ROOT/scripts/lib/common.sh"
apt_install gcc make clang
