#!/usr/bin/env bash
# The tools the output-format tests drive tdg with (tests/cli/formats_*.rs):
# - Google Benchmark's compare.py (Debian's libbenchmark-tools, with
#   python3-scipy for its U test) reads two `tdg run --format gbench` files;
# - a Python virtual environment owned by the tests ($TDG_DEPS/tuners-venv)
#   with Optuna, which tunes a spec through `tdg run --cost-only`, and
#   Kernel Tuner, whose published T4 results schema (and the jsonschema
#   package it uses) checks `tdg tune --format t4`.
# Versions are pinned, dependencies included (70-tuners.constraints, the
# `pip freeze` of a working install), so a test run today and one next year
# drive the same tuners on the same libraries; raise them together with the
# tests.
set -euo pipefail
. "$TDG_ROOT/scripts/lib/common.sh"
apt_install libbenchmark-tools python3-scipy python3-venv python3-pip
venv="$TDG_DEPS/tuners-venv"
constraints="$TDG_ROOT/scripts/setup.d/70-tuners.constraints"
want="optuna==5.0.0 kernel_tuner==1.5.0"
# Which constraints the environment was made (or checked) under, beside
# the requirements record.
pins=$(sha256sum "$constraints" | cut -c1-16)
if [ -f "$venv/.installed" ] && [ "$(cat "$venv/.installed")" = "$want" ] \
   && [ "$(cat "$venv/.constraints" 2>/dev/null)" = "$pins" ]; then
  exit 0
fi
# An environment that already holds exactly the pinned set (one made before
# the constraints were recorded) is kept: only its record changes.
pinned() { grep -vE '^(#|$)' "$constraints" | tr 'A-Z_' 'a-z-' | sort; }
if [ -x "$venv/bin/pip" ] && [ "$("$venv/bin/pip" freeze --disable-pip-version-check 2>/dev/null | tr 'A-Z_' 'a-z-' | sort)" = "$(pinned)" ]; then
  echo "$want" > "$venv/.installed"
  echo "$pins" > "$venv/.constraints"
  exit 0
fi
echo "setup: Python environment with $want (dependencies pinned) in $venv"
rm -rf "$venv"
/usr/bin/python3 -m venv "$venv"
# shellcheck disable=SC2086 # $want is a list of requirements
"$venv/bin/pip" install --quiet --disable-pip-version-check \
  --constraint "$constraints" $want
echo "$want" > "$venv/.installed"
echo "$pins" > "$venv/.constraints"
