//! The explorer's tree: folders and files from a scan report, with totals per folder.

use kpack::scan::{FileKind, TreeReport};
use std::collections::{BTreeMap, HashSet};

/// How children are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sort {
    /// Largest first.
    Size,
    /// By name, numbers as numbers (`libk_4` before `libk_14`).
    Name,
    /// Largest device share first.
    DeviceShare,
}

/// An order and whether it is reversed (key `S`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Order {
    /// The order.
    pub sort: Sort,
    /// Reversed (folders still first).
    pub reverse: bool,
}

impl Sort {
    /// The next order (key `s`).
    pub fn next(self) -> Sort {
        match self {
            Sort::Size => Sort::Name,
            Sort::Name => Sort::DeviceShare,
            Sort::DeviceShare => Sort::Size,
        }
    }
    /// The order as the list's status shows it, with its direction.
    pub fn describe(self, reverse: bool) -> String {
        let dir = match (self, reverse) {
            (Sort::Name, false) => "A→Z",
            (Sort::Name, true) => "Z→A",
            (_, false) => "largest first",
            (_, true) => "smallest first",
        };
        format!("{}, {dir}", self.label())
    }
    /// Shown in the status bar.
    pub fn label(self) -> &'static str {
        match self {
            Sort::Size => "size",
            Sort::Name => "name",
            Sort::DeviceShare => "device share",
        }
    }
}

/// One folder or file.
#[derive(Debug, Clone)]
pub struct Node {
    /// Last path component.
    pub name: String,
    /// Index into the report's files, for files.
    pub file: Option<usize>,
    /// Children (folders only).
    pub children: Vec<usize>,
    /// Parent node.
    pub parent: Option<usize>,
    /// Bytes below (hard links and symlinks counted zero).
    pub size: u64,
    /// Fat-binary section bytes below (what a pack takes out).
    pub device: u64,
    /// Raw device code below (code-object bytes, archives included).
    pub raw: u64,
    /// Device code inside kernel-database files below (Tensile `.co`/`.hsaco`,
    /// bundled database libraries), counted apart from `device`.
    pub db_device: u64,
}

/// A visible row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    /// Node index.
    pub node: usize,
    /// Indentation.
    pub depth: usize,
}

/// Whether a file matches the explorer's filter (lower-case): its path contains
/// it, it is a class name (`fat_binary`, `kernel_database`, …), or one of its
/// targets contains it (`gfx942`, `xnack+`).
pub fn matches_filter(f: &kpack::scan::FileReport, filter: &str) -> bool {
    // A family preset's name (`gfx90x`) stands for its targets (trial 38).
    let family = kpack::family::PRESETS
        .iter()
        .find(|(n, _)| n.to_lowercase() == filter)
        .and_then(|(n, _)| kpack::family::Family::parse(n).ok());
    let arch_matches =
        |a: &str| a.contains(filter) || family.as_ref().is_some_and(|fam| fam.contains(a));
    f.path.to_lowercase().contains(filter)
        || f.kind.name() == filter
        || f.all_bundles()
            .flat_map(|b| &b.targets)
            .any(|t| arch_matches(&t.arch))
        || f.arch.as_deref().is_some_and(arch_matches)
}

/// Device code in a kernel-database file: its bundles' code objects, or the whole
/// file for a database code object (`.co`, `.hsaco` with a target in its name).
pub fn db_device(f: &kpack::scan::FileReport) -> u64 {
    if f.kind != FileKind::KernelDatabase {
        return 0;
    }
    let bundled: u64 = f
        .all_bundles()
        .flat_map(|b| &b.targets)
        .map(|t| t.size)
        .sum();
    if bundled > 0 {
        return bundled;
    }
    let code_object = f.path.ends_with(".co") || f.path.ends_with(".hsaco");
    if code_object && f.arch.is_some() {
        f.size
    } else {
        0
    }
}

/// The tree.
#[derive(Debug, Clone)]
pub struct Tree {
    /// Nodes; 0 is the root.
    pub nodes: Vec<Node>,
}

