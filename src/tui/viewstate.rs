//! The state of the Architectures and Kernels views, and what each derives from it
//! (the selection, the rows shown): the views read these without the whole `App`.

use super::marks::{ExtractPrompt, KernelMark, mark_of};
use super::selection::{Pick, Selection};
use kpack::family::{Family, PRESETS};
use kpack::kernels::KernelRow;
use kpack::scan::TreeReport;

/// Device code up to which the Architectures view computes the exact pack plan by
/// itself (the core compresses it all, as `pack --dry-run`, in well under a second).
pub const AUTO_PLAN_BYTES: u64 = 8 << 20;

/// The Architectures view: which family presets and single targets are on.
#[derive(Default)]
pub struct FamiliesState {
    /// Family presets selected (one per `PRESETS` entry).
    pub presets: Vec<bool>,
    /// Cursor in the list (presets, then single targets).
    pub cursor: usize,
    /// Why the last key did nothing.
    pub note: Option<String>,
    /// Single targets present in the tree: every processor (all its variants) and
    /// every feature-flagged target ID, each packed on its own when on (and not
    /// already in a selected preset).
    pub singles: Vec<(String, bool)>,
    /// The core's pack plan, for the selection it was computed for.
    pub plan: Option<(Selection, Result<kpack::pack::PackPlan, String>)>,
    /// A plan is being computed.
    pub planning: bool,
}

impl FamiliesState {
    /// Selected units: presets, then single targets not already in one of them.
    pub fn picks(&self) -> Vec<Pick> {
        let presets: Vec<Family> = PRESETS
            .iter()
            .zip(&self.presets)
            .filter(|(_, on)| **on)
            .filter_map(|((n, _), _)| Family::parse(n).ok())
            .collect();
        let singles: Vec<Pick> = self
            .singles
            .iter()
            .filter(|(t, on)| *on && !presets.iter().any(|f| f.contains(t)))
            .map(|(t, _)| Pick::Target(t.clone()))
            .collect();
        presets
            .into_iter()
            .map(Pick::Family)
            .chain(singles)
            .collect()
    }

    /// The selection as `--family` and `--target` values.
    pub fn selection(&self) -> Selection {
        let mut s = Selection::default();
        for p in self.picks() {
            match p {
                Pick::Family(f) => s.families.push(f.name),
                Pick::Target(t) => s.targets.push(t),
            }
        }
        s
    }

    /// The preset holding a processor, among the selected ones.
    pub fn covered_by(&self, processor: &str) -> Option<&'static str> {
        PRESETS
            .iter()
            .zip(&self.presets)
            .filter(|(_, on)| **on)
            .find(|((n, _), _)| Family::parse(n).is_ok_and(|f| f.contains(processor)))
            .map(|((n, _), _)| *n)
    }

    /// For a wheel: the selection as exact target IDs (what the picks take), or
    /// every target of `report` when nothing is picked.
    pub fn wheel_selection(&self, report: Option<&TreeReport>) -> Selection {
        let picks = self.picks();
        let targets = report.map_or_else(Vec::new, |r| {
            r.archs
                .keys()
                .filter(|a| picks.is_empty() || picks.iter().any(|p| p.takes(a)))
                .cloned()
                .collect()
        });
        Selection {
            families: Vec::new(),
            targets,
        }
    }
}

/// Whether the Architectures view shows the exact plan of `report` instead of a
/// guess.
pub fn plans_automatically(report: Option<&TreeReport>) -> bool {
    report.is_some_and(|r| r.wheel.is_none() && r.totals.device_raw <= AUTO_PLAN_BYTES)
}

/// The top-level directory of a wheel holding the most device bytes (the overlay
/// root a split most likely wants: `torch` in a torch wheel).
pub fn overlay_guess(report: Option<&TreeReport>) -> String {
    let mut by_top: std::collections::BTreeMap<&str, u64> = Default::default();
    for f in report.iter().flat_map(|r| &r.files) {
        if let Some((top, _)) = f.path.split_once('/')
            && !top.ends_with(".dist-info")
            && !top.ends_with(".data")
        {
            *by_top.entry(top).or_default() += f.fatbin_bytes;
        }
    }
    by_top
        .iter()
        .max_by_key(|(t, b)| (**b, std::cmp::Reverse(**t)))
        .map_or_else(String::new, |(t, _)| t.to_string())
}

/// The Kernels view: what it lists, how, and what is marked.
pub struct KernelsState {
    /// The subtree shown, its kernels (sorted) once read.
    pub report: Option<(String, Result<kpack::kernels::KernelsReport, String>)>,
    /// Kernels are being read.
    pub loading: bool,
    /// Row selected.
    pub cursor: usize,
    /// Sort.
    pub sort: kpack::kernels::SortBy,
    /// The order reversed (key `S`).
    pub reverse: bool,
    /// Only names containing this (mangled or demangled).
    pub filter: String,
    /// Kernels marked (Space): their code object and name.
    pub marks: std::collections::BTreeSet<KernelMark>,
    /// The extract prompt: the code objects, the destination being typed, the cursor.
    pub extract: Option<ExtractPrompt>,
    /// Only this archive entry (key, target), from the inspector.
    pub entry: Option<(String, String)>,
}

impl Default for KernelsState {
    fn default() -> Self {
        KernelsState {
            report: None,
            loading: false,
            cursor: 0,
            sort: kpack::kernels::SortBy::Size,
            reverse: false,
            filter: String::new(),
            marks: Default::default(),
            extract: None,
            entry: None,
        }
    }
}

impl KernelsState {
    /// The rows the view shows: its report's, narrowed by the filter and the
    /// archive entry.
    pub fn rows(&self) -> Vec<&KernelRow> {
        let Some((_, Ok(r))) = &self.report else {
            return Vec::new();
        };
        let f = self.filter.as_str();
        r.kernels
            .iter()
            .map(|k| &**k)
            .filter(|k| {
                self.entry
                    .as_ref()
                    .is_none_or(|(key, arch)| k.key.as_deref() == Some(key) && k.target == *arch)
            })
            .filter(|k| {
                f.is_empty()
                    || k.kernel.name.contains(f)
                    || k.kernel.demangled.as_deref().is_some_and(|d| d.contains(f))
            })
            .collect()
    }

    /// Whether the row is marked.
    pub fn is_marked(&self, r: &KernelRow) -> bool {
        !self.marks.is_empty() && self.marks.contains(&mark_of(r))
    }
}
