//! TOC aliases: one frame listed under every target a device may match first.
//!
//! Loaders before Aug 2026 (and the reference runtime) stop at the first archive
//! whose `gfx_arches` holds a target the device accepts, and within an archive take
//! `toc[key][that target]` or fail (`kpack-formats.md` §4.4). An archive holding
//! `gfx90a` code for most bundles and `gfx90a:xnack-` code for a few lists both
//! targets; an xnack- device matches `gfx90a:xnack-` first and would miss every
//! bundle that has only plain code. Such an archive therefore lists the plain frame a
//! second time, under `gfx90a:xnack-`, pointing at the same ordinal: no byte is
//! stored twice, and every generation of loader finds the code the newest one would
//! pick (the C++ runtime and the Python reader index frames by ordinal and accept a
//! shared one).
//!
//! Which targets an archive lists: every target ID with code in it, plus the union
//! of any two compatible ones of a processor (`gfx90a:sramecc+` and
//! `gfx90a:xnack-` give `gfx90a:sramecc+:xnack-`), so that the first target a
//! device matches is always the most specific one it accepts, and every frame that
//! runs on the device runs on that target.

use crate::kpack::resolve::compatible_targets;
use std::collections::{BTreeMap, BTreeSet};

/// More feature flags than any AMDGPU target has (two today): anything longer is
/// not joined with anything.
const MAX_FEATURES: usize = 4;
/// Targets a processor's joins may add (3^MAX_FEATURES): a hostile archive with many
/// distinct features cannot make the list explode.
const MAX_JOINED: usize = 81;

/// A target ID split into its processor and its `(feature, sign)` flags.
fn parse(t: &str) -> Option<(&str, Vec<(&str, char)>)> {
    let mut parts = t.split(':');
    let processor = parts.next().filter(|p| !p.is_empty())?;
    let mut features = Vec::new();
    for f in parts {
        let sign = f.chars().last().filter(|c| matches!(c, '+' | '-'))?;
        let name = &f[..f.len() - 1];
        if name.is_empty() || features.iter().any(|(n, _)| *n == name) {
            return None;
        }
        features.push((name, sign));
    }
    (features.len() <= MAX_FEATURES).then_some((processor, features))
}

/// Whether code built for `code` runs on a device (or is acceptable under a target
/// key) `target`: the same processor, and every feature `code` sets is set the same
/// way by `target` (a feature `code` leaves out means "either").
pub fn runs_on(code: &str, target: &str) -> bool {
    let (Some((pc, fc)), Some((pt, ft))) = (parse(code), parse(target)) else {
        return code == target;
    };
    pc == pt && fc.iter().all(|f| ft.contains(f))
}

/// The union of two targets of one processor, `None` when they conflict (one sets a
/// feature the other clears) or are of different processors. Features are in name
/// order, as LLVM writes target IDs.
fn join(a: &str, b: &str) -> Option<String> {
    let ((pa, fa), (pb, fb)) = (parse(a)?, parse(b)?);
    if pa != pb {
        return None;
    }
    let mut all: BTreeMap<&str, char> = BTreeMap::new();
    for (n, s) in fa.into_iter().chain(fb) {
        if *all.entry(n).or_insert(s) != s {
            return None;
        }
    }
    if all.len() > MAX_FEATURES {
        return None;
    }
    let mut t = pa.to_string();
    for (n, s) in all {
        t.push(':');
        t.push_str(n);
        t.push(s);
    }
    Some(t)
}

/// `targets` and the joins of their compatible pairs, closed (the join of any two
/// listed targets is listed). Targets that do not parse are kept as they are.
pub fn with_joins(targets: &BTreeSet<String>) -> BTreeSet<String> {
    let mut all = targets.clone();
    let mut added = 0usize;
    loop {
        let list: Vec<&String> = all.iter().collect();
        let mut new = BTreeSet::new();
        for (i, a) in list.iter().enumerate() {
            for b in &list[i + 1..] {
                if let Some(j) = join(a, b).filter(|j| !all.contains(j)) {
                    new.insert(j);
                }
            }
        }
        if new.is_empty() || added + new.len() > MAX_JOINED {
            return all;
        }
        added += new.len();
        all.extend(new);
    }
}

/// Target → the archive unit it goes to when archives are per target: the target
/// alone when it is its processor's only one, else the processor (every variant of
/// it in one archive, so that none shadows another).
pub fn variant_units<'t>(
    targets: impl Iterator<Item = &'t str> + Clone,
) -> BTreeMap<String, String> {
    let mut n: BTreeMap<&str, usize> = BTreeMap::new();
    for t in targets.clone() {
        *n.entry(crate::bundle::target::base_processor(t))
            .or_default() += 1;
    }
    targets
        .map(|t| {
            let p = crate::bundle::target::base_processor(t);
            let u = if n[p] > 1 { p } else { t };
            (t.to_string(), u.to_string())
        })
        .collect()
}

