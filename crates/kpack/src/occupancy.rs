//! Occupancy hint: how many waves of a kernel one SIMD can hold at once, as limited
//! by its registers (and, on GFX9, its LDS at its maximum workgroup size). The
//! rules and per-generation numbers are the ones LLVM's AMDGPU backend uses
//! (`llvm/lib/Target/AMDGPU/Utils/AMDGPUBaseInfo.cpp`: `getMaxWavesPerEU`,
//! `getTotalNumVGPRs`, `getVGPRAllocGranule`, `getOccupancyWithNumSGPRs`,
//! `getLocalMemorySize`); `docs/occupancy.md` writes them out with examples.
//! Targets whose numbers are not known here get no hint (`None`), never a guess.

use crate::bundle::target::base_processor;
use crate::codeobj::Kernel;
use serde::Serialize;

/// The register files and limits of one generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Generation {
    /// Waves per SIMD at most.
    max_waves: u64,
    /// VGPRs per lane available to the waves of one SIMD (wave64, wave32).
    vgprs: (u64, u64),
    /// VGPR allocation granule (wave64, wave32).
    granule: (u64, u64),
    /// AGPRs share the VGPR file (gfx90a and later CDNA).
    unified_agprs: bool,
    /// AGPRs are a file of their own of the VGPR file's size (gfx908).
    separate_agprs: bool,
    /// SGPRs limit waves (GFX9: 800 per SIMD, allocated in blocks of 16).
    sgpr_limited: bool,
    /// LDS bytes per CU and SIMDs per CU, where the LDS limit is modelled.
    lds: Option<(u64, u64)>,
}

fn generation(processor: &str) -> Option<Generation> {
    let gfx9 = Generation {
        max_waves: 10,
        vgprs: (256, 256),
        granule: (4, 4),
        unified_agprs: false,
        separate_agprs: false,
        sgpr_limited: true,
        lds: Some((64 << 10, 4)),
    };
    let cdna2 = Generation {
        max_waves: 8,
        vgprs: (512, 512),
        granule: (8, 8),
        unified_agprs: true,
        separate_agprs: false,
        ..gfx9
    };
    let gfx10_1 = Generation {
        max_waves: 20,
        vgprs: (512, 1024),
        granule: (4, 8),
        unified_agprs: false,
        separate_agprs: false,
        sgpr_limited: false,
        lds: None,
    };
    let gfx10_3 = Generation {
        max_waves: 16,
        granule: (8, 16),
        ..gfx10_1
    };
    let gfx11_big = Generation {
        vgprs: (768, 1536),
        granule: (12, 24),
        ..gfx10_3
    };
    Some(match processor {
        "gfx900" | "gfx902" | "gfx904" | "gfx906" | "gfx909" | "gfx90c" | "gfx9-generic" => gfx9,
        "gfx908" => Generation {
            separate_agprs: true,
            ..gfx9
        },
        "gfx90a" | "gfx940" | "gfx941" | "gfx942" | "gfx9-4-generic" => cdna2,
        "gfx950" => Generation {
            lds: Some((160 << 10, 4)),
            ..cdna2
        },
        "gfx1010" | "gfx1011" | "gfx1012" | "gfx1013" | "gfx10-1-generic" => gfx10_1,
        "gfx1030" | "gfx1031" | "gfx1032" | "gfx1033" | "gfx1034" | "gfx1035" | "gfx1036"
        | "gfx10-3-generic" | "gfx1102" | "gfx1103" => gfx10_3,
        "gfx1100" | "gfx1101" => gfx11_big,
        _ => return None,
    })
}

/// The hint for one kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Occupancy {
    /// Waves per SIMD: the smallest of the limits below.
    pub waves: u64,
    /// The hardware's most.
    pub max_waves: u64,
    /// Allowed by the VGPRs (with AGPRs where they share or mirror the file).
    pub by_vgprs: u64,
    /// Allowed by the SGPRs (GFX9 only; later generations do not limit by SGPRs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by_sgprs: Option<u64>,
    /// Allowed by the LDS at the kernel's maximum workgroup size (GFX9 only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by_lds: Option<u64>,
}

