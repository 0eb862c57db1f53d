//! What the Architectures view selects (presets and single targets), and what a
//! selection takes and leaves out.

use kpack::family::Family;

/// What the families view selects: presets, and single targets (exact target IDs
/// such as `gfx90a:xnack+`, or processors with all their variants) not already in a
/// selected preset. The CLI's `--family` and `--target`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// Preset names.
    pub families: Vec<String>,
    /// Target IDs or processors.
    pub targets: Vec<String>,
}

impl Selection {
    /// Nothing selected.
    pub fn is_empty(&self) -> bool {
        self.families.is_empty() && self.targets.is_empty()
    }

    /// `gfx90X gfx90a:xnack+`.
    pub fn label(&self) -> String {
        self.families
            .iter()
            .chain(&self.targets)
            .cloned()
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Whether it takes code for `arch` (a target ID), as the core's options do.
    pub fn takes(&self, arch: &str) -> bool {
        self.families
            .iter()
            .any(|f| kpack::family::Family::parse(f).is_ok_and(|f| f.contains(arch)))
            || self
                .targets
                .iter()
                .any(|t| Pick::Target(t.clone()).takes(arch))
    }

    /// The targets of `report` with code (in binaries or in the archives host-only
    /// binaries reach) that it does not take, with their code objects: what a pack
    /// with it drops, or refuses to.
    pub fn left_out(&self, report: &kpack::scan::TreeReport) -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = report
            .arch_totals
            .iter()
            .filter(|(a, t)| t.code_objects + t.archived_code_objects > 0 && !self.takes(a))
            .map(|(a, t)| (a.clone(), t.code_objects + t.archived_code_objects))
            .collect();
        v.sort_by(|a, b| kpack::natural::target_cmp(&a.0, &b.0));
        v
    }

    /// The core's options for it.
    pub fn options(&self, group: &str) -> Result<kpack::pack::PackOptions, String> {
        let families = if self.families.is_empty() {
            kpack::family::Families::default()
        } else {
            kpack::family::Families::parse(&self.families).map_err(|e| e.to_string())?
        };
        let mut o = kpack::pack::PackOptions::new(group, families);
        o.targets = self.targets.clone();
        Ok(o)
    }
}

/// One selected unit of the families view: a preset or a single target.
#[derive(Debug, Clone)]
pub enum Pick {
    /// A preset family.
    Family(Family),
    /// A target ID (exactly), or a processor (all its variants).
    Target(String),
}

impl Pick {
    /// Its name.
    pub fn name(&self) -> &str {
        match self {
            Pick::Family(f) => &f.name,
            Pick::Target(t) => t,
        }
    }

    /// Whether it takes code for `arch` (a target ID).
    pub fn takes(&self, arch: &str) -> bool {
        match self {
            Pick::Family(f) => f.contains(arch),
            Pick::Target(t) if t.contains(':') => t == arch,
            Pick::Target(t) => kpack::bundle::target::base_processor(arch) == t,
        }
    }
}
