//! Model-predicted starting points (Yotov et al., "Think globally, search
//! locally"): register tile from the register count, cache tile from the
//! probe's effective cache sizes, one candidate per cache level.

use crate::space::{Point, Space};
use serde::Serialize;

/// What the model needs to know about the machine.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MachineModel {
    /// Effective data cache sizes, innermost first (from `tdg probe`).
    pub cache_bytes: Vec<u64>,
    /// Floating-point registers the compiler can allocate.
    pub fp_registers: u32,
    /// Bytes per matrix element.
    pub elem_bytes: u64,
}

impl MachineModel {
    /// `fp_registers` from [`fp_registers`] for the flags the kernel is
    /// built with.
    pub fn from_probe(p: &probe::ProbeResult, elem_bytes: u64, fp_registers: u32) -> MachineModel {
        MachineModel {
            cache_bytes: p.caches.iter().map(|c| c.effective_bytes).collect(),
            fp_registers,
            elem_bytes,
        }
    }
}

/// Floating-point registers the compiler can allocate in a kernel built by
/// `cc` with `cflags`. What counts is the ISA the kernel is compiled for,
/// not what the CPU offers: at plain `-O2` a kernel on an AVX-512 machine
/// still gets baseline x86-64's 16 SSE registers, and only flags that
/// enable AVX-512 (`-mavx512f`, `-march=native` there) give it 32. The
/// compiler is asked which ISA macros the flags define; 16 when it cannot
/// say.
pub fn fp_registers(cc: &str, cflags: &[String]) -> u32 {
    let macros = std::process::Command::new(cc)
        .args(cflags)
        .args(["-dM", "-E", "-x", "c", "/dev/null"])
        .stdin(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    fp_registers_from_macros(&macros)
}

/// [`fp_registers`] from the compiler's predefined macros (`cc -dM -E`).
pub fn fp_registers_from_macros(macros: &str) -> u32 {
    let defined = |name: &str| {
        macros
            .lines()
            .any(|l| l.starts_with(&format!("#define {name} ")))
    };
    if defined("__AVX512F__") || defined("__aarch64__") {
        32
    } else {
        16
    }
}

/// A starting point and why the model chose it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Start {
    #[serde(skip)]
    pub point: Point,
    pub reason: String,
}

/// Register tile (MU, NU): the largest MU*NU with MU*NU + MU + NU <= NR
/// (accumulators plus one column of A and one row of B), MU >= NU.
pub fn register_tile(fp_registers: u32) -> (i64, i64) {
    let nr = i64::from(fp_registers);
    let mut best = (1, 1);
    for nu in 1..=nr {
        for mu in nu..=nr {
            if mu * nu + mu + nu <= nr
                && (mu * nu > best.0 * best.1
                    || (mu * nu == best.0 * best.1 && mu - nu < best.0 - best.1))
            {
                best = (mu, nu);
            }
        }
    }
    best
}

/// Largest NB whose three NB x NB tiles (A, B, C) fit in `cache_bytes`.
pub fn cache_tile(cache_bytes: u64, elem_bytes: u64) -> i64 {
    let elems = cache_bytes / elem_bytes.max(1);
    ((elems as f64 / 3.0).sqrt().floor() as i64).max(1)
}

