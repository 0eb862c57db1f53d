//! Which archive ("unit") each target goes to: one per target ID (the default, the
//! shape ROCm ships) or one per selected family; and what the user selected
//! (`--family`, `--target`, `--all`).

use super::{ArchivePer, Layout, PackOptions};
use crate::bundle::target::base_processor;
use crate::error::{Error, Result};
use crate::family::{PRESETS, known_processor, known_processors};
use std::collections::{BTreeMap, BTreeSet};

pub use crate::bundle::target::target_order;

/// Check `--target` values: known processors, optionally with feature flags.
pub fn check_targets(targets: &[String]) -> Result<()> {
    let unknown: Vec<&str> = targets
        .iter()
        .map(String::as_str)
        .filter(|t| !known_processor(base_processor(t)))
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    Err(Error::Usage(format!(
        "unknown target(s) {}; known: {}",
        unknown.join(", "),
        known_processors().join(" ")
    )))
}

/// Whether a `--target` value takes `arch`: the exact target ID, or a bare
/// processor name, which takes all of its feature variants.
fn target_takes(spec: &str, arch: &str) -> bool {
    spec == arch || (!spec.contains(':') && base_processor(arch) == spec)
}

/// The unit (archive) name `arch` goes to, or `None` when nothing selects it.
pub fn unit_name(arch: &str, opts: &PackOptions) -> Option<String> {
    let fam = opts.families.assign(arch);
    let by_target = opts.targets.iter().find(|t| target_takes(t, arch));
    if fam.is_none() && by_target.is_none() && !opts.all {
        return None;
    }
    Some(match opts.archive_per {
        ArchivePer::Target => arch.to_string(),
        ArchivePer::Family => match (fam, by_target) {
            (Some(i), _) => opts.families.0[i].name.clone(),
            (None, Some(t)) => base_processor(t).to_string(),
            // --all: the preset family of the processor, else the processor alone.
            (None, None) => PRESETS
                .iter()
                .find(|(_, ps)| ps.contains(&base_processor(arch)))
                .map_or_else(|| base_processor(arch).to_string(), |(n, _)| n.to_string()),
        },
    })
}

/// The units of a plan, from every target that has code in the tree (kernels or
/// kernel-database files): their names in order, and target → unit index.
pub struct Units {
    /// Unit names, in the order archives are listed.
    pub names: Vec<String>,
    /// Target → unit index.
    pub of: BTreeMap<String, usize>,
}

impl Units {
    /// Build the units for `archs` (every target with code in the tree). Families
    /// selected in family mode are units even without code (so that the plan can say
    /// so); in target mode units are the targets found.
    pub fn new<'a>(archs: impl IntoIterator<Item = &'a str>, opts: &PackOptions) -> Units {
        let mut names: Vec<String> = match opts.archive_per {
            ArchivePer::Family => opts.families.0.iter().map(|f| f.name.clone()).collect(),
            ArchivePer::Target => Vec::new(),
        };
        let mut extra: BTreeSet<String> = BTreeSet::new();
        let mut pairs: Vec<(String, String)> = archs
            .into_iter()
            .filter_map(|a| unit_name(a, opts).map(|u| (a.to_string(), u)))
            .collect();
        // Per target ID, the feature variants of one processor share one archive
        // (named by the processor): archives `x_gfx90a` and `x_gfx90a:xnack-` side by
        // side would let a first-match loader on an xnack- device stop at the second,
        // which lacks the bundles that have only plain code (ROCm 7.14). In one
        // archive, TOC aliases list that code under every variant.
        if opts.archive_per == ArchivePer::Target {
            let units = crate::kpack::alias::variant_units(pairs.iter().map(|(a, _)| a.as_str()));
            for (a, u) in &mut pairs {
                *u = units[a.as_str()].clone();
            }
        }
        for (_, u) in &pairs {
            if !names.contains(u) {
                extra.insert(u.clone());
            }
        }
        let mut extra: Vec<String> = extra.into_iter().collect();
        extra.sort_by(|a, b| target_order(a, b));
        names.extend(extra);
        let of = pairs
            .into_iter()
            .filter_map(|(a, u)| names.iter().position(|n| *n == u).map(|i| (a, i)))
            .collect();
        Units { names, of }
    }
}