impl Tree {
    /// Build from a report.
    pub fn build(report: &TreeReport) -> Tree {
        let mut nodes = vec![Node {
            name: String::new(),
            file: None,
            children: Vec::new(),
            parent: None,
            size: 0,
            device: 0,
            raw: 0,
            db_device: 0,
        }];
        let mut dirs: BTreeMap<String, usize> = BTreeMap::new();
        for (i, f) in report.files.iter().enumerate() {
            let mut parent = 0;
            let parts: Vec<&str> = f.path.split('/').collect();
            let mut prefix = String::new();
            for d in &parts[..parts.len() - 1] {
                if !prefix.is_empty() {
                    prefix.push('/');
                }
                prefix.push_str(d);
                parent = match dirs.get(&prefix) {
                    Some(&n) => n,
                    None => {
                        nodes.push(Node {
                            name: d.to_string(),
                            file: None,
                            children: Vec::new(),
                            parent: Some(parent),
                            size: 0,
                            device: 0,
                            raw: 0,
                            db_device: 0,
                        });
                        let n = nodes.len() - 1;
                        nodes[parent].children.push(n);
                        dirs.insert(prefix.clone(), n);
                        n
                    }
                };
            }
            let counted = f.hard_link_of.is_none() && f.kind != FileKind::Symlink;
            let (size, device) = if counted {
                (f.size, f.fatbin_bytes)
            } else {
                (0, 0)
            };
            let db_device = if counted { db_device(f) } else { 0 };
            let raw = if counted { f.device_raw() } else { 0 };
            nodes.push(Node {
                name: parts[parts.len() - 1].to_string(),
                file: Some(i),
                children: Vec::new(),
                parent: Some(parent),
                size,
                device,
                raw,
                db_device,
            });
            let n = nodes.len() - 1;
            nodes[parent].children.push(n);
            let mut p = Some(parent);
            while let Some(x) = p {
                nodes[x].size += size;
                nodes[x].device += device;
                nodes[x].raw += raw;
                nodes[x].db_device += db_device;
                p = nodes[x].parent;
            }
        }
        Tree { nodes }
    }

    fn share(&self, n: usize) -> f64 {
        let node = &self.nodes[n];
        if node.size == 0 {
            0.0
        } else {
            node.device as f64 / node.size as f64
        }
    }

    fn sorted_children(&self, n: usize, order: Order) -> Vec<usize> {
        use kpack::natural::natural_cmp;
        let mut c = self.nodes[n].children.clone();
        c.sort_by(|&a, &b| {
            let (na, nb) = (&self.nodes[a], &self.nodes[b]);
            let dirs_first = nb.file.is_none().cmp(&na.file.is_none());
            let by = match order.sort {
                Sort::Size => nb.size.cmp(&na.size).then(natural_cmp(&na.name, &nb.name)),
                Sort::Name => natural_cmp(&na.name, &nb.name),
                Sort::DeviceShare => self
                    .share(b)
                    .total_cmp(&self.share(a))
                    .then(natural_cmp(&na.name, &nb.name)),
            };
            dirs_first.then(if order.reverse { by.reverse() } else { by })
        });
        c
    }

    /// The node at a relative path.
    pub fn find(&self, path: &str) -> Option<usize> {
        let mut n = 0;
        for part in path.split('/').filter(|p| !p.is_empty()) {
            n = *self.nodes[n]
                .children
                .iter()
                .find(|&&c| self.nodes[c].name == part)?;
        }
        Some(n)
    }

    /// Relative path of a node.
    pub fn path(&self, mut n: usize) -> String {
        let mut parts = Vec::new();
        while let Some(p) = self.nodes[n].parent {
            parts.push(self.nodes[n].name.as_str());
            n = p;
        }
        parts.reverse();
        parts.join("/")
    }

    /// Rows shown: expanded folders open; with a filter, only files whose path
    /// contains it (and their folders, opened).
    pub fn rows(
        &self,
        expanded: &HashSet<usize>,
        sort: Order,
        filter: &str,
        report: &TreeReport,
    ) -> Vec<Row> {
        let filter = filter.to_lowercase();
        let keep: Option<HashSet<usize>> = (!filter.is_empty()).then(|| {
            let mut k = HashSet::new();
            for (i, n) in self.nodes.iter().enumerate() {
                if let Some(f) = n.file
                    && matches_filter(&report.files[f], &filter)
                {
                    let mut x = Some(i);
                    while let Some(y) = x {
                        k.insert(y);
                        x = self.nodes[y].parent;
                    }
                }
            }
            k
        });
        let mut out = Vec::new();
        let mut stack: Vec<(usize, usize)> = self
            .sorted_children(0, sort)
            .into_iter()
            .rev()
            .map(|c| (c, 0))
            .collect();
        while let Some((n, depth)) = stack.pop() {
            if keep.as_ref().is_some_and(|k| !k.contains(&n)) {
                continue;
            }
            out.push(Row { node: n, depth });
            let open = keep.is_some() || expanded.contains(&n);
            if self.nodes[n].file.is_none() && open {
                for c in self.sorted_children(n, sort).into_iter().rev() {
                    stack.push((c, depth + 1));
                }
            }
        }
        out
    }
}