/// One start per cache level for parameters named like ATLAS's (NB, MU,
/// NU; case-insensitive); any other parameter starts mid-range. `fixed`
/// (from `--start`) overrides the model per parameter.
pub fn starts(space: &Space, m: &MachineModel, fixed: &[(String, i64)]) -> Vec<Start> {
    let (mu, nu) = register_tile(m.fp_registers);
    let mid = |i: usize| {
        let v = &space.params[i].values;
        v[v.len() / 2]
    };
    let levels: Vec<(String, Option<i64>)> =
        if space.index_of("NB").is_some() && !m.cache_bytes.is_empty() {
            // Tiling for L1 is the textbook choice; outer levels are worth a
            // try because an L1 miss that hits L2 can be hidden by the FMAs.
            m.cache_bytes
                .iter()
                .take(2)
                .enumerate()
                .map(|(i, &b)| {
                    (
                        format!("L{} ({})", i + 1, stats::bytes(b)),
                        Some(cache_tile(b, m.elem_bytes)),
                    )
                })
                .collect()
        } else {
            vec![("mid-range".to_string(), None)]
        };
    let mut out: Vec<Start> = Vec::new();
    for (level, nb) in levels {
        let mut reasons = Vec::new();
        let wanted: Vec<i64> = space
            .params
            .iter()
            .enumerate()
            .map(|(i, p)| {
                if let Some((_, v)) = fixed.iter().find(|(n, _)| n.eq_ignore_ascii_case(&p.name)) {
                    reasons.push(format!("{}={v} given", p.name));
                    return *v;
                }
                match p.name.to_ascii_uppercase().as_str() {
                    "NB" if nb.is_some() => {
                        let v = nb.expect("checked");
                        reasons.push(format!("NB={v}: 3*NB^2 elements fit {level}"));
                        v
                    }
                    "MU" => {
                        reasons.push(format!("MU={mu}"));
                        mu
                    }
                    "NU" => {
                        reasons.push(format!(
                            "NU={nu}: MU*NU+MU+NU <= {} registers",
                            m.fp_registers
                        ));
                        nu
                    }
                    _ => mid(i),
                }
            })
            .collect();
        let point = space.nearest(&wanted);
        if out.iter().all(|s| s.point != point) {
            out.push(Start {
                reason: format!("{} (model: {})", space.describe(&point), reasons.join(", ")),
                point,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::space::parse_param;

    #[test]
    fn registers_follow_the_compiled_isa_not_the_cpu() {
        assert_eq!(
            fp_registers_from_macros("#define __SSE2__ 1\n#define __x86_64__ 1\n"),
            16
        );
        assert_eq!(
            fp_registers_from_macros("#define __AVX2__ 1\n#define __AVX512F__ 1\n"),
            32
        );
        // The real compiler at plain -O2 targets baseline x86-64 (16 SSE
        // registers) whatever this CPU supports.
        if cfg!(target_arch = "x86_64") {
            assert_eq!(fp_registers("cc", &["-O2".into()]), 16);
            assert_eq!(fp_registers("cc", &["-O2".into(), "-mavx512f".into()]), 32);
        }
    }

    #[test]
    fn register_tile_follows_the_inequality() {
        assert_eq!(register_tile(16), (3, 3));
        assert_eq!(register_tile(32), (7, 3));
        let (mu, nu) = register_tile(8);
        assert!(mu * nu + mu + nu <= 8 && mu >= nu);
    }

    #[test]
    fn cache_tile_fits_three_tiles() {
        let nb = cache_tile(32 << 10, 8);
        assert_eq!(nb, 36);
        assert!(3 * nb * nb * 8 <= 32 << 10 && 3 * (nb + 1) * (nb + 1) * 8 > 32 << 10);
    }

    #[test]
    fn starts_per_cache_level_snap_into_the_space() {
        let space = Space::new(vec![
            parse_param("NB=16:256:16").unwrap(),
            parse_param("MU=1:8").unwrap(),
            parse_param("NU=1:8").unwrap(),
            parse_param("KU=1,2,4").unwrap(),
        ])
        .unwrap();
        let m = MachineModel {
            cache_bytes: vec![32 << 10, 1 << 20, 16 << 20],
            fp_registers: 16,
            elem_bytes: 8,
        };
        let s = starts(&space, &m, &[]);
        assert_eq!(s.len(), 2);
        assert_eq!(space.describe(&s[0].point), "NB=32 MU=3 NU=3 KU=2");
        // 3*NB^2*8 <= 1 MiB -> NB <= 209 -> nearest 208
        assert_eq!(space.describe(&s[1].point), "NB=208 MU=3 NU=3 KU=2");
        assert!(s[0].reason.contains("L1"), "{}", s[0].reason);
        let fixed = starts(&space, &m, &[("mu".into(), 8)]);
        assert!(fixed.iter().all(|s| space.values(&s.point)[1].1 == 8));
    }
}