/// Archive path of a unit, relative to the output.
pub fn archive_rel(opts: &PackOptions, unit: &str) -> String {
    let name = format!(".kpack/{}_{}.kpack", opts.group, unit);
    match opts.layout {
        Layout::Combined => name,
        Layout::Split => format!("{unit}/{name}"),
    }
}

/// Check that a unit's name makes a file name every file system takes (a colon is
/// allowed: target IDs carry one, as ROCm's archives do; Windows refuses it).
pub fn check_unit_name(unit: &str) -> Result<()> {
    if unit.is_empty()
        || unit == "."
        || unit == ".."
        || unit.chars().any(|c| {
            matches!(c, '/' | '\\' | '\0' | '*' | '?' | '"' | '<' | '>' | '|') || c.is_control()
        })
    {
        return Err(Error::Usage(format!(
            "{unit:?} cannot be used in an archive's file name"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::family::Families;

    fn opts(per: ArchivePer, fams: &[&str], targets: &[&str], all: bool) -> PackOptions {
        let f: Vec<String> = fams.iter().map(|s| s.to_string()).collect();
        let mut o = PackOptions::new(
            "g",
            if f.is_empty() {
                Families::default()
            } else {
                Families::parse(&f).unwrap()
            },
        );
        o.archive_per = per;
        o.targets = targets.iter().map(|s| s.to_string()).collect();
        o.all = all;
        o
    }

    #[test]
    fn natural_target_order() {
        let mut v = vec![
            "gfx1250-strict",
            "gfx1250",
            "gfx90a",
            "gfx1010",
            "gfx900",
            "gfx9-generic",
            "gfx90a:xnack+",
            "gfx942",
        ];
        v.sort_by(|a, b| target_order(a, b));
        assert_eq!(
            v,
            [
                "gfx900",
                "gfx90a",
                "gfx90a:xnack+",
                "gfx942",
                "gfx9-generic",
                "gfx1010",
                "gfx1250",
                "gfx1250-strict"
            ]
        );
        // The strict processor is its own target, never folded into gfx1250.
        let o = opts(ArchivePer::Target, &["gfx125X"], &[], false);
        let u = Units::new(["gfx1250", "gfx1250-strict"], &o);
        assert_eq!(u.names, ["gfx1250", "gfx1250-strict"]);
    }

    #[test]
    fn units_per_target_and_per_family() {
        let archs = ["gfx90a:xnack+", "gfx900", "gfx90a", "gfx1030", "gfx1100"];
        let o = opts(ArchivePer::Target, &["gfx90X"], &["gfx1030"], false);
        let u = Units::new(archs, &o);
        // gfx90a's variants share the processor's archive.
        assert_eq!(u.names, ["gfx900", "gfx90a", "gfx1030"]);
        assert_eq!(u.of["gfx90a:xnack+"], u.of["gfx90a"]);
        assert!(!u.of.contains_key("gfx1100"));
        let o = opts(
            ArchivePer::Family,
            &["gfx90X", "gfx125X"],
            &["gfx1030"],
            false,
        );
        let u = Units::new(archs, &o);
        assert_eq!(u.names, ["gfx90X", "gfx125X", "gfx1030"]);
        assert_eq!(u.of["gfx90a:xnack+"], 0);
        let o = opts(ArchivePer::Family, &[], &[], true);
        let u = Units::new(archs, &o);
        assert_eq!(u.names, ["gfx90X", "gfx103X", "gfx110X"]);
        // A bare processor takes its feature variants; an exact ID only itself.
        let o = opts(ArchivePer::Target, &[], &["gfx90a:xnack+"], false);
        assert_eq!(Units::new(archs, &o).names, ["gfx90a:xnack+"]);
        let o = opts(ArchivePer::Target, &[], &["gfx90a"], false);
        assert_eq!(Units::new(archs, &o).names, ["gfx90a"]);
        assert!(
            check_targets(&["gfx9999".into()])
                .unwrap_err()
                .to_string()
                .contains("known: gfx900")
        );
        assert!(check_targets(&["gfx942:sramecc+:xnack-".into()]).is_ok());
        assert!(check_unit_name("gfx90a:xnack+").is_ok());
        assert!(check_unit_name("a/b").is_err());
    }
}
