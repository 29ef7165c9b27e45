//! A driver built once and kept in a directory, so that other machines
//! sharing the filesystem only run it (a tuning campaign's identical
//! nodes). The directory holds the executable and a record of how it was
//! built; opening it checks the record against the configuration asked
//! for, so a driver is never run under another configuration's name.

use crate::defaults::MachineDefaults;
use crate::record::BuildRecord;
use crate::run::{model_for, BuiltDriver, RunError, RunOptions};
use serde::{Deserialize, Serialize};
use spec_lang::CheckedSpec;
use std::path::Path;

const EXE: &str = "driver";
const RECORD: &str = "driver.json";
/// What a kept driver's directory is to the guard.
const KEPT_DIR: fsguard::Purpose = fsguard::Purpose {
    what: "kept driver",
    option: "--campaign",
};
/// Version of [`Record`]'s layout (2: the machine the driver was built for).
const RECORD_VERSION: u32 = 2;

#[derive(Serialize, Deserialize)]
struct Record {
    tdg_kept_driver: u32,
    routine: String,
    #[serde(flatten)]
    built_with: BuildRecord,
    /// The machine defaults the driver's flush and interval were resolved
    /// from: a node that runs it (with a probe of its own) reads its plan,
    /// and where each setting came from, as it was built in.
    machine: MachineDefaults,
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> RunError {
    let named = toolchain::io_context(what);
    move |e| RunError::Io(named(e))
}

impl BuiltDriver {
    /// Copies the executable and its record into `dir` (created). The
    /// record is written last and renamed into place: a directory with a
    /// record holds a whole driver.
    pub fn keep(&self, dir: &Path) -> Result<(), RunError> {
        fsguard::OwnedDir::open(dir, KEPT_DIR).map_err(RunError::Files)?;
        fsguard::copy_atomic(&self.exe, &dir.join(EXE)).map_err(RunError::Files)?;
        let record = Record {
            tdg_kept_driver: RECORD_VERSION,
            routine: self.model.routine.name.clone(),
            built_with: self.built_with.clone(),
            machine: self.model.timing_inputs.machine.clone(),
        };
        let text = serde_json::to_string_pretty(&record).expect("a record serialises");
        fsguard::write_atomic(&dir.join(RECORD), text.as_bytes()).map_err(RunError::Files)
    }

    /// The driver [`keep`](Self::keep) left in `dir`, for `spec` under
    /// `opts`; `Ok(None)` when `dir` holds none. Refused when it was built
    /// for another routine, other defines or other implementation flags.
    pub fn open_kept(
        spec: &CheckedSpec,
        opts: &RunOptions,
        dir: &Path,
    ) -> Result<Option<BuiltDriver>, RunError> {
        let text = match std::fs::read_to_string(dir.join(RECORD)) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(format!("cannot read {}", dir.join(RECORD).display()))(e)),
        };
        let stale = |why: String| {
            RunError::Toolchain(format!(
                "the driver kept in {} {why}; remove that directory to build it again",
                dir.display()
            ))
        };
        let record: Record = serde_json::from_str(&text)
            .map_err(|e| stale(format!("has a damaged record ({e})")))?;
        if record.tdg_kept_driver != RECORD_VERSION {
            return Err(stale(format!(
                "was kept by a tdg with record version {}, this one reads {RECORD_VERSION}",
                record.tdg_kept_driver
            )));
        }
        let built_for = RunOptions {
            machine: Some(record.machine),
            ..opts.clone()
        };
        let model = model_for(spec, &built_for)?;
        let defines: Vec<String> = opts
            .defines
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        if record.routine != model.routine.name
            || record.built_with.defines != defines
            || record.built_with.impl_cflags != opts.cflags
        {
            return Err(stale(format!(
                "was built for {} with -D {} and flags `{}`, not for {} with -D {} and flags `{}`",
                record.routine,
                record.built_with.defines.join(" "),
                record.built_with.impl_cflags.join(" "),
                model.routine.name,
                defines.join(" "),
                opts.cflags.join(" ")
            )));
        }
        Ok(Some(BuiltDriver {
            model,
            exe: dir.join(EXE),
            built_with: record.built_with,
            build: crate::run::BuildStats::default(),
            _dir: None,
        }))
    }
}
