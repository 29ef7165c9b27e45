#!/usr/bin/env bash
# Slurm for `tdg tune --executor slurm`: tests/cli/tune_slurm.rs and
# scripts/bench-campaign start a real single-node cluster on localhost with
# scripts/slurm-cluster (munged, slurmctld, slurmd from Debian's packages,
# run by hand: the packages' systemd units are neither needed nor started).
# python3 picks the cluster's free ports.
set -euo pipefail
. "$TDG_ROOT/scripts/lib/common.sh"
apt_install munge slurmctld slurmd slurm-client python3
