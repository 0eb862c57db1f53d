//! Architecture families: which target IDs go into which `.kpack` archive.
//!
//! Presets follow the family names ROCm's build (TheRock) uses for its per-family
//! artifacts (`gfx90X`, `gfx94X`, `gfx950`, `gfx101X`, `gfx103X`, `gfx110X`, `gfx115X`,
//! `gfx120X`, `gfx125X`), each listing the processors of that generation; generic ISAs
//! go with the generation they serve. A feature-flagged target (`gfx90a:xnack+`)
//! belongs to its processor's family and keeps its full target ID in the archive.
//! Custom families are written `NAME=arch,arch`.

use crate::bundle::target::base_processor;
use crate::error::{Error, Result};
use serde::Serialize;

/// The preset table: family name and processors.
pub const PRESETS: &[(&str, &[&str])] = &[
    (
        "gfx90X",
        &[
            "gfx900",
            "gfx902",
            "gfx904",
            "gfx906",
            "gfx908",
            "gfx909",
            "gfx90a",
            "gfx90c",
            "gfx9-generic",
        ],
    ),
    ("gfx94X", &["gfx940", "gfx941", "gfx942", "gfx9-4-generic"]),
    ("gfx950", &["gfx950"]),
    (
        "gfx101X",
        &[
            "gfx1010",
            "gfx1011",
            "gfx1012",
            "gfx1013",
            "gfx10-1-generic",
        ],
    ),
    (
        "gfx103X",
        &[
            "gfx1030",
            "gfx1031",
            "gfx1032",
            "gfx1033",
            "gfx1034",
            "gfx1035",
            "gfx1036",
            "gfx10-3-generic",
        ],
    ),
    (
        "gfx110X",
        &["gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx11-generic"],
    ),
    ("gfx115X", &["gfx1150", "gfx1151", "gfx1152", "gfx1153"]),
    ("gfx120X", &["gfx1200", "gfx1201", "gfx12-generic"]),
    ("gfx125X", &["gfx1250", "gfx1250-strict", "gfx1251"]),
];

/// A selected family.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Family {
    /// Name, used in archive file names (`<group>_<name>.kpack`).
    pub name: String,
    /// Processors (without feature flags).
    pub processors: Vec<String>,
}

impl Family {
    /// Parse a preset name or `NAME=arch,arch`.
    pub fn parse(spec: &str) -> Result<Family> {
        if let Some((name, list)) = spec.split_once('=') {
            let processors: Vec<String> = list
                .split(',')
                .map(|a| base_processor(a.trim()).to_string())
                .filter(|a| !a.is_empty())
                .collect();
            if name.is_empty() || processors.is_empty() {
                return Err(Error::Usage(format!(
                    "custom family {spec:?}: write NAME=arch,arch"
                )));
            }
            check_name(name)?;
            let unknown: Vec<&str> = processors
                .iter()
                .map(String::as_str)
                .filter(|p| !known_processor(p))
                .collect();
            if !unknown.is_empty() {
                return Err(Error::Usage(format!(
                    "custom family {name:?}: unknown arch name(s) {}; known: {}",
                    unknown.join(", "),
                    known_processors().join(" ")
                )));
            }
            return Ok(Family {
                name: name.to_string(),
                processors,
            });
        }
        PRESETS
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(spec))
            .map(|(n, p)| Family {
                name: n.to_string(),
                processors: p.iter().map(|s| s.to_string()).collect(),
            })
            .ok_or_else(|| {
                let names: Vec<&str> = PRESETS.iter().map(|(n, _)| *n).collect();
                Error::Usage(format!(
                    "unknown family {spec:?}; presets: {}; or NAME=arch,arch",
                    names.join(", ")
                ))
            })
    }

    /// Whether a target ID (with or without features) belongs here.
    pub fn contains(&self, arch: &str) -> bool {
        let p = base_processor(arch);
        self.processors.iter().any(|x| x == p)
    }
}

/// Every processor the presets know (the names `NAME=arch,…` may use).
pub fn known_processors() -> Vec<&'static str> {
    PRESETS
        .iter()
        .flat_map(|(_, p)| p.iter().copied())
        .collect()
}

/// Whether `p` (without feature flags) is a processor the presets know.
pub fn known_processor(p: &str) -> bool {
    PRESETS.iter().any(|(_, ps)| ps.contains(&p))
}

fn check_name(name: &str) -> Result<()> {
    if name.contains(['/', '\\', '\0', ':']) || name == "." || name == ".." {
        return Err(Error::Usage(format!(
            "family name {name:?} cannot be used in a file name"
        )));
    }
    Ok(())
}

/// Selected families, checked not to overlap.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Families(pub Vec<Family>);

impl Families {
    /// Parse every `--family` value.
    pub fn parse(specs: &[String]) -> Result<Families> {
        if specs.is_empty() {
            return Err(Error::Usage("choose at least one --family".into()));
        }
        // `--family gfx90X,gfx94X` lists presets; `NAME=a,b` is one custom family.
        let fams: Vec<Family> = specs
            .iter()
            .flat_map(|s| {
                if s.contains('=') {
                    vec![s.as_str()]
                } else {
                    s.split(',')
                        .map(str::trim)
                        .filter(|x| !x.is_empty())
                        .collect()
                }
            })
            .map(Family::parse)
            .collect::<Result<_>>()?;
        for (i, a) in fams.iter().enumerate() {
            for b in &fams[i + 1..] {
                if a.name == b.name {
                    return Err(Error::Usage(format!("family {} is given twice", a.name)));
                }
                if let Some(p) = a.processors.iter().find(|p| b.processors.contains(p)) {
                    return Err(Error::Usage(format!(
                        "{p} is in both {} and {}",
                        a.name, b.name
                    )));
                }
            }
        }
        Ok(Families(fams))
    }

    /// The family a target ID goes to.
    pub fn assign(&self, arch: &str) -> Option<usize> {
        self.0.iter().position(|f| f.contains(arch))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_custom_and_features() {
        let f = Families::parse(&["gfx90X".into(), "mine=gfx1100,gfx1101:xnack-".into()]).unwrap();
        assert_eq!(f.assign("gfx90a:xnack+"), Some(0));
        assert_eq!(f.assign("gfx942:sramecc+:xnack-"), None);
        assert_eq!(f.assign("gfx1101"), Some(1));
        assert_eq!(f.0[1].processors, vec!["gfx1100", "gfx1101"]);
        assert!(
            Families::parse(&["gfx90X".into(), "x=gfx906".into()])
                .unwrap_err()
                .to_string()
                .contains("both")
        );
        assert!(
            Families::parse(&["gfx77X".into()])
                .unwrap_err()
                .to_string()
                .contains("presets")
        );
        assert!(Families::parse(&[]).is_err());
        assert!(Family::parse("a/b=gfx900").is_err());
        assert_eq!(Family::parse("GFX94x").unwrap().name, "gfx94X");
        let e = Family::parse("mine=gfx9999,banana,gfx90a")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("gfx9999, banana") && e.contains("known: gfx900"),
            "{e}"
        );
        let f = Families::parse(&["gfx90X,gfx94X".into(), "mine=gfx1100,gfx1101".into()]).unwrap();
        assert_eq!(f.0.len(), 3);
        assert_eq!(f.0[2].processors, ["gfx1100", "gfx1101"]);
    }

    #[test]
    fn presets_do_not_overlap() {
        let all: Vec<String> = PRESETS.iter().map(|(n, _)| n.to_string()).collect();
        assert!(Families::parse(&all).is_ok());
    }
}