/// One alias: `toc[key][arch]` shares the frame of `toc[key][of]`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Alias {
    /// Binary key (`path#bundle`).
    pub key: String,
    /// The target it is listed under.
    pub arch: String,
    /// The target whose frame it shares.
    pub of: String,
}

/// What an archive holding `kernels` (key, target) lists: its `gfx_arches` (the
/// targets and their joins) and the aliases that make a first-match loader find,
/// under whichever listed target a device matches first, the code the newest loader
/// would pick (the first of that target's compatible targets the bundle has code for).
pub fn plan<'a>(
    kernels: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> (Vec<String>, Vec<Alias>) {
    let mut by_key: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (k, a) in kernels {
        by_key.entry(k).or_default().insert(a);
    }
    let targets: BTreeSet<String> = by_key
        .values()
        .flat_map(|s| s.iter().map(|a| a.to_string()))
        .collect();
    let listed = with_joins(&targets);
    let mut aliases = Vec::new();
    for (key, has) in &by_key {
        for c in &listed {
            if has.contains(c.as_str()) {
                continue;
            }
            if let Some(of) = compatible_targets(c)
                .into_iter()
                .find(|t| has.contains(t.as_str()))
            {
                aliases.push(Alias {
                    key: key.to_string(),
                    arch: c.clone(),
                    of,
                });
            }
        }
    }
    (listed.into_iter().collect(), aliases)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(v: &[&str]) -> BTreeSet<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn code_runs_where_its_features_agree() {
        assert!(runs_on("gfx90a", "gfx90a:xnack-"));
        assert!(runs_on("gfx90a:xnack-", "gfx90a:sramecc+:xnack-"));
        assert!(!runs_on("gfx90a:xnack+", "gfx90a:xnack-"));
        assert!(!runs_on("gfx90a:xnack-", "gfx90a"));
        assert!(!runs_on("gfx90a", "gfx908"));
        assert!(runs_on("gfx9-generic", "gfx9-generic:xnack+"));
    }

    #[test]
    fn joins_close_the_list() {
        assert_eq!(
            with_joins(&set(&["gfx90a", "gfx90a:xnack-", "gfx90a:xnack+"])),
            set(&["gfx90a", "gfx90a:xnack-", "gfx90a:xnack+"])
        );
        assert_eq!(
            with_joins(&set(&["gfx90a:xnack-", "gfx90a:sramecc+", "gfx942"])),
            set(&[
                "gfx90a:sramecc+",
                "gfx90a:sramecc+:xnack-",
                "gfx90a:xnack-",
                "gfx942"
            ])
        );
        // A hostile list of many distinct features stays bounded.
        let many: BTreeSet<String> = (0..40).map(|i| format!("gfx90a:f{i}+")).collect();
        assert!(with_joins(&many).len() <= many.len() + MAX_JOINED);
    }

    #[test]
    fn plain_bundles_are_listed_under_every_variant() {
        let (listed, aliases) = plan([
            ("a#0", "gfx90a"),
            ("a#1", "gfx90a:xnack-"),
            ("a#1", "gfx90a:xnack+"),
            ("a#2", "gfx90a:xnack+"),
        ]);
        assert_eq!(listed, ["gfx90a", "gfx90a:xnack+", "gfx90a:xnack-"]);
        let got: Vec<(&str, &str, &str)> = aliases
            .iter()
            .map(|a| (a.key.as_str(), a.arch.as_str(), a.of.as_str()))
            .collect();
        // a#2 has no code an xnack- or feature-less device can run: no alias.
        assert_eq!(
            got,
            [
                ("a#0", "gfx90a:xnack+", "gfx90a"),
                ("a#0", "gfx90a:xnack-", "gfx90a")
            ]
        );
        // The join takes the most specific code, in the device's order.
        let (listed, aliases) = plan([
            ("b#0", "gfx90a:sramecc+"),
            ("b#1", "gfx90a:xnack-"),
            ("b#2", "gfx90a"),
        ]);
        assert!(listed.contains(&"gfx90a:sramecc+:xnack-".to_string()));
        assert!(aliases.contains(&Alias {
            key: "b#1".into(),
            arch: "gfx90a:sramecc+:xnack-".into(),
            of: "gfx90a:xnack-".into()
        }));
        assert!(aliases.contains(&Alias {
            key: "b#2".into(),
            arch: "gfx90a:sramecc+".into(),
            of: "gfx90a".into()
        }));
    }
}
