//! The command-line tests: one test binary (one link, one process) with a
//! module per area. Tests that time something, use CRIU or Slurm, or spin
//! CPUs hold `testkit::exclusive()`; the other heavy ones hold
//! `testkit::shared()`, so a timing test never runs beside them (in separate
//! binaries each ran only beside tests of its own file).

#[path = "../../driver-gen/tests/driver_support/mod.rs"]
mod driver_support;
mod formats_support;
#[path = "../../instrument/tests/instrument_support/mod.rs"]
mod instrument_support;
mod interpose_support;
mod support;
mod tune_slurm_support;

mod autotune_cli;
mod bounded_waits;
mod checkpoint_cli;
mod checkpoint_files;
mod cli_contract;
mod cli_spec_errors;
mod driver_errors;
mod driver_specs;
mod files_cli;
mod formats_contract;
mod formats_gbench;
mod formats_optuna;
mod instrument_cli;
mod instrument_omp;
mod instrument_validate;
mod instrument_zlib;
mod interpose_apps;
mod interpose_checkpoint;
mod interpose_outputs;
mod interpose_resolve;
mod interpose_threads;
mod poet_specs;
mod probe_cli;
mod report_cli;
mod run_contexts;
mod setup_scripts;
mod spec_cli;
mod spec_load;
mod tune_categorical;
mod tune_checkpoint_state;
mod tune_cli;
mod tune_replay;
mod tune_slurm;
mod tune_threads;
