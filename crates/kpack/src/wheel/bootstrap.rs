//! rocm-bootstrap's packaging hierarchy (`workflows.md` §4.2): every target's chain
//! target → sub-family → family of bundle keys, their display names and LLVM
//! generics. Kept as data in `crates/kpack/data/rocm-bootstrap.json`, written by
//! `scripts/rocm-bootstrap-table.py` from the PyPI package; CI regenerates it from
//! `rocm-bootstrap==0.3.0` and fails on any drift.
//!
//! Where the reference crashes (§4.11) this maps every target ID: features are
//! dropped with `base_arch` (so `gfx942:sramecc+:xnack-` → `gfx942`), a target
//! sharing a package owner goes to the owner (`gfx1250-strict` → `gfx1250`), and a
//! generic ISA (`gfx11-generic`) goes to the bundle whose `llvm_generic` it is
//! (`gfx11`), the smallest bundle every device that can run it installs.

use crate::kerneldb::base_arch;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::LazyLock;

/// Level of a bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// gfx11
    Family,
    /// gfx110x, gfx12_5
    SubFamily,
    /// gfx1100
    Target,
}

/// One bundle of the table.
#[derive(Debug, Clone, Deserialize)]
pub struct Bundle {
    /// Key (`gfx9_4`).
    pub key: String,
    /// Level.
    pub level: Level,
    /// Display name (`MI300`).
    pub display_name: String,
    /// LLVM generic target covering it, if any.
    pub llvm_generic: Option<String>,
    /// Targets in it.
    pub members: Vec<String>,
}

/// The table.
#[derive(Debug, Clone, Deserialize)]
pub struct Table {
    /// Package and version the table was read from.
    pub source: String,
    /// Known targets.
    pub targets: Vec<String>,
    /// Target → [target bundle, sub-family, family].
    pub chains: BTreeMap<String, Vec<String>>,
    /// Every bundle by key.
    pub bundles: BTreeMap<String, Bundle>,
    /// Alias keys.
    pub aliases: BTreeMap<String, String>,
}

/// Why a target has no bundle key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BootstrapError {
    /// The table compiled in does not parse (a build defect: a test catches it).
    #[error("data/rocm-bootstrap.json: {0}")]
    Table(String),
    /// A chain of the table with no key.
    #[error("{table}: empty chain for {processor}")]
    EmptyChain {
        /// The table's source (package and version).
        table: String,
        /// The processor.
        processor: String,
    },
    /// A target rocm-bootstrap has no package for.
    #[error(
        "target {target} has no package in {table} (known: {}); leave it out with --target",
        known.join(" ")
    )]
    Unknown {
        /// The target ID.
        target: String,
        /// The table's source.
        table: String,
        /// The targets it knows.
        known: Vec<String>,
    },
}

static TABLE: LazyLock<Result<Table, BootstrapError>> = LazyLock::new(|| {
    serde_json::from_str(include_str!("../../data/rocm-bootstrap.json"))
        .map_err(|e| BootstrapError::Table(e.to_string()))
});

/// The table compiled into the binary.
pub fn table() -> Result<&'static Table, BootstrapError> {
    TABLE.as_ref().map_err(Clone::clone)
}

/// Bundle key for a target ID (see the module text for the rules).
pub fn bundle_key(target: &str) -> Result<String, BootstrapError> {
    let t = table()?;
    let base = base_arch(target);
    // A bundle key itself (AOTriton image directories name families: gfx11, gfx12_0).
    if let Some(b) = bundle(&base) {
        return Ok(b.key.clone());
    }
    if let Some(chain) = t.chains.get(&base) {
        return chain
            .first()
            .cloned()
            .ok_or_else(|| BootstrapError::EmptyChain {
                table: t.source.clone(),
                processor: base.clone(),
            });
    }
    if let Some(b) = t
        .bundles
        .values()
        .find(|b| b.llvm_generic.as_deref() == Some(base.as_str()))
    {
        return Ok(b.key.clone());
    }
    Err(BootstrapError::Unknown {
        target: target.to_string(),
        table: t.source.clone(),
        known: t.targets.clone(),
    })
}

