//! The vendors' published figures for the server microarchitectures tdg runs
//! on: double-precision add, multiply and FMA latency in core cycles (the
//! same at every vector width on these parts) and the floating-point
//! registers the instruction set gives. Shown in the documented column
//! beside the probe's measurements, never used in their place.
//!
//! AMD: Software Optimization Guide for AMD Family 17h Processors (Zen 2)
//! and for Family 19h Processors (Zen 3, Zen 4), instruction latency
//! tables. Intel: Intel 64 and IA-32 Architectures Optimization Reference
//! Manual, per-microarchitecture latency tables (Skylake server, Ice Lake
//! server, Golden Cove/Sapphire Rapids: its FADD units cut add latency).

/// One microarchitecture's published figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Microarchitecture {
    pub name: &'static str,
    pub vendor: &'static str,
    pub family: u32,
    /// Inclusive display-model ranges.
    pub models: &'static [(u32, u32)],
    pub add_latency: u32,
    pub mul_latency: u32,
    pub fma_latency: u32,
    /// xmm/ymm registers without AVX-512, and zmm registers with it (`None`:
    /// no AVX-512).
    pub registers: u32,
    pub avx512_registers: Option<u32>,
}

const AMD: &str = "AuthenticAMD";
const INTEL: &str = "GenuineIntel";

pub const TABLE: &[Microarchitecture] = &[
    Microarchitecture {
        name: "AMD Zen 2",
        vendor: AMD,
        family: 0x17,
        models: &[(0x30, 0xaf)],
        add_latency: 3,
        mul_latency: 3,
        fma_latency: 5,
        registers: 16,
        avx512_registers: None,
    },
    Microarchitecture {
        name: "AMD Zen 3",
        vendor: AMD,
        family: 0x19,
        models: &[(0x00, 0x0f), (0x20, 0x5f)],
        add_latency: 3,
        mul_latency: 3,
        fma_latency: 4,
        registers: 16,
        avx512_registers: None,
    },
    Microarchitecture {
        name: "AMD Zen 4",
        vendor: AMD,
        family: 0x19,
        models: &[(0x10, 0x1f), (0x60, 0x7f), (0xa0, 0xaf)],
        add_latency: 3,
        mul_latency: 3,
        fma_latency: 4,
        registers: 16,
        avx512_registers: Some(32),
    },
    Microarchitecture {
        name: "Intel Skylake-SP",
        vendor: INTEL,
        family: 6,
        models: &[(0x55, 0x55)],
        add_latency: 4,
        mul_latency: 4,
        fma_latency: 4,
        registers: 16,
        avx512_registers: Some(32),
    },
    Microarchitecture {
        name: "Intel Ice Lake-SP",
        vendor: INTEL,
        family: 6,
        models: &[(0x6a, 0x6a), (0x6c, 0x6c)],
        add_latency: 4,
        mul_latency: 4,
        fma_latency: 4,
        registers: 16,
        avx512_registers: Some(32),
    },
    Microarchitecture {
        name: "Intel Sapphire Rapids",
        vendor: INTEL,
        family: 6,
        models: &[(0x8f, 0x8f), (0xcf, 0xcf)],
        add_latency: 3,
        mul_latency: 4,
        fma_latency: 4,
        registers: 16,
        avx512_registers: Some(32),
    },
];

/// The entry for a `cpuid` vendor string, display family and model.
pub fn lookup(vendor: &str, family: u32, model: u32) -> Option<&'static Microarchitecture> {
    TABLE.iter().find(|u| {
        u.vendor == vendor
            && u.family == family
            && u.models.iter().any(|&(lo, hi)| (lo..=hi).contains(&model))
    })
}

impl Microarchitecture {
    /// Published latency of `op` (the same at every width on these parts).
    pub fn latency(&self, op: crate::cpu::FpOp) -> u32 {
        match op {
            crate::cpu::FpOp::Add => self.add_latency,
            crate::cpu::FpOp::Mul => self.mul_latency,
            crate::cpu::FpOp::Fma => self.fma_latency,
        }
    }
    /// Published registers for kernels built for `isa`.
    pub fn registers_for(&self, isa: crate::cpu::Width) -> Option<u32> {
        match isa {
            crate::cpu::Width::Avx512 => self.avx512_registers,
            _ => Some(self.registers),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_fleets_parts_are_in_the_table() {
        // family 25 model 17: the AMD EPYC "Genoa" these VMs run on.
        assert_eq!(lookup(AMD, 25, 17).unwrap().name, "AMD Zen 4");
        assert_eq!(lookup(AMD, 0x17, 0x31).unwrap().name, "AMD Zen 2");
        assert_eq!(lookup(AMD, 0x19, 0x01).unwrap().name, "AMD Zen 3");
        assert_eq!(lookup(INTEL, 6, 0x55).unwrap().name, "Intel Skylake-SP");
        assert_eq!(lookup(INTEL, 6, 0x6a).unwrap().name, "Intel Ice Lake-SP");
        assert_eq!(
            lookup(INTEL, 6, 0x8f).unwrap().name,
            "Intel Sapphire Rapids"
        );
        assert!(lookup(INTEL, 6, 0x9e).is_none(), "a desktop part");
        assert!(lookup(AMD, 6, 0x55).is_none(), "vendor must match");
    }

    #[test]
    fn model_ranges_do_not_overlap() {
        for (i, a) in TABLE.iter().enumerate() {
            for b in &TABLE[i + 1..] {
                if a.vendor != b.vendor || a.family != b.family {
                    continue;
                }
                for &(alo, ahi) in a.models {
                    for &(blo, bhi) in b.models {
                        assert!(ahi < blo || bhi < alo, "{} and {}", a.name, b.name);
                    }
                }
            }
        }
    }
}
