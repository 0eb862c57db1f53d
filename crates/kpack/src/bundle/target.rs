//! Bundle entry IDs (`hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+`) and AMD target IDs.
//!
//! An entry ID is `<offload-kind>-<arch>-<vendor>-<os>-<environment>[-<target-id>]`;
//! the environment of AMD device entries is empty, hence the `--` before the target
//! ID. The *arch* kpack uses everywhere (TOC keys, archive names, `gfx_arches`) is the
//! whole target ID after the last `--`, feature flags included.

use serde::Serialize;
use std::fmt;

/// A parsed bundle entry ID.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct EntryId {
    /// The ID exactly as stored in the bundle.
    pub triple: String,
    /// Offload kind: `host`, `hip`, `hipv4`, `openmp`, `cuda`…
    pub kind: String,
    /// Target ID (processor and features) for device entries, `None` for host entries
    /// and IDs without a `--` separator.
    pub target: Option<TargetId>,
}

impl EntryId {
    /// Parse an entry ID. Never fails: unknown shapes give `target: None`.
    pub fn parse(triple: &str) -> EntryId {
        let kind = triple.split('-').next().unwrap_or_default().to_string();
        let target = if kind == "host" {
            None
        } else {
            // `…--gfx90a:xnack+`; older object-file bundles spell `hip-amdgcn-amd-amdhsa-gfx900`.
            let tail = match triple.rsplit_once("--") {
                Some((_, t)) => Some(t),
                None => triple.find("-gfx").map(|p| &triple[p + 1..]),
            };
            tail.filter(|t| !t.is_empty()).map(TargetId::parse)
        };
        EntryId {
            triple: triple.to_string(),
            kind,
            target,
        }
    }

    /// Whether this is the (dummy) host entry.
    pub fn is_host(&self) -> bool {
        self.kind == "host"
    }

    /// The arch string used as TOC key: the full target ID with features.
    pub fn arch(&self) -> Option<String> {
        self.target.as_ref().map(ToString::to_string)
    }
}

/// An AMD target ID: a processor and zero or more `feature+`/`feature-` flags.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TargetId {
    /// Processor, e.g. `gfx90a` or `gfx9-4-generic`.
    pub processor: String,
    /// Feature flags verbatim and in stored order, e.g. `["sramecc+", "xnack-"]`.
    pub features: Vec<String>,
}

impl TargetId {
    /// Parse `gfx942:sramecc+:xnack-` (split on `:`, empty pieces dropped).
    pub fn parse(s: &str) -> TargetId {
        let mut parts = s.split(':');
        let processor = parts.next().unwrap_or_default().to_string();
        let features = parts
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect();
        TargetId {
            processor,
            features,
        }
    }
}

impl fmt::Display for TargetId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.processor)?;
        for feat in &self.features {
            write!(f, ":{feat}")?;
        }
        Ok(())
    }
}

/// The base processor of an arch string (`gfx90a:xnack+` → `gfx90a`).
pub fn base_processor(arch: &str) -> &str {
    arch.split(':').next().unwrap_or(arch)
}

/// The processor name for an AMDGPU ELF `e_flags` machine value (`EF_AMDGPU_MACH`).
pub fn processor_from_mach(mach: u32) -> Option<&'static str> {
    Some(match mach {
        0x020 => "gfx600",
        0x021 => "gfx601",
        0x022 => "gfx700",
        0x023 => "gfx701",
        0x024 => "gfx702",
        0x025 => "gfx703",
        0x026 => "gfx704",
        0x028 => "gfx801",
        0x029 => "gfx802",
        0x02a => "gfx803",
        0x02b => "gfx810",
        0x02c => "gfx900",
        0x02d => "gfx902",
        0x02e => "gfx904",
        0x02f => "gfx906",
        0x030 => "gfx908",
        0x031 => "gfx909",
        0x032 => "gfx90c",
        0x033 => "gfx1010",
        0x034 => "gfx1011",
        0x035 => "gfx1012",
        0x036 => "gfx1030",
        0x037 => "gfx1031",
        0x038 => "gfx1032",
        0x039 => "gfx1033",
        0x03a => "gfx602",
        0x03b => "gfx705",
        0x03c => "gfx805",
        0x03d => "gfx1035",
        0x03e => "gfx1034",
        0x03f => "gfx90a",
        0x040 => "gfx940",
        0x041 => "gfx1100",
        0x042 => "gfx1013",
        0x043 => "gfx1150",
        0x044 => "gfx1103",
        0x045 => "gfx1036",
        0x046 => "gfx1101",
        0x047 => "gfx1102",
        0x048 => "gfx1200",
        0x04a => "gfx1151",
        0x04b => "gfx941",
        0x04c => "gfx942",
        0x04e => "gfx1201",
        0x04f => "gfx950",
        0x051 => "gfx9-generic",
        0x052 => "gfx10-1-generic",
        0x053 => "gfx10-3-generic",
        0x054 => "gfx11-generic",
        0x055 => "gfx1152",
        0x059 => "gfx12-generic",
        _ => return None,
    })
}

