//! What a combine reads and will write, found before anything is written: the
//! shards ([`load_shards`]), who holds each artifact with the preferred shard first
//! ([`Holders::of`]), and the output artifacts ([`plan_outputs`]): the generic one
//! per component, and one per target or per configured group.

use super::combine::{CombineOptions, Difference, TargetGroup, parse_artifact_name};
use super::manifest::read_manifest;
use crate::error::{Error, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One shard: a split's output directory.
pub(super) struct Shard {
    pub path: PathBuf,
    pub label: String,
    /// artifact name → (component, target)
    pub artifacts: BTreeMap<String, (String, Option<String>)>,
}

/// Read every shard: a directory apart from the output, with artifacts whose
/// manifests read, under a name no other shard has.
pub(super) fn load_shards(shards: &[PathBuf], out: &Path) -> Result<Vec<Shard>> {
    if shards.is_empty() {
        return Err(Error::Usage("no shard given".into()));
    }
    let mut loaded: Vec<Shard> = Vec::new();
    for p in shards {
        let meta = std::fs::metadata(p).map_err(|e| Error::io(p, e))?;
        if !meta.is_dir() {
            return Err(Error::Usage(format!("{}: not a directory", p.display())));
        }
        crate::fsutil::check_apart(p, out)?;
        let label = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| p.display().to_string());
        let mut artifacts = BTreeMap::new();
        for e in std::fs::read_dir(p).map_err(|e| Error::io(p, e))? {
            let e = e.map_err(|e| Error::io(p, e))?;
            let name = e.file_name().to_string_lossy().into_owned();
            if !e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                continue;
            }
            if let Some(parsed) = parse_artifact_name(&name) {
                read_manifest(&e.path())?;
                artifacts.insert(name, parsed);
            }
        }
        if artifacts.is_empty() {
            return Err(Error::NothingToDo(format!(
                "{}: no artifacts (<component>_generic, <component>_gfx…) in this shard",
                p.display()
            )));
        }
        if loaded.iter().any(|s| s.label == label) {
            return Err(Error::Conflict(format!(
                "two shards named {label}: give shards distinct directory names"
            )));
        }
        loaded.push(Shard {
            path: p.clone(),
            label,
            artifacts,
        });
    }
    Ok(loaded)
}

/// Who holds each artifact, and the components.
pub(super) struct Holders<'s> {
    /// The shard `--prefer` names, if any.
    pub prefer: Option<usize>,
    /// Holders of each artifact, the preferred shard first.
    pub by_artifact: BTreeMap<String, Vec<&'s Shard>>,
    /// Components with a generic artifact.
    pub components: BTreeSet<String>,
}

impl<'s> Holders<'s> {
    /// Whose copy is taken where copies may differ (host code of host-only
    /// binaries): the preferred shard, else the configuration's primary shard, else
    /// the first.
    pub fn of(loaded: &'s [Shard], opts: &CombineOptions) -> Result<Self> {
        let prefer = match &opts.prefer {
            None => None,
            Some(want) => Some(
                loaded
                    .iter()
                    .position(|s| s.label == *want || s.path == Path::new(want))
                    .ok_or_else(|| {
                        Error::Usage(format!("--prefer {want}: not one of the shards given"))
                    })?,
            ),
        };
        let primary = opts
            .config
            .as_ref()
            .and_then(|c| loaded.iter().position(|s| s.label == c.primary_shard));
        let first = prefer.or(primary);
        let order: Vec<usize> = first
            .into_iter()
            .chain((0..loaded.len()).filter(|i| Some(*i) != first))
            .collect();
        let mut by_artifact: BTreeMap<String, Vec<&Shard>> = BTreeMap::new();
        for &i in &order {
            for name in loaded[i].artifacts.keys() {
                by_artifact
                    .entry(name.clone())
                    .or_default()
                    .push(&loaded[i]);
            }
        }
        let components: BTreeSet<String> = by_artifact
            .keys()
            .filter_map(|n| parse_artifact_name(n))
            .filter(|(_, t)| t.is_none())
            .map(|(c, _)| c)
            .collect();
        Ok(Holders {
            prefer,
            by_artifact,
            components,
        })
    }

