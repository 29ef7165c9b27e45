//! What the driver side reads back: the probe cache (every `tdg run` takes
//! its default flush size and minimum interval from it) and the record of a
//! driver kept for a campaign's identical nodes.

use driver_gen::{BuiltDriver, DriverConfig, DriverModel, MachineDefaults, RunOptions};

/// `probe.json`: loaded as every command loads the cache, and what loads is
/// shown (`tdg probe`'s table and `--svg` plot), sanity-checked against
/// sysfs, turned into the machine's defaults and into a driver model, its
/// explanation and its C, as `tdg run` does. A cache is only used on the CPU
/// model that made it, so the input's `cpu_model` is also tried as this
/// machine's: the seeds then reach the consumers on any host.
pub fn probe_cache(data: &[u8]) -> bool {
    let path = crate::fresh_dir("probe").join("probe.json");
    let mut loaded = load_and_use(&path, data);
    let Ok(serde_json::Value::Object(mut doc)) = serde_json::from_slice::<serde_json::Value>(data)
    else {
        return loaded;
    };
    if doc
        .get("cpu_model")
        .is_some_and(serde_json::Value::is_string)
    {
        doc.insert("cpu_model".into(), probe::documented::cpu_model().into());
        let here = serde_json::to_vec(&doc).expect("a JSON value serialises");
        if here != data {
            loaded |= load_and_use(&path, &here);
        }
    }
    loaded
}

fn load_and_use(path: &std::path::Path, bytes: &[u8]) -> bool {
    std::fs::write(path, bytes).expect("scratch write");
    let Ok(Some(result)) = probe::load_cached_from(path) else {
        return false;
    };
    let _ = probe::render::table(&result);
    let _ = probe::render::svg(&result);
    let _ = probe::sanity::against_sysfs(&result);
    let _ = result.recommended_flush_bytes();
    let _ = result.recommended_min_interval_s();
    let machine = driver_gen::defaults::from_probe(&result, path);
    let model = DriverModel::from_spec(crate::dot_spec(), &DriverConfig::new(machine));
    if let Ok(model) = model {
        let _ = driver_gen::explain(&model);
        let _ = driver_gen::render(&model, None);
    }
    true
}

/// `driver.json` of a kept driver: opened as a campaign task on an
/// identical node opens it, for the tuning example at the configuration
/// the seeds were kept for.
pub fn kept_driver(data: &[u8]) -> bool {
    let dir = crate::fresh_dir("kept");
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
    match BuiltDriver::open_kept(crate::blocked_gemm_spec(), &opts, &dir) {
        Ok(Some(driver)) => {
            assert_eq!(driver.exe, dir.join("driver"));
            assert_eq!(driver.defines, defines);
            true
        }
        Ok(None) => panic!("a directory with a record holds a kept driver"),
        Err(e) => {
            let _ = e.to_string();
            false
        }
    }
}