/// The target ID of a raw AMDGPU code object from its ELF header fields
/// (`e_flags` and the `EI_ABIVERSION` byte, which gives the code-object version).
pub fn target_from_elf_flags(e_flags: u32, abi_version: u8) -> Option<TargetId> {
    let processor = processor_from_mach(e_flags & 0xff)?.to_string();
    let mut features = Vec::new();
    match abi_version {
        // Code object v3: single bits mean "on".
        1 => {
            if e_flags & 0x200 != 0 {
                features.push("sramecc+".to_string());
            }
            if e_flags & 0x100 != 0 {
                features.push("xnack+".to_string());
            }
        }
        // v4 and later: two-bit fields, ANY and UNSUPPORTED give no feature.
        _ => {
            match e_flags & 0xc00 {
                0x800 => features.push("sramecc-".to_string()),
                0xc00 => features.push("sramecc+".to_string()),
                _ => {}
            }
            match e_flags & 0x300 {
                0x200 => features.push("xnack-".to_string()),
                0x300 => features.push("xnack+".to_string()),
                _ => {}
            }
        }
    }
    Some(TargetId {
        processor,
        features,
    })
}

/// Natural order of target IDs: by processor number (gfx900 < gfx90a < gfx1010 <
/// gfx1250), then generic ISAs, then features.
pub fn target_order(a: &str, b: &str) -> std::cmp::Ordering {
    // (generation, generic ISA after its generation's processors, processor number)
    let key = |t: &str| {
        let p = base_processor(t);
        let digits = p.strip_prefix("gfx").unwrap_or(p);
        let stem = digits.split('-').next().unwrap_or(digits);
        let generic = p.ends_with("-generic");
        let major = if generic {
            stem
        } else {
            &stem[..stem.len().saturating_sub(2)]
        };
        (
            major.parse::<u32>().unwrap_or(u32::MAX),
            generic,
            stem.len(),
            stem.to_string(),
            p.to_string(),
            t.to_string(),
        )
    };
    key(a).cmp(&key(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_entry_keeps_feature_flags() {
        let e = EntryId::parse("hipv4-amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-");
        assert_eq!(e.kind, "hipv4");
        assert!(!e.is_host());
        let t = e.target.clone().unwrap();
        assert_eq!(t.processor, "gfx942");
        assert_eq!(t.features, vec!["sramecc+", "xnack-"]);
        assert_eq!(e.arch().as_deref(), Some("gfx942:sramecc+:xnack-"));
        assert_eq!(base_processor("gfx942:sramecc+:xnack-"), "gfx942");
    }

    #[test]
    fn host_entries_and_odd_ids_have_no_target() {
        assert!(EntryId::parse("host-x86_64-unknown-linux-gnu-").is_host());
        assert_eq!(
            EntryId::parse("host-x86_64-unknown-linux-gnu-").arch(),
            None
        );
        assert_eq!(EntryId::parse("test-triple").arch(), None);
        assert_eq!(EntryId::parse("hip-amdgcn-amd-amdhsa--").arch(), None);
        assert_eq!(
            EntryId::parse("hip-amdgcn-amd-amdhsa-gfx906")
                .arch()
                .as_deref(),
            Some("gfx906")
        );
        assert_eq!(
            EntryId::parse("hip-amdgcn-amd-amdhsa--gfx9-4-generic")
                .arch()
                .as_deref(),
            Some("gfx9-4-generic")
        );
    }

    #[test]
    fn code_object_flags_map_to_target_ids() {
        // gfx90a, v4 (abi 2), xnack on
        assert_eq!(
            target_from_elf_flags(0x33f, 2).unwrap().to_string(),
            "gfx90a:xnack+"
        );
        // gfx942, sramecc on, xnack off
        assert_eq!(
            target_from_elf_flags(0xe4c, 3).unwrap().to_string(),
            "gfx942:sramecc+:xnack-"
        );
        // gfx900 with "any" settings
        assert_eq!(
            target_from_elf_flags(0x12c, 2).unwrap().to_string(),
            "gfx900"
        );
        // v3 bits
        assert_eq!(
            target_from_elf_flags(0x13f, 1).unwrap().to_string(),
            "gfx90a:xnack+"
        );
        assert!(target_from_elf_flags(0x0ff, 2).is_none());
    }
}