fn align_up(v: u64, a: u64) -> u64 {
    v.div_ceil(a) * a
}

/// Waves per SIMD for `kernel` on `target` (a target ID), or `None` when the target's
/// numbers or the kernel's register counts are not known.
pub fn occupancy(target: &str, kernel: &Kernel) -> Option<Occupancy> {
    let g = generation(base_processor(target))?;
    let wave32 = match kernel.wavefront_size {
        Some(32) => true,
        Some(64) => false,
        _ => return None,
    };
    let (total, granule) = if wave32 {
        (g.vgprs.1, g.granule.1)
    } else {
        (g.vgprs.0, g.granule.0)
    };
    let vgpr = kernel.vgpr?;
    let agpr = kernel.agpr.unwrap_or(0);
    let regs = if g.separate_agprs {
        vgpr.max(agpr)
    } else if g.unified_agprs && agpr > 0 {
        // Whether `.vgpr_count` already includes the AGPRs is not certain here:
        // no hint rather than a guess.
        return None;
    } else {
        vgpr
    };
    let by_vgprs = if regs < granule {
        g.max_waves
    } else {
        (total / align_up(regs, granule)).clamp(1, g.max_waves)
    };
    let by_sgprs = if g.sgpr_limited {
        let s = kernel.sgpr?;
        Some(match s {
            0..=80 => 10,
            81..=88 => 9,
            89..=100 => 8,
            _ => 7,
        })
    } else {
        None
    };
    let by_lds = match (g.lds, kernel.lds, kernel.max_flat_workgroup_size) {
        (Some((per_cu, simds)), Some(lds), Some(wg)) if lds > 0 && wg > 0 => {
            let wave = if wave32 { 32 } else { 64 };
            let groups = per_cu / lds;
            let waves_per_group = wg.div_ceil(wave);
            Some((groups * waves_per_group / simds).min(g.max_waves))
        }
        _ => None,
    };
    let waves = [Some(by_vgprs), by_sgprs, by_lds]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(g.max_waves)
        .min(g.max_waves);
    Some(Occupancy {
        waves,
        max_waves: g.max_waves,
        by_vgprs,
        by_sgprs,
        by_lds,
    })
}

