//! What the driver side reads back: the probe cache (every `tdg run` takes
//! its default flush size and minimum interval from it) and the record of a
//! driver kept for a campaign's identical nodes.

use driver_gen::{BuiltDriver, DriverConfig, DriverModel, MachineDefaults, RunOptions};

/// `probe.json`: loaded as every command loads the cache, and what loads is
/// shown (`tdg probe`'s table and `--svg` plot), sanity-checked against
/// sysfs, turned into the machine's defaults and into a driver model and
/// its explanation, as `tdg run` does. A cache is only used on the CPU
/// model and by the probe version that made it: an input refused for that
/// alone is tried again as this machine's and this version's, so the seeds
/// reach the consumers on any host and after a version bump that only adds
/// optional fields.
pub fn probe_cache(data: &[u8]) -> bool {
    let path = crate::fixtures::fresh_dir("probe").join("probe.json");
    if load_and_use(&path, data) {
        return true;
    }
    let Ok(serde_json::Value::Object(mut doc)) = serde_json::from_slice::<serde_json::Value>(data)
    else {
        return false;
    };
    let here = probe::documented::cpu_model();
    let version = probe::RESULT_VERSION;
    let model_differs = doc
        .get("cpu_model")
        .is_some_and(|m| m.is_string() && *m != here.as_str());
    let version_differs = doc
        .get("version")
        .is_some_and(|v| v.is_u64() && *v != version);
    if !model_differs && !version_differs {
        return false;
    }
    doc.insert("cpu_model".into(), here.into());
    doc.insert("version".into(), version.into());
    load_and_use(
        &path,
        &serde_json::to_vec(&doc).expect("a JSON value serialises"),
    )
}

/// Writes `bytes` as the cache, loads it, and uses what loaded.
fn load_and_use(path: &std::path::Path, bytes: &[u8]) -> bool {
    std::fs::write(path, bytes).expect("scratch write");
    let Ok(Some(result)) = probe::load_cached_from(path) else {
        return false;
    };
    let _ = probe::render::table(&result);
    let _ = report::probe_section::latency_svg(&result);
    let _ = probe::sanity::against_sysfs(&result);
    let _ = result.recommended_flush_bytes();
    let _ = result.recommended_min_interval_s();
    let machine = driver_gen::defaults::from_probe(&result, path);
    if let Ok(model) =
        DriverModel::from_checked(crate::fixtures::dot_spec(), &DriverConfig::new(machine))
    {
        let _ = driver_gen::explain(&model);
    }
    true
}

/// `driver.json` of a kept driver: opened as a campaign task on an
/// identical node opens it, for the tuning example at the configuration
/// the seeds were kept for.
pub fn kept_driver(data: &[u8]) -> bool {
    let dir = crate::fixtures::fresh_dir("kept");
    std::fs::write(dir.join("driver.json"), data).expect("scratch write");
    let defines = ["MS=64", "NS=64", "KS=64", "NB=32", "MU=2"];
    let opts = RunOptions {
        defines: defines
            .iter()
            .map(|d| {
                let (k, v) = d.split_once('=').expect("NAME=VALUE");
                (k.to_string(), v.to_string())
            })
            .collect(),
        machine: Some(MachineDefaults::fixed_for_tests()),
        ..Default::default()
    };
    match BuiltDriver::open_kept(crate::fixtures::blocked_gemm_spec(), &opts, &dir) {
        Ok(Some(driver)) => {
            assert_eq!(driver.exe, dir.join("driver"));
            assert_eq!(driver.built_with.defines, defines);
            true
        }
        Ok(None) => panic!("a directory with a record holds a kept driver"),
        Err(e) => {
            let _ = e.to_string();
            false
        }
    }
}
