//! What the system says about itself (sysfs, cpuid, /proc/cpuinfo), shown
//! beside the measurements and used to bound the sweeps.

use serde::{Deserialize, Serialize};
use std::path::Path;

/// One cache as sysfs describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DocumentedCache {
    pub level: u32,
    /// "Data", "Instruction" or "Unified".
    pub kind: String,
    pub size_bytes: u64,
    pub line_bytes: Option<u64>,
    pub ways: Option<u64>,
    /// CPUs sharing one instance of this cache (`shared_cpu_list`).
    #[serde(default)]
    pub shared_cpus: Option<u32>,
}

/// Reads `<cpu_dir>/cache/index*/`; empty when sysfs does not describe caches.
pub fn caches_from_sysfs(cpu_dir: &Path) -> Vec<DocumentedCache> {
    let Ok(entries) = std::fs::read_dir(cpu_dir.join("cache")) else {
        return Vec::new();
    };
    let mut out: Vec<DocumentedCache> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("index"))
        .filter_map(|e| {
            let dir = e.path();
            let read = |f: &str| {
                std::fs::read_to_string(dir.join(f))
                    .ok()
                    .map(|s| s.trim().to_string())
            };
            Some(DocumentedCache {
                level: read("level")?.parse().ok()?,
                kind: read("type")?,
                size_bytes: parse_size(&read("size")?)?,
                line_bytes: read("coherency_line_size").and_then(|s| s.parse().ok()),
                ways: read("ways_of_associativity").and_then(|s| s.parse().ok()),
                shared_cpus: read("shared_cpu_list").map(|l| cpu_list_len(&l)),
            })
        })
        .collect();
    out.sort_by_key(|c| (c.level, c.kind.clone()));
    out
}

/// How many CPUs a sysfs CPU list names: "0-3,8" -> 5.
pub fn cpu_list_len(list: &str) -> u32 {
    list.split(',')
        .filter(|s| !s.is_empty())
        .map(|r| match r.split_once('-') {
            Some((a, b)) => match (a.trim().parse::<u32>(), b.trim().parse::<u32>()) {
                (Ok(a), Ok(b)) if b >= a => b - a + 1,
                _ => 1,
            },
            None => 1,
        })
        .sum::<u32>()
        .max(1)
}

/// "32K", "1024K", "32M", "512" -> bytes.
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mult) = match s.chars().last()? {
        'K' | 'k' => (&s[..s.len() - 1], 1u64 << 10),
        'M' | 'm' => (&s[..s.len() - 1], 1 << 20),
        'G' | 'g' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.trim().parse::<u64>().ok().map(|n| n * mult)
}

/// The data caches (L1d, then unified levels) in level order.
pub fn data_caches(all: &[DocumentedCache]) -> Vec<DocumentedCache> {
    all.iter()
        .filter(|c| c.kind != "Instruction")
        .cloned()
        .collect()
}

/// `model name` from /proc/cpuinfo, when it has one.
pub fn cpuinfo_model() -> Option<String> {
    std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|t| {
        t.lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
    })
}