/// Why [`occupancy`] gives no hint for `kernel` on `target` (`None` when it gives
/// one): what the detail view says instead of a number.
pub fn why_unknown(target: &str, kernel: &Kernel) -> Option<&'static str> {
    if occupancy(target, kernel).is_some() {
        return None;
    }
    let Some(g) = generation(base_processor(target)) else {
        return Some("no register-file figures for this target");
    };
    Some(if !matches!(kernel.wavefront_size, Some(32 | 64)) {
        "the code object records no wavefront size"
    } else if kernel.vgpr.is_none() {
        "the code object records no VGPR count"
    } else if g.unified_agprs && kernel.agpr.unwrap_or(0) > 0 {
        // docs/occupancy.md: whether .vgpr_count includes the AGPRs is not certain.
        "withheld: the kernel uses AGPRs, and whether its VGPR count includes them is not recorded"
    } else {
        "the code object records no SGPR count"
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(vgpr: u64, agpr: Option<u64>, sgpr: u64, lds: u64, wg: u64, wave: u64) -> Kernel {
        Kernel {
            vgpr: Some(vgpr),
            agpr,
            sgpr: Some(sgpr),
            lds: Some(lds),
            max_flat_workgroup_size: Some(wg),
            wavefront_size: Some(wave),
            ..Kernel::default()
        }
    }

    /// Hand-computed cases (docs/occupancy.md has the arithmetic).
    #[test]
    fn hand_computed_cases() {
        // gfx900, 24 VGPRs: 256 / 24 = 10.67 -> 10; 12 SGPRs: 10; no LDS.
        let o = occupancy("gfx900", &k(24, None, 12, 0, 1024, 64)).unwrap();
        assert_eq!(
            (o.waves, o.by_vgprs, o.by_sgprs, o.by_lds),
            (10, 10, Some(10), None)
        );
        // gfx906, 46 VGPRs -> 48: 256 / 48 = 5.
        assert_eq!(
            occupancy("gfx906", &k(46, None, 12, 0, 256, 64))
                .unwrap()
                .waves,
            5
        );
        // gfx900 by SGPRs: 85 allow 9 waves, 90 allow 8, 101 allow 7.
        assert_eq!(
            occupancy("gfx900", &k(8, None, 85, 0, 64, 64))
                .unwrap()
                .waves,
            9
        );
        assert_eq!(
            occupancy("gfx900", &k(8, None, 90, 0, 64, 64))
                .unwrap()
                .waves,
            8
        );
        assert_eq!(
            occupancy("gfx900", &k(8, None, 101, 0, 64, 64))
                .unwrap()
                .waves,
            7
        );
        // gfx900, 1 KiB of LDS at 256 work-items: 64 groups x 4 waves / 4 SIMDs = 64,
        // capped at 10; 32 KiB at 1024: 2 groups x 16 waves / 4 = 8.
        assert_eq!(
            occupancy("gfx900", &k(4, None, 10, 1024, 256, 64))
                .unwrap()
                .by_lds,
            Some(10)
        );
        assert_eq!(
            occupancy("gfx900", &k(4, None, 10, 32 << 10, 1024, 64))
                .unwrap()
                .waves,
            8
        );
        // gfx90a: 512 per lane, granule 8, at most 8 waves. 46 -> 48: 512 / 48 = 10 -> 8;
        // 100 -> 104: 4.
        assert_eq!(
            occupancy("gfx90a", &k(46, Some(0), 12, 0, 1024, 64))
                .unwrap()
                .waves,
            8
        );
        assert_eq!(
            occupancy("gfx90a:xnack+", &k(100, Some(0), 12, 0, 1024, 64))
                .unwrap()
                .waves,
            4
        );
        // gfx908: AGPRs in a file of their own: the larger count limits.
        assert_eq!(
            occupancy("gfx908", &k(9, Some(40), 12, 0, 64, 64))
                .unwrap()
                .by_vgprs,
            6
        );
        // gfx1030 wave32: 1024 per lane, granule 16, at most 16: 24 -> 32: 32 -> 16.
        // 100 -> 112: 9. SGPRs do not limit.
        let o = occupancy("gfx1030", &k(100, None, 100, 0, 256, 32)).unwrap();
        assert_eq!((o.waves, o.by_sgprs), (9, None));
        // gfx1100 wave32: 1536 per lane, granule 24: 100 -> 120: 12.
        assert_eq!(
            occupancy("gfx1100", &k(100, None, 10, 0, 256, 32))
                .unwrap()
                .waves,
            12
        );
        // Unknown numbers: no hint.
        assert_eq!(occupancy("gfx1200", &k(8, None, 8, 0, 64, 32)), None);
        assert_eq!(occupancy("gfx90a", &k(8, Some(32), 8, 0, 64, 64)), None);
        assert_eq!(occupancy("gfx900", &Kernel::default()), None);
    }

    #[test]
    fn a_missing_hint_says_why() {
        // Trial 35: a gfx942 kernel using AGPRs said "not known for this target".
        let agprs = k(64, Some(16), 32, 0, 256, 64);
        assert_eq!(occupancy("gfx942", &agprs), None);
        assert!(
            why_unknown("gfx942", &agprs)
                .unwrap()
                .contains("uses AGPRs")
        );
        assert_eq!(
            why_unknown("gfx9999", &agprs),
            Some("no register-file figures for this target")
        );
        let plain = k(64, None, 32, 0, 256, 64);
        assert_eq!(why_unknown("gfx942", &plain), None);
        let no_wave = Kernel {
            wavefront_size: None,
            ..plain
        };
        assert_eq!(
            why_unknown("gfx942", &no_wave),
            Some("the code object records no wavefront size")
        );
    }
}
