//! Every device, every loader: how one binary's bundles resolve on each device ISA
//! that can run their code, by each deployed generation of loader
//! ([`Loader`]), and what a miss looks like in a report.

use crate::kpack::Archive;
use crate::kpack::archive::KernelEntry;
use crate::kpack::marker::Marker;
use crate::kpack::resolve::{
    Loader, Lookup, TreeArchives, accepting_devices, device_arch_list, lookup_in, usable_archives,
};
use std::collections::{BTreeMap, BTreeSet};

type Usable<'a> = Result<Vec<(&'a str, &'a Archive)>, Vec<String>>;

/// Lookups for one host-only binary, with the archives each device reaches computed
/// once per device.
pub struct Reach<'a> {
    archives: &'a TreeArchives,
    marker: &'a Marker,
    dir: &'a str,
    cache: BTreeMap<String, (Vec<String>, Usable<'a>)>,
}

/// What one lookup found, when it found something.
#[derive(Debug, Clone, Copy)]
pub struct Hit<'a> {
    /// The archive (path relative to the tree).
    pub archive: &'a str,
    /// The TOC entry.
    pub entry: &'a KernelEntry,
}

impl Hit<'_> {
    /// The target the frame's code was built for (an alias names its primary's).
    pub fn code_target(&self) -> &str {
        self.entry.alias_of.as_deref().unwrap_or(&self.entry.arch)
    }
}

impl<'a> Reach<'a> {
    /// Lookups for the binary at `path` (relative to the tree) with marker `marker`.
    pub fn new(archives: &'a TreeArchives, marker: &'a Marker, path: &'a str) -> Reach<'a> {
        Reach {
            archives,
            marker,
            dir: path.rsplit_once('/').map_or("", |(d, _)| d),
            cache: BTreeMap::new(),
        }
    }

    /// Resolve bundle `co` on `device` as `loader` does.
    pub fn lookup(&mut self, co: u32, device: &str, loader: Loader) -> Lookup<'a> {
        let (archives, marker, dir) = (self.archives, self.marker, self.dir);
        let (list, usable) = self.cache.entry(device.to_string()).or_insert_with(|| {
            let list = device_arch_list(device);
            let usable = usable_archives(archives, marker, dir, &list);
            (list, usable)
        });
        match usable {
            Err(probed) => Lookup::NoArchive {
                probed: probed.clone(),
            },
            Ok(u) => lookup_in(u, &format!("{}#{co}", marker.kernel_name), list, loader),
        }
    }
}

/// The device ISAs that can run code for any of `targets`, in a stable order.
pub fn devices_for<'t>(targets: impl IntoIterator<Item = &'t str>) -> Vec<String> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for t in targets {
        for d in accepting_devices(t) {
            if seen.insert(d.clone()) {
                out.push(d);
            }
        }
    }
    out
}

/// Why a lookup found nothing, in the runtime's terms.
pub fn lookup_fault(l: &Lookup<'_>) -> String {
    match l {
        Lookup::Found { .. } => String::new(),
        Lookup::NoArchive { probed } => format!(
            "no archive found (the runtime probes {})",
            if probed.is_empty() {
                "nothing inside the tree".to_string()
            } else {
                probed.join(", ")
            }
        ),
        Lookup::NoArch => "no reachable archive has code for a target the device accepts".into(),
        Lookup::NoKernel {
            archive,
            target,
            key,
        } => format!("{archive} lists {target} but holds no {key}"),
    }
}

/// One device on which one loader misses a bundle.
#[derive(Debug, Clone)]
pub struct Miss {
    /// The device ISA.
    pub device: String,
    /// The loader generation.
    pub loader: Loader,
    /// Why, in the runtime's terms (naming the archive that shadowed the kernel).
    pub why: String,
}