/// `model name` from /proc/cpuinfo (else the architecture), to tell
/// machines apart in the cache.
pub fn cpu_model() -> String {
    cpuinfo_model().unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

/// The TSC frequency the processor or hypervisor documents, with where it
/// came from.
pub fn documented_tsc_ghz() -> Option<(f64, String)> {
    // `__cpuid` became safe in recent Rust; keep the blocks for older ones.
    #[cfg(target_arch = "x86_64")]
    #[allow(unused_unsafe)]
    {
        use std::arch::x86_64::__cpuid;
        // SAFETY: cpuid exists on every x86-64 processor.
        let max_leaf = unsafe { __cpuid(0) }.eax;
        if max_leaf >= 0x15 {
            // SAFETY: leaf 0x15 is within the supported range checked above.
            let l = unsafe { __cpuid(0x15) };
            if l.eax != 0 && l.ebx != 0 && l.ecx != 0 {
                let hz = f64::from(l.ecx) * f64::from(l.ebx) / f64::from(l.eax);
                return Some((hz / 1e9, "cpuid leaf 0x15".into()));
            }
        }
        // SAFETY: leaf 1 always exists.
        let hypervisor = unsafe { __cpuid(1) }.ecx & (1 << 31) != 0;
        if hypervisor {
            // SAFETY: hypervisor leaves are defined when bit 31 of leaf 1 ECX is set.
            let max_hv = unsafe { __cpuid(0x4000_0000) }.eax;
            if max_hv >= 0x4000_0010 {
                // SAFETY: within the hypervisor's advertised range.
                let khz = unsafe { __cpuid(0x4000_0010) }.eax;
                if khz != 0 {
                    return Some((
                        f64::from(khz) / 1e6,
                        "cpuid hypervisor leaf 0x40000010".into(),
                    ));
                }
            }
        }
    }
    if let Some(mhz) = kernel_log_tsc_mhz() {
        return Some((mhz / 1e3, "kernel log (tsc: calibration)".into()));
    }
    // "Intel(R) Xeon(R) ... @ 2.60GHz": the nominal frequency, which the
    // invariant TSC runs at on such parts.
    let model = cpu_model();
    let (_, tail) = model.rsplit_once('@')?;
    let ghz: f64 = tail.trim().trim_end_matches("GHz").trim().parse().ok()?;
    Some((ghz, "nominal frequency in the CPU model name".into()))
}

/// The kernel's own TSC calibration from its log (`/dev/kmsg`, readable by
/// root): the refined value when present, else the boot-time detection.
fn kernel_log_tsc_mhz() -> Option<f64> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open("/dev/kmsg")
        .ok()?;
    let (mut detected, mut refined) = (None, None);
    let mut buf = vec![0u8; 8192];
    // One record per read; EAGAIN marks the end of the buffered log.
    for _ in 0..100_000 {
        let n = match f.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let rec = String::from_utf8_lossy(&buf[..n]);
        let msg = rec.split_once(';').map_or(&*rec, |(_, m)| m);
        let mhz = |prefix: &str| {
            msg.strip_prefix(prefix)
                .and_then(|t| t.split_whitespace().next())
                .and_then(|v| v.parse::<f64>().ok())
        };
        if let Some(v) = mhz("tsc: Refined TSC clocksource calibration: ") {
            refined = Some(v);
        } else if let Some(v) = mhz("tsc: Detected ") {
            detected = Some(v);
        }
    }
    refined.or(detected)
}

/// Data-TLB entries for 4 KiB pages per level (L1, L2) as cpuid documents
/// them: AMD's extended leaves 0x80000005/0x80000006 (Intel leaves those
/// fields zero and describes TLBs in descriptor form, not decoded here).
pub fn documented_dtlb_entries() -> Vec<Option<u64>> {
    #[cfg(target_arch = "x86_64")]
    #[allow(unused_unsafe)]
    {
        use std::arch::x86_64::__cpuid;
        // SAFETY: leaf 0x80000000 exists on every x86-64 processor.
        let max_ext = unsafe { __cpuid(0x8000_0000) }.eax;
        if max_ext >= 0x8000_0006 {
            // SAFETY: both leaves are within the advertised range.
            let l1 = (unsafe { __cpuid(0x8000_0005) }.ebx >> 16) & 0xff;
            // SAFETY: as above.
            let l2 = (unsafe { __cpuid(0x8000_0006) }.ebx >> 16) & 0xfff;
            let nz = |v: u32| (v != 0).then_some(u64::from(v));
            return vec![nz(l1), nz(l2)];
        }
    }
    Vec::new()
}

