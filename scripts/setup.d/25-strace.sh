#!/usr/bin/env bash
# strace: tests/cli/spec_load.rs counts the opens of a spec file during a
# `tdg run` (each command reads its spec once).
set -euo pipefail
. "$TDG_ROOT/scripts/lib/common.sh"
apt_install strace