/// The chain of a bundle key, itself first: a target key's sub-family and family
/// follow; a sub-family's family follows.
pub fn chain(key: &str) -> Vec<String> {
    let Ok(t) = table() else {
        return vec![key.to_string()];
    };
    if let Some(c) = t.chains.get(key) {
        return c.clone();
    }
    let mut out = vec![key.to_string()];
    for c in t.chains.values() {
        if let Some(i) = c.iter().position(|k| k == key) {
            out.extend(c[i + 1..].iter().cloned());
            break;
        }
    }
    out
}

/// The bundle of a key (aliases resolved).
pub fn bundle(key: &str) -> Option<&'static Bundle> {
    let t = table().ok()?;
    let k = t.aliases.get(key).map_or(key, String::as_str);
    t.bundles.get(k)
}

/// `prefix-key` with `_` → `-` (rocm-bootstrap's `device_dist_name`).
pub fn dist_name(prefix: &str, key: &str) -> String {
    format!("{prefix}-{}", key.replace('_', "-"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_target_id_has_a_bundle_key() {
        assert_eq!(bundle_key("gfx942").unwrap(), "gfx942");
        assert_eq!(bundle_key("gfx942:xnack+").unwrap(), "gfx942");
        assert_eq!(bundle_key("gfx90a:xnack-").unwrap(), "gfx90a");
        assert_eq!(bundle_key("gfx942:sramecc+:xnack-").unwrap(), "gfx942");
        assert_eq!(bundle_key("gfx1250-strict").unwrap(), "gfx1250");
        assert_eq!(bundle_key("gfx11-generic").unwrap(), "gfx11");
        assert_eq!(bundle_key("gfx9-4-generic").unwrap(), "gfx9_4");
        assert_eq!(bundle_key("gfx10-3-generic").unwrap(), "gfx10_3");
        assert_eq!(bundle_key("gfx12-generic").unwrap(), "gfx12_0");
        assert_eq!(bundle_key("gfx9-generic").unwrap(), "gfx9_0");
        assert_eq!(bundle_key("gfx12_0").unwrap(), "gfx12_0");
        assert_eq!(bundle_key("gfx11_0").unwrap(), "gfx110x");
        let e = bundle_key("gfx940").unwrap_err();
        assert!(
            matches!(&e, BootstrapError::Unknown { target, known, .. }
                if target == "gfx940" && known.iter().any(|k| k == "gfx942")),
            "{e:?}"
        );
        let e = e.to_string();
        assert!(e.contains("gfx940") && e.contains("--target"), "{e}");
    }

    #[test]
    fn chains_names_and_display_names_follow_rocm_bootstrap() {
        assert_eq!(chain("gfx1100"), ["gfx1100", "gfx110x", "gfx11"]);
        assert_eq!(chain("gfx1250"), ["gfx1250", "gfx12_5", "gfx12"]);
        assert_eq!(chain("gfx110x"), ["gfx110x", "gfx11"]);
        assert_eq!(chain("gfx11"), ["gfx11"]);
        assert_eq!(
            dist_name("amd-torch-device", "gfx12_0"),
            "amd-torch-device-gfx12-0"
        );
        assert_eq!(
            dist_name("amd-torch-device", "gfx9_4"),
            "amd-torch-device-gfx9-4"
        );
        assert_eq!(bundle("gfx110x").unwrap().display_name, "RDNA3");
        assert_eq!(bundle("gfx11_0").unwrap().key, "gfx110x");
        assert_eq!(bundle("gfx942").unwrap().display_name, "gfx942");
        assert_eq!(
            bundle("gfx11").unwrap().llvm_generic.as_deref(),
            Some("gfx11-generic")
        );
    }
}