/// Resolve bundle `co` on every device in `devices` by every loader of `loaders`.
/// Returns the hits (device, loader, hit: always code the device can run) and the
/// misses; a first-match miss where a later generation finds the kernel names both
/// archives.
pub fn resolve_everywhere<'a>(
    reach: &mut Reach<'a>,
    co: u32,
    devices: &[String],
    loaders: &[Loader],
) -> (Vec<(String, Loader, Hit<'a>)>, Vec<Miss>) {
    let mut hits = Vec::new();
    let mut misses = Vec::new();
    for d in devices {
        let found: Vec<(Loader, Lookup<'a>)> = loaders
            .iter()
            .map(|&l| (l, reach.lookup(co, d, l)))
            .collect();
        let elsewhere = found.iter().find_map(|(_, l)| match l {
            Lookup::Found { archive, .. } => Some(*archive),
            _ => None,
        });
        for (loader, l) in found {
            match l {
                Lookup::Found { archive, entry, .. } => {
                    let hit = Hit { archive, entry };
                    // Found, but not code this device can run (an alias or a
                    // gfx_arches entry promising more than the frame is).
                    if crate::kpack::alias::runs_on(hit.code_target(), d) {
                        hits.push((d.clone(), loader, hit));
                    } else {
                        misses.push(Miss {
                            device: d.clone(),
                            loader,
                            why: format!(
                                "{archive} gives code for {}, which the device cannot run",
                                hit.code_target()
                            ),
                        });
                    }
                }
                other => {
                    // Without the key, so that bundles missed alike are reported
                    // together.
                    let why = match (&other, elsewhere) {
                        (
                            Lookup::NoKernel {
                                archive, target, ..
                            },
                            Some(e),
                        ) => format!(
                            "{archive} lists {target} but lacks them, and shadows {e}, which \
                             has them"
                        ),
                        (
                            Lookup::NoKernel {
                                archive, target, ..
                            },
                            None,
                        ) => {
                            format!("{archive} lists {target} but lacks them")
                        }
                        // Said by the marker's paths, not each device's expansion of
                        // them, so that the devices it concerns share one line.
                        (Lookup::NoArchive { .. }, _) => format!(
                            "no archive where its marker leads ({}, expanded for the \
                             targets the device accepts)",
                            reach.marker.kpack_search_paths.join(", ")
                        ),
                        _ => lookup_fault(&other),
                    };
                    misses.push(Miss {
                        device: d.clone(),
                        loader,
                        why,
                    });
                }
            }
        }
    }
    (hits, misses)
}

/// Report lines for the misses of the bundles of `path`: one per distinct reason
/// and set of devices, naming the bundles, the loaders (with the releases they
/// cover) and the devices.
pub fn describe(path: &str, misses: &[(u32, Miss)], loaders: &[Loader]) -> Vec<String> {
    // Per bundle and reason: the loaders and devices.
    let mut per: BTreeMap<(u32, &str), Who<'_>> = BTreeMap::new();
    for (co, m) in misses {
        let e = per.entry((*co, &m.why)).or_default();
        e.0.insert(m.loader);
        if !e.1.contains(&m.device.as_str()) {
            e.1.push(&m.device);
        }
    }
    // Bundles missed alike.
    let mut alike: BTreeMap<(&str, Who<'_>), Vec<u32>> = BTreeMap::new();
    for ((co, why), who) in per {
        alike.entry((why, who)).or_default().push(co);
    }
    alike
        .into_iter()
        .map(|((why, (ls, devices)), cos)| {
            let who = if ls.len() == loaders.len() && loaders.len() > 1 {
                "every loader generation".to_string()
            } else {
                ls.iter()
                    .map(|l| format!("{} loaders ({})", l.name(), l.releases()))
                    .collect::<Vec<_>>()
                    .join(" and ")
            };
            let bundles = if cos.len() == 1 {
                format!("bundle #{}", cos[0])
            } else {
                format!("{} bundles ({})", cos.len(), ranges(&cos))
            };
            format!(
                "{path}: {bundles} on {}: {who}: {why}",
                device_list(&devices)
            )
        })
        .collect()
}

/// Devices, every ISA of a processor said as "every gfx906 device ISA (9)".
fn device_list(devices: &[&str]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut done: BTreeSet<&str> = BTreeSet::new();
    for d in devices {
        let p = crate::bundle::target::base_processor(d);
        if done.contains(p) {
            continue;
        }
        let all = crate::kpack::resolve::device_isas(p);
        if all.len() > 1 && all.iter().all(|x| devices.contains(&x.as_str())) {
            done.insert(p);
            out.push(format!("every {p} device ISA ({})", all.len()));
        } else {
            out.push(d.to_string());
        }
    }
    out.join(", ")
}

/// The loaders and the devices a miss concerns.
type Who<'a> = (BTreeSet<Loader>, Vec<&'a str>);

/// `#0-#49, #52` for sorted bundle indices.
fn ranges(cos: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cos.len() {
        let mut j = i;
        while j + 1 < cos.len() && cos[j + 1] == cos[j] + 1 {
            j += 1;
        }
        out.push(if j > i {
            format!("#{}-#{}", cos[i], cos[j])
        } else {
            format!("#{}", cos[i])
        });
        i = j + 1;
    }
    out.join(", ")
}

#[cfg(test)]
mod tests {
    #[test]
    fn bundle_ranges() {
        assert_eq!(super::ranges(&[0, 1, 2, 5, 7, 8]), "#0-#2, #5, #7-#8");
    }
}