/// `cpuid`'s vendor string and display family and model (leaf 1, with the
/// extended fields folded in as the vendors define them).
pub fn cpu_identity() -> (String, u32, u32) {
    #[cfg(target_arch = "x86_64")]
    #[allow(unused_unsafe)]
    {
        use std::arch::x86_64::__cpuid;
        // SAFETY: leaves 0 and 1 exist on every x86-64 processor.
        let l0 = unsafe { __cpuid(0) };
        let vendor: Vec<u8> = [l0.ebx, l0.edx, l0.ecx]
            .iter()
            .flat_map(|r| r.to_le_bytes())
            .collect();
        // SAFETY: as above.
        let eax = unsafe { __cpuid(1) }.eax;
        let base_family = (eax >> 8) & 0xf;
        let ext_family = (eax >> 20) & 0xff;
        let base_model = (eax >> 4) & 0xf;
        let ext_model = (eax >> 16) & 0xf;
        let family = if base_family == 0xf {
            base_family + ext_family
        } else {
            base_family
        };
        let model = if base_family == 0x6 || base_family == 0xf {
            (ext_model << 4) | base_model
        } else {
            base_model
        };
        (String::from_utf8_lossy(&vendor).into_owned(), family, model)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        (std::env::consts::ARCH.to_string(), 0, 0)
    }
}

/// Instruction-set features `cpuid` documents and the kernel enabled (the
/// AVX state saved on context switches): what the CPU runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Features {
    pub sse2: bool,
    pub avx: bool,
    pub avx2: bool,
    pub fma: bool,
    pub avx512f: bool,
}

pub fn features() -> Features {
    #[cfg(target_arch = "x86_64")]
    {
        Features {
            sse2: std::arch::is_x86_feature_detected!("sse2"),
            avx: std::arch::is_x86_feature_detected!("avx"),
            avx2: std::arch::is_x86_feature_detected!("avx2"),
            fma: std::arch::is_x86_feature_detected!("fma"),
            avx512f: std::arch::is_x86_feature_detected!("avx512f"),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        Features::default()
    }
}

/// The processor's base frequency in GHz: `cpuid` leaf 0x16 where the
/// processor fills it (Intel), else the maximum `cpufreq` reports.
pub fn documented_core_ghz(cpu_dir: &Path) -> Option<(f64, crate::cpu::Source)> {
    #[cfg(target_arch = "x86_64")]
    #[allow(unused_unsafe)]
    {
        use std::arch::x86_64::__cpuid;
        // SAFETY: leaf 0 exists on every x86-64 processor.
        let max_leaf = unsafe { __cpuid(0) }.eax;
        if max_leaf >= 0x16 {
            // SAFETY: within the advertised range.
            let base_mhz = unsafe { __cpuid(0x16) }.eax & 0xffff;
            if base_mhz != 0 {
                return Some((f64::from(base_mhz) / 1e3, crate::cpu::Source::Cpuid));
            }
        }
    }
    std::fs::read_to_string(cpu_dir.join("cpufreq/cpuinfo_max_freq"))
        .ok()
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|&khz| khz > 0.0)
        .map(|khz| (khz / 1e6, crate::cpu::Source::Sysfs))
}

/// The CPUs a sysfs CPU list names: "0-3,8" -> [0, 1, 2, 3, 8].
pub fn parse_cpu_list(list: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for r in list.trim().split(',').filter(|s| !s.is_empty()) {
        match r.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.trim().parse::<u32>(), b.trim().parse::<u32>()) {
                    // A corrupt range must not allocate without bound.
                    out.extend(a..=b.min(a.saturating_add(1 << 16)));
                }
            }
            None => out.extend(r.trim().parse::<u32>().ok()),
        }
    }
    out
}

/// What sysfs says `cpu` shares with other CPUs: its core (SMT siblings)
/// and, per cache level, the CPUs on that cache.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Sharing {
    /// `None` when sysfs does not say.
    pub core_siblings: Option<Vec<u32>>,
    /// (level, CPUs) for each data or unified cache.
    pub caches: Vec<(u32, Vec<u32>)>,
}

