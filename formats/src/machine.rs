//! This machine as Google Benchmark's `context` block describes it: read
//! from /proc and sysfs the way the library itself does, so a dashboard
//! comparing tdg's runs with Google Benchmark's sees the same fields.

use serde::Serialize;
use std::path::Path;

/// One cache as Google Benchmark lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cache {
    /// "Data", "Instruction" or "Unified".
    #[serde(rename = "type")]
    pub kind: String,
    pub level: u32,
    pub size: u64,
    /// CPUs sharing one instance of this cache.
    pub num_sharing: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Machine {
    pub host_name: String,
    pub num_cpus: usize,
    pub mhz_per_cpu: u64,
    pub cpu_scaling_enabled: bool,
    pub caches: Vec<Cache>,
    pub load_avg: Vec<f64>,
}

const CPU0: &str = "/sys/devices/system/cpu/cpu0";

pub fn this_machine() -> Machine {
    Machine {
        host_name: read_trimmed(Path::new("/proc/sys/kernel/hostname")).unwrap_or_default(),
        num_cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        mhz_per_cpu: mhz_per_cpu(),
        cpu_scaling_enabled: cpu_scaling_enabled(Path::new(CPU0)),
        caches: caches(Path::new(CPU0)),
        load_avg: load_avg(),
    }
}

fn read_trimmed(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// The maximum frequency cpufreq documents, else `cpu MHz` of /proc/cpuinfo
/// (all a virtual machine without cpufreq has).
fn mhz_per_cpu() -> u64 {
    if let Some(khz) = read_trimmed(&Path::new(CPU0).join("cpufreq/cpuinfo_max_freq"))
        .and_then(|s| s.parse::<u64>().ok())
    {
        return khz / 1000;
    }
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("cpu MHz"))
                .and_then(|l| l.split_once(':'))
                .and_then(|(_, v)| v.trim().parse::<f64>().ok())
        })
        .map_or(0, |mhz| mhz.round() as u64)
}

/// Google Benchmark's test: a governor other than `performance` scales the
/// clock; no cpufreq at all means no scaling the OS controls.
fn cpu_scaling_enabled(cpu_dir: &Path) -> bool {
    read_trimmed(&cpu_dir.join("cpufreq/scaling_governor")).is_some_and(|g| g != "performance")
}

/// One CPU's caches as sysfs describes them, in Google Benchmark's shape.
pub fn caches(cpu_dir: &Path) -> Vec<Cache> {
    probe::documented::caches_from_sysfs(cpu_dir)
        .into_iter()
        .map(|c| Cache {
            kind: c.kind,
            level: c.level,
            size: c.size_bytes,
            num_sharing: c.shared_cpus.unwrap_or(1),
        })
        .collect()
}

fn load_avg() -> Vec<f64> {
    read_trimmed(Path::new("/proc/loadavg"))
        .map(|t| {
            t.split_whitespace()
                .take(3)
                .filter_map(|v| v.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Now as Google Benchmark writes it: `2026-11-23T15:52:00+00:00` (UTC).
pub fn date_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    date_utc(secs)
}

/// Seconds since the epoch as an ISO 8601 UTC time (days to civil date as
/// in Howard Hinnant's `civil_from_days`).
pub fn date_utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}+00:00",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(date_utc(0), "1970-01-01T00:00:00+00:00");
        assert_eq!(date_utc(951_782_400), "2000-02-29T00:00:00+00:00");
        assert_eq!(date_utc(1_795_392_000 + 3_723), "2026-11-23T01:02:03+00:00");
    }
}
