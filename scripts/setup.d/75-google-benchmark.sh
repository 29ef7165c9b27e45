#!/usr/bin/env bash
# Google Benchmark 1.7.1 (Debian's libbenchmark-dev): scripts/bench-repeatability
# times the same kernel with it, process by process beside tdg's driver, so
# tdg's run-to-run spread is compared with a well-kept harness's on this
# machine, not claimed.
set -euo pipefail
. "$TDG_ROOT/scripts/lib/common.sh"
apt_install libbenchmark-dev