pub fn sharing(cpu_root: &Path, cpu: u32) -> Sharing {
    let dir = cpu_root.join(format!("cpu{cpu}"));
    let read = |p: &Path| std::fs::read_to_string(p).ok();
    let core_siblings = read(&dir.join("topology/thread_siblings_list"))
        .or_else(|| read(&dir.join("topology/core_cpus_list")))
        .map(|l| parse_cpu_list(&l));
    let mut caches = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir.join("cache")) {
        for e in entries.flatten() {
            let d = e.path();
            let kind = read(&d.join("type")).unwrap_or_default();
            if kind.trim() == "Instruction" {
                continue;
            }
            let (Some(level), Some(list)) = (
                read(&d.join("level")).and_then(|l| l.trim().parse::<u32>().ok()),
                read(&d.join("shared_cpu_list")),
            ) else {
                continue;
            };
            caches.push((level, parse_cpu_list(&list)));
        }
    }
    caches.sort();
    Sharing {
        core_siblings,
        caches,
    }
}

/// The CPUs this process may run on (its affinity mask).
pub fn allowed_cpus() -> Vec<u32> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity
    // writes at most its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return vec![0];
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .map(|c| c as u32)
            .collect()
    }
}

/// The base page size (`sysconf(_SC_PAGESIZE)`).
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if v > 0 {
        v as u64
    } else {
        4096
    }
}

/// Is transparent-huge-page backing available to `madvise` callers?
pub fn thp_available() -> bool {
    std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .map(|s| s.contains("[always]") || s.contains("[madvise]"))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sysfs_sizes() {
        assert_eq!(parse_size("32K"), Some(32 << 10));
        assert_eq!(parse_size("1024K\n"), Some(1 << 20));
        assert_eq!(parse_size("36M"), Some(36 << 20));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("lots"), None);
    }

    #[test]
    fn lists_sysfs_cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,8\n"), vec![0, 1, 2, 3, 8]);
        assert_eq!(parse_cpu_list("5"), vec![5]);
        assert_eq!(parse_cpu_list("x,2"), vec![2]);
        assert!(parse_cpu_list("0-4294967295").len() <= (1 << 16) + 1);
    }

    #[test]
    fn this_machine_has_an_identity() {
        let (vendor, family, _) = cpu_identity();
        if cfg!(target_arch = "x86_64") {
            assert!(
                vendor == "AuthenticAMD" || vendor == "GenuineIntel",
                "{vendor}"
            );
            assert!(family >= 6, "{family}");
            assert!(features().sse2);
        }
    }

    #[test]
    fn counts_sysfs_cpu_lists() {
        assert_eq!(cpu_list_len("0-3,8"), 5);
        assert_eq!(cpu_list_len("1"), 1);
    }

    #[test]
    fn reads_a_fake_sysfs_tree() {
        let dir = tempfile::tempdir().unwrap();
        for (i, (lvl, kind, size)) in [
            (1, "Data", "48K"),
            (1, "Instruction", "32K"),
            (2, "Unified", "2048K"),
        ]
        .iter()
        .enumerate()
        {
            let d = dir.path().join(format!("cache/index{i}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("level"), format!("{lvl}\n")).unwrap();
            std::fs::write(d.join("type"), format!("{kind}\n")).unwrap();
            std::fs::write(d.join("size"), format!("{size}\n")).unwrap();
            std::fs::write(d.join("coherency_line_size"), "64\n").unwrap();
        }
        let all = caches_from_sysfs(dir.path());
        assert_eq!(all.len(), 3);
        let data = data_caches(&all);
        assert_eq!(
            data.iter().map(|c| c.size_bytes).collect::<Vec<_>>(),
            vec![48 << 10, 2 << 20]
        );
        assert!(caches_from_sysfs(&dir.path().join("missing")).is_empty());
    }
}
