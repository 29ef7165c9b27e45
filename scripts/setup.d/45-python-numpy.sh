#!/usr/bin/env bash
# Debian's own python3 and python3-numpy, unmodified: the interpreter loads
# numpy's extension with RTLD_LOCAL and the extension links Debian's BLAS
# (libblas.so.3 through the alternatives system), which is where the profiling
# shim must find cblas_dgemm (tests/cli/interpose_apps.rs). bzip2 (with libbz2)
# is the other unmodified program those tests profile. OpenBLAS (pthreads)
# becomes that libblas.so.3 (its alternative outranks the reference BLAS): a
# threaded BLAS, whose worker threads the profiles count
# (numpy_over_openblas_contexts_carry_the_thread_count). The reference BLAS
# (libblas3) is installed beside it, not chosen: `tdg autotune`'s numpy test
# and bench select it with LD_LIBRARY_PATH, as a user would, to tune a
# routine a candidate can beat.
set -euo pipefail
: "${TDG_ROOT:?run via scripts/setup}" "${TDG_DEPS:?run via scripts/setup}"
. "$TDG_ROOT/scripts/lib/common.sh"
apt_install python3 python3-numpy bzip2 libopenblas0-pthread libblas3