    /// A generic artifact must be in every shard (a difference when it is not); a
    /// target artifact's component must have a generic part (refused).
    pub fn check_complete(&self, loaded: &[Shard], diffs: &mut Vec<Difference>) -> Result<()> {
        for (name, hs) in &self.by_artifact {
            let (c, t) = parse_artifact_name(name).unwrap_or_default();
            if t.is_none() {
                for s in loaded {
                    if !s.artifacts.contains_key(name) {
                        diffs.push(Difference {
                            artifact: name.clone(),
                            path: String::new(),
                            shard: s.label.clone(),
                            what: format!("generic artifact missing (present in {})", hs[0].label),
                            offset: None,
                        });
                    }
                }
            } else if !self.components.contains(&c) {
                return Err(Error::Damaged {
                    path: PathBuf::from(&hs[0].label),
                    what: format!(
                        "{name}: no shard holds {c}_generic, the host side of its code objects"
                    ),
                });
            }
        }
        Ok(())
    }
}

/// One output artifact: its name, and the input artifacts (with the shard whose
/// copy is taken) it is made of.
pub(super) struct OutPlan<'a> {
    pub name: String,
    pub parts: Vec<(&'a str, &'a Shard)>,
}

/// Per configured group, the architectures no shard delivered.
pub(super) type Missing = BTreeMap<String, Vec<String>>;

/// The output artifacts: generic per component; per target, or per configured
/// group. Returns them and, per group, the architectures no shard delivered.
pub(super) fn plan_outputs<'a>(
    holders: &'a Holders<'a>,
    opts: &CombineOptions,
) -> Result<(Vec<OutPlan<'a>>, Missing)> {
    let mut plans: Vec<OutPlan> = Vec::new();
    let mut missing: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for c in &holders.components {
        let g = format!("{c}_generic");
        if let Some((name, hs)) = holders.by_artifact.get_key_value(&g) {
            plans.push(OutPlan {
                name: g.clone(),
                parts: vec![(name.as_str(), hs[0])],
            });
        }
        let targets: Vec<(&String, &Vec<&Shard>)> = (holders.by_artifact.iter())
            .filter(|(n, _)| parse_artifact_name(n).is_some_and(|(cc, t)| cc == *c && t.is_some()))
            .collect();
        match &opts.config {
            None => {
                for (name, hs) in targets {
                    plans.push(OutPlan {
                        name: name.clone(),
                        parts: vec![(name.as_str(), hs[0])],
                    });
                }
            }
            Some(cfg) => {
                for grp in &cfg.groups {
                    let parts = group_parts(c, grp, &targets, &mut missing);
                    if !parts.is_empty() {
                        plans.push(OutPlan {
                            name: format!("{c}_{}", grp.name),
                            parts,
                        });
                    }
                }
            }
        }
    }
    let mut seen = BTreeSet::new();
    for p in &plans {
        if !seen.insert(p.name.clone()) {
            return Err(Error::Conflict(format!(
                "two outputs would be named {} (a group named like a target?)",
                p.name
            )));
        }
    }
    Ok((plans, missing))
}

/// The target artifacts of component `c` that group `grp` takes; its architectures
/// no shard delivered go to `missing`.
fn group_parts<'a>(
    c: &str,
    grp: &TargetGroup,
    targets: &[(&'a String, &'a Vec<&'a Shard>)],
    missing: &mut BTreeMap<String, Vec<String>>,
) -> Vec<(&'a str, &'a Shard)> {
    let mut parts: Vec<(&str, &Shard)> = Vec::new();
    for a in &grp.architectures {
        // Names match with '-' or '_' (gfx1250-strict, gfx1250_strict); a processor's
        // artifact holds its feature variants (split writes them together, so that no
        // variant's archive shadows another's).
        let hit = targets.iter().find(|(n, _)| {
            parse_artifact_name(n).is_some_and(|(_, t)| {
                t.is_some_and(|t| {
                    t == *a
                        || t.replace('-', "_") == *a.replace('-', "_")
                        || (!t.contains(':')
                            && a.contains(':')
                            && crate::bundle::target::base_processor(a) == t)
                })
            })
        });
        match hit {
            Some((n, _)) if parts.iter().any(|(p, _)| p == n) => {}
            Some((n, hs)) => parts.push((n.as_str(), hs[0])),
            None => missing
                .entry(format!("{c}_{}", grp.name))
                .or_default()
                .push(a.clone()),
        }
    }
    parts
}
