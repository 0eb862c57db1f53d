//! The UI's state and how input changes it. No I/O here: work runs on background
//! threads and comes back as [`AppEvent`]s.

use super::tree::{Row, Sort, Tree};
use kpack::elf::rewrite::RewritePlan;
use kpack::family::{Family, PRESETS};
use kpack::kpack::archive::ArchiveIndex;
use kpack::scan::TreeReport;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseEvent, MouseEventKind};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// Results and input arriving at the UI thread.
#[derive(Debug)]
pub enum AppEvent {
    /// A key press.
    Key(KeyEvent),
    /// Mouse input.
    Mouse(MouseEvent),
    /// The terminal was resized.
    Resize,
    /// Scan progress: files done of total.
    ScanProgress(u64, u64),
    /// The scan finished.
    ScanDone(Box<Result<TreeReport, String>>),
    /// The entries inspected so far, while the scan runs (built off the UI thread).
    Partial(Box<(TreeReport, Tree)>),
    /// A rewrite preview finished.
    Preview(String, Box<Result<RewritePlan, String>>),
    /// An archive was opened from the explorer (relative path, its index).
    ArchiveOpened(String, Box<Result<ArchiveIndex, String>>),
    /// An archive extract or verify finished: the message to show.
    ArchiveDone(String),
    /// An ELF binary's sections and segments were read.
    Layout(String, Box<Result<kpack::elf::rewrite::ElfLayout, String>>),
    /// The kernels under a relative path were read.
    Kernels(String, Box<Result<kpack::kernels::KernelsReport, String>>),
    /// The core's pack plan for the selected families finished.
    Plan(Box<Result<kpack::pack::PackPlan, String>>),
    /// Progress of a running pack.
    Pack(kpack::pack::PackEvent),
    /// The pack finished (or failed, or was cancelled).
    PackDone(Box<Result<kpack::pack::PackReport, String>>),
    /// The wheel split finished (or failed).
    WheelDone(Box<Result<kpack::wheel::split::WheelSplitReport, String>>),
    /// Time passed.
    Tick,
}

/// Screens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// The tree and the selected file's detail.
    Explorer,
    /// Per-arch bytes, families, projected output.
    Families,
    /// The rewrite preview of the selected binary.
    Preview,
    /// A `.kpack` archive's TOC.
    Inspector,
    /// The kernels inside the code objects of the selected subtree.
    Kernels,
    /// Packing: confirm, live progress, result.
    Pack,
}

impl View {
    /// Tab title.
    pub fn title(self) -> &'static str {
        match self {
            View::Explorer => "Explorer",
            View::Families => "Architectures",
            View::Preview => "Rewrite preview",
            View::Inspector => "Archive",
            View::Kernels => "Kernels",
            View::Pack => "Pack",
        }
    }
}

/// What a background request the app wants started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Compute the rewrite preview of this relative path.
    Preview(String),
    /// Read the sections and segments of this relative path.
    Layout(String),
    /// List the kernels under this relative path (`""`: the whole tree).
    Kernels(String),
    /// Extract kernels of the open archive: one (key, arch), or all with `None`, into
    /// the directory given.
    Extract(ArchiveAt, Option<(String, String)>, PathBuf),
    /// Verify the open archive.
    VerifyArchive(ArchiveAt),
    /// Open the archive at this relative path of the tree in the inspector.
    OpenArchive(String),
    /// Compute the pack plan (with size estimates) for these family names.
    Plan(Selection),
    /// Pack the tree.
    Pack(PackSettings),
}

/// The inspector's extract prompt: one (key, arch) or all, the destination being
/// typed, the cursor in it.
pub type ExtractPrompt = (Option<(String, String)>, String, usize);

/// Where the last frame put things, for the mouse and for scroll limits (written by
/// the drawing code, which only reads the app otherwise).
#[derive(Debug, Default)]
pub struct Drawn {
    /// The view tabs: x from, x to (exclusive), view.
    pub tabs: std::cell::RefCell<Vec<(u16, u16, View)>>,
    /// The view's list: its first row on screen is item `list_first`.
    pub list: std::cell::Cell<ratatui::layout::Rect>,
    /// Index of the item on the list's first row.
    pub list_first: std::cell::Cell<usize>,
    /// The scrollable side pane (explorer detail, architectures plan, preview).
    pub side: std::cell::Cell<ratatui::layout::Rect>,
    /// How far it can scroll.
    pub side_max: std::cell::Cell<u16>,
}

/// Whether the dialog's output holds what a run would replace: a previous pack's
/// output (its ledger), or, for a wheel split, a non-empty directory.
fn previous_output(s: &PackSettings) -> bool {
    let out = Path::new(&s.output);
    if s.wheel {
        return std::fs::read_dir(out).is_ok_and(|mut d| d.next().is_some());
    }
    matches!(kpack::kpack::ledger::Ledger::read(out), Ok(Some(_)))
}

/// Where the inspector's archive lives: a file, or a member of the wheel opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArchiveAt {
    /// A `.kpack` file.
    File(PathBuf),
    /// A member of a wheel.
    WheelMember(PathBuf, String),
}

impl ArchiveAt {
    /// Open it.
    pub fn open(&self) -> kpack::Result<kpack::kpack::Archive> {
        match self {
            ArchiveAt::File(p) => kpack::kpack::Archive::open(p),
            ArchiveAt::WheelMember(w, m) => {
                let wheel = kpack::wheel::Wheel::open(w)?;
                let member = wheel.member(m).ok_or_else(|| {
                    kpack::Error::Invalid(format!("{}: no member {m}", w.display()))
                })?;
                let data = wheel.contents(member, &std::env::temp_dir())?;
                kpack::kpack::Archive::from_bytes(Path::new(m), data.to_vec())
            }
        }
    }

    /// Its file name (`torch_gfx90a.kpack`).
    pub fn file_name(&self) -> String {
        let p = match self {
            ArchiveAt::File(p) => p.to_string_lossy().into_owned(),
            ArchiveAt::WheelMember(_, m) => m.clone(),
        };
        p.rsplit('/').next().unwrap_or(&p).to_string()
    }
}

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

/// What the confirm dialog sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackSettings {
    /// Group name.
    pub group: String,
    /// Families and targets.
    pub selection: Selection,
    /// Split layout instead of combined.
    pub split: bool,
    /// One archive per family instead of one per target.
    pub per_family: bool,
    /// Output directory.
    pub output: String,
    /// zstd level.
    pub level: i32,
    /// A wheel is open: split it (group = device package prefix) instead of packing.
    pub wheel: bool,
    /// The wheel's overlay root (wheels only).
    pub overlay: String,
    /// Replace a previous output (asked for when it exists).
    pub force: bool,
}

impl PackSettings {
    /// The dialog's fields, in order: group (or device package prefix), overlay
    /// root (wheels only), output, then the zstd level (the last).
    pub fn fields(&self) -> usize {
        if self.wheel { 4 } else { 3 }
    }

    /// The text of field `i` (`None` for the level).
    pub fn field(&self, i: usize) -> Option<&String> {
        match (self.wheel, i) {
            (_, 0) => Some(&self.group),
            (true, 1) => Some(&self.overlay),
            (true, 2) | (false, 1) => Some(&self.output),
            _ => None,
        }
    }

    fn field_mut(&mut self, i: usize) -> Option<&mut String> {
        match (self.wheel, i) {
            (_, 0) => Some(&mut self.group),
            (true, 1) => Some(&mut self.overlay),
            (true, 2) | (false, 1) => Some(&mut self.output),
            _ => None,
        }
    }
}

/// Live state of a pack.
#[derive(Debug, Clone, Default)]
pub struct PackProgress {
    /// Totals folded from the core's events.
    pub tally: kpack::pack::PackTally,
    /// When it started.
    pub started: Option<std::time::Instant>,
}

/// The Pack view's state.
#[derive(Debug, Clone)]
pub enum PackState {
    /// The confirm dialog; `field` is the one being edited (see
    /// [`PackSettings::fields`]), `cursor` the character position in it.
    Confirm {
        /// Settings.
        settings: PackSettings,
        /// Field under edit.
        field: usize,
        /// Cursor in that field.
        cursor: usize,
    },
    /// The output holds a previous pack's output (or wheels of the same names):
    /// replace it? (y / n)
    Replace(PackSettings),
    /// Running.
    Running(PackProgress),
    /// Finished.
    Done(Box<Result<kpack::pack::PackReport, String>>),
    /// A wheel split finished.
    WheelDone(Box<Result<kpack::wheel::split::WheelSplitReport, String>>),
}

/// The whole UI state.
pub struct App {
    /// What was opened.
    pub root: PathBuf,
    /// Views available.
    pub views: Vec<View>,
    /// Current view.
    pub view: View,
    /// The scan, when done.
    pub report: Option<TreeReport>,
    /// Its tree.
    pub tree: Option<Tree>,
    /// Open folders.
    pub expanded: HashSet<usize>,
    /// Row selected in the explorer.
    pub selected: usize,
    /// First row shown.
    pub scroll: usize,
    /// Order of children.
    pub sort: Sort,
    /// The explorer's order reversed (key `S`).
    pub sort_reverse: bool,
    /// Explorer filter.
    pub filter: String,
    /// Typing the filter.
    pub filtering: bool,
    /// Scan progress (done, total).
    pub progress: (u64, u64),
    /// The tree shown is a scan in progress.
    pub partial: bool,
    /// The last extract/verify outcome in the inspector, or the one running.
    pub archive_status: Option<String>,
    /// A fatal error to show.
    pub error: Option<String>,
    /// Help overlay shown.
    pub help: bool,
    /// Family presets selected (Families view).
    pub families: Vec<bool>,
    /// Cursor in the family list.
    pub family_cursor: usize,
    /// A note for the families view (why a key did nothing).
    pub families_note: Option<String>,
    /// Single targets present in the tree: every processor (all its variants) and
    /// every feature-flagged target ID, each packed on its own when on (and not
    /// already in a selected preset).
    pub singles: Vec<(String, bool)>,
    /// The archive shown by the inspector.
    pub archive: Option<ArchiveIndex>,
    /// Where it is.
    pub archive_at: Option<ArchiveAt>,
    /// The extract prompt: what to extract (one kernel, or all), the destination
    /// being typed, the cursor.
    pub extract_prompt: Option<ExtractPrompt>,
    /// Row selected in the inspector.
    pub archive_cursor: usize,
    /// Preview result, for the path it was computed for.
    pub preview: Option<(String, Result<RewritePlan, String>)>,
    /// Preview scroll.
    /// Background requests to start.
    pub requests: Vec<Request>,
    /// Leave the loop.
    pub quit: bool,
    /// Last height of the explorer list, for paging.
    pub page: usize,
    /// The core's pack plan, for the selection it was computed for.
    pub plan: Option<(Selection, Result<kpack::pack::PackPlan, String>)>,
    /// A plan is being computed.
    pub planning: bool,
    /// The Pack view.
    pub pack: Option<PackState>,
    /// The dialog's settings when it was last closed (kept for the next opening).
    pub last_pack: Option<PackSettings>,
    /// A name for the opened path instead of the path (the demo's temporary copy).
    pub title: Option<String>,
    /// `q` was pressed while a pack runs: the next `q` (or `y`) cancels and quits.
    pub quit_asked: bool,
    /// Where the last frame put things.
    pub drawn: Drawn,
    /// Scroll of the side pane (detail, plan, preview), in lines.
    pub side_scroll: u16,
    /// The side pane has the focus (Tab): the arrows and pages scroll it.
    pub side_focus: bool,
    /// Set by Esc during a pack: the loop cancels the core's token.
    pub cancel_pack: bool,
    /// The Kernels view: the subtree shown, its kernels (sorted) once read.
    pub kernels: Option<(String, Result<kpack::kernels::KernelsReport, String>)>,
    /// Kernels are being read.
    pub kernels_loading: bool,
    /// Row selected in the Kernels view.
    pub kernel_cursor: usize,
    /// Sort of the Kernels view.
    pub kernel_sort: kpack::kernels::SortBy,
    /// The kernels' order reversed (key `S`).
    pub kernel_reverse: bool,
    /// Kernels view: only names containing this (mangled or demangled).
    pub kernel_filter: String,
    /// Kernels view: only this archive entry (key, target), from the inspector.
    pub kernel_entry: Option<(String, String)>,
    /// Sections and segments of ELF files, read in the background on selection.
    pub layouts: std::collections::HashMap<String, Result<kpack::elf::rewrite::ElfLayout, String>>,
}

impl App {
    /// A new app for a tree (scan pending) or an archive.
    pub fn new(root: PathBuf, archive: Option<ArchiveIndex>) -> App {
        let archive_at = archive.is_some().then(|| ArchiveAt::File(root.clone()));
        let views = if archive.is_some() {
            vec![View::Inspector]
        } else {
            vec![View::Explorer, View::Families, View::Preview, View::Kernels]
        };
        App {
            root,
            view: views[0],
            views,
            report: None,
            tree: None,
            expanded: HashSet::new(),
            selected: 0,
            scroll: 0,
            sort: Sort::Size,
            sort_reverse: false,
            filter: String::new(),
            filtering: false,
            progress: (0, 0),
            error: None,
            help: false,
            families: vec![false; PRESETS.len()],
            family_cursor: 0,
            singles: Vec::new(),
            archive_at,
            extract_prompt: None,
            archive,
            archive_cursor: 0,
            preview: None,
            requests: Vec::new(),
            quit: false,
            page: 10,
            plan: None,
            planning: false,
            pack: None,
            last_pack: None,
            title: None,
            quit_asked: false,
            drawn: Drawn::default(),
            side_scroll: 0,
            side_focus: false,
            cancel_pack: false,
            layouts: std::collections::HashMap::new(),
            kernels: None,
            kernels_loading: false,
            kernel_cursor: 0,
            kernel_sort: kpack::kernels::SortBy::Size,
            kernel_reverse: false,
            kernel_filter: String::new(),
            families_note: None,
            kernel_entry: None,
            partial: false,
            archive_status: None,
        }
    }

    /// Show a (new or more complete) report, keeping open folders and the selection.
    fn show(&mut self, report: TreeReport, tree: Tree) {
        match self.tree.take() {
            None => {
                // First sight: open the first level, preselect the families with code.
                self.expanded = tree.nodes[0]
                    .children
                    .iter()
                    .copied()
                    .filter(|&c| tree.nodes[c].file.is_none())
                    .collect();
                for (i, (name, _)) in PRESETS.iter().enumerate() {
                    if let Ok(f) = Family::parse(name) {
                        self.families[i] = report.archs.keys().any(|a| f.contains(a));
                    }
                }
            }
            Some(old) => {
                let selected = self.report.as_ref().and_then(|r| {
                    old.rows(&self.expanded, self.order(), &self.filter, r)
                        .get(self.selected)
                        .map(|row| old.path(row.node))
                });
                self.expanded = self
                    .expanded
                    .iter()
                    .filter_map(|&n| tree.find(&old.path(n)))
                    .collect();
                if report.archs.len() > self.report.as_ref().map_or(0, |r| r.archs.len()) {
                    for (i, (name, _)) in PRESETS.iter().enumerate() {
                        if let Ok(f) = Family::parse(name) {
                            self.families[i] |= report.archs.keys().any(|a| f.contains(a));
                        }
                    }
                }
                self.tree = Some(tree);
                self.report = Some(report);
                self.refresh_singles();
                if let Some(path) = selected {
                    let rows = self.rows();
                    if let Some(i) = rows
                        .iter()
                        .position(|r| self.tree.as_ref().is_some_and(|t| t.path(r.node) == path))
                    {
                        self.selected = i;
                    }
                }
                return;
            }
        }
        self.tree = Some(tree);
        self.report = Some(report);
        self.refresh_singles();
    }

    /// The file under the explorer's cursor.
    pub fn selected_file(&self) -> Option<&kpack::scan::FileReport> {
        let (tree, report) = (self.tree.as_ref()?, self.report.as_ref()?);
        let rows = self.rows();
        let f = tree.nodes[rows.get(self.selected)?.node].file?;
        report.files.get(f)
    }

    /// Ask for the selected ELF file's layout once.
    fn want_layout(&mut self) {
        let Some(f) = self.selected_file() else {
            return;
        };
        if f.elf_kind.is_none() || f.hard_link_of.is_some() {
            return;
        }
        let path = f.path.clone();
        if !self.layouts.contains_key(&path) {
            // Pending until the answer arrives; never asked twice.
            self.layouts
                .insert(path.clone(), Err("reading…".to_string()));
            self.requests.push(Request::Layout(path));
        }
    }

    /// Rows of the explorer.
    pub fn rows(&self) -> Vec<Row> {
        match (&self.tree, &self.report) {
            (Some(t), Some(r)) => t.rows(&self.expanded, self.order(), &self.filter, r),
            _ => Vec::new(),
        }
    }

    /// Selected units: presets, then single targets not already in one of them.
    pub fn picks(&self) -> Vec<Pick> {
        let presets: Vec<Family> = PRESETS
            .iter()
            .zip(&self.families)
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
            .zip(&self.families)
            .filter(|(_, on)| **on)
            .find(|((n, _), _)| Family::parse(n).is_ok_and(|f| f.contains(processor)))
            .map(|((n, _), _)| *n)
    }

    /// The rows the Kernels view shows: its report's, narrowed by the filter and the
    /// archive entry.
    pub fn kernel_rows(&self) -> Vec<&kpack::kernels::KernelRow> {
        let Some((_, Ok(r))) = &self.kernels else {
            return Vec::new();
        };
        let f = self.kernel_filter.as_str();
        r.kernels
            .iter()
            .filter(|k| {
                self.kernel_entry
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

    /// Ask for the kernels under `path` (relative; `""` the whole tree), unless they
    /// are shown already (or, without `replace`, anything is shown or loading).
    fn want_kernels(&mut self, path: String, replace: bool) {
        if (self.report.is_none() && self.archive.is_none()) || self.kernels_loading {
            return;
        }
        let shown = self.kernels.as_ref().map(|(p, _)| p.as_str());
        if shown == Some(path.as_str()) || (!replace && shown.is_some()) {
            return;
        }
        self.kernels_loading = true;
        self.kernels = None;
        self.requests.push(Request::Kernels(path));
    }

    /// Refresh the single targets from the report, keeping toggles: every processor
    /// with code, and every feature-flagged target ID after its processor.
    fn refresh_singles(&mut self) {
        let Some(r) = &self.report else { return };
        let mut rows: Vec<String> = Vec::new();
        for a in r.archs.keys() {
            let p = kpack::bundle::target::base_processor(a).to_string();
            if !rows.contains(&p) {
                rows.push(p);
            }
            if a.contains(':') && !rows.contains(a) {
                rows.push(a.clone());
            }
        }
        rows.sort_by(|a, b| kpack::natural::target_cmp(a, b));
        let old = std::mem::take(&mut self.singles);
        self.singles = rows
            .into_iter()
            .map(|p| {
                let on = old.iter().any(|(q, on)| *q == p && *on);
                (p, on)
            })
            .collect();
    }

    /// Handle one event.
    pub fn update(&mut self, ev: AppEvent) {
        let explorer_input = self.view == View::Explorer
            && matches!(
                ev,
                AppEvent::Key(_) | AppEvent::Mouse(_) | AppEvent::ScanDone(_)
            );
        self.update_inner(ev);
        if explorer_input && self.view == View::Explorer {
            self.want_layout();
        }
    }

    fn update_inner(&mut self, ev: AppEvent) {
        match ev {
            AppEvent::Key(k) => self.key(k),
            AppEvent::Mouse(m) => self.mouse(m),
            AppEvent::Resize | AppEvent::Tick => {}
            AppEvent::ScanProgress(done, total) => self.progress = (done, total),
            AppEvent::Partial(p) => {
                if self.report.is_none() || self.partial {
                    let (report, tree) = *p;
                    self.show(report, tree);
                    self.partial = true;
                }
            }
            AppEvent::ScanDone(r) => match *r {
                Ok(report) => {
                    let tree = Tree::build(&report);
                    self.show(report, tree);
                    self.partial = false;
                }
                Err(e) => self.error = Some(e),
            },
            AppEvent::Preview(path, r) => self.preview = Some((path, *r)),
            AppEvent::Kernels(path, r) => {
                self.kernels_loading = false;
                let mut r = *r;
                if let Ok(rep) = &mut r {
                    kpack::kernels::sort_rows(&mut rep.kernels, self.kernel_sort);
                    if self.kernel_reverse {
                        rep.kernels.reverse();
                    }
                }
                self.kernels = Some((path, r));
                self.kernel_cursor = 0;
            }
            AppEvent::ArchiveDone(msg) => self.archive_status = Some(msg),
            AppEvent::ArchiveOpened(rel, r) => match *r {
                Ok(idx) => {
                    self.archive = Some(idx);
                    self.archive_at =
                        Some(if self.report.as_ref().is_some_and(|r| r.wheel.is_some()) {
                            ArchiveAt::WheelMember(self.root.clone(), rel)
                        } else if self.root.is_file() {
                            ArchiveAt::File(self.root.clone())
                        } else {
                            ArchiveAt::File(self.root.join(&rel))
                        });
                    self.archive_cursor = 0;
                    self.archive_status = None;
                    if !self.views.contains(&View::Inspector) {
                        self.views.push(View::Inspector);
                    }
                    self.view = View::Inspector;
                }
                Err(e) => self.families_note = Some(format!("{rel}: {e}")),
            },
            AppEvent::Layout(path, r) => {
                self.layouts.insert(path, *r);
            }
            AppEvent::Pack(e) => {
                if let Some(PackState::Running(p)) = &mut self.pack {
                    p.tally.apply(e);
                }
            }
            AppEvent::PackDone(r) => self.pack = Some(PackState::Done(r)),
            AppEvent::WheelDone(r) => self.pack = Some(PackState::WheelDone(r)),
            AppEvent::Plan(r) => {
                self.planning = false;
                self.plan = Some((self.selection(), *r));
            }
        }
    }

    /// The mouse: the wheel scrolls the pane under the pointer, a click on a tab
    /// switches view, a click on a list selects the row under the pointer.
    fn mouse(&mut self, m: ratatui::crossterm::event::MouseEvent) {
        let inside = |r: ratatui::layout::Rect| {
            m.column >= r.x && m.column < r.x + r.width && m.row >= r.y && m.row < r.y + r.height
        };
        let side = self.drawn.side.get();
        match m.kind {
            MouseEventKind::ScrollDown | MouseEventKind::ScrollUp => {
                let d = if m.kind == MouseEventKind::ScrollDown {
                    3
                } else {
                    -3
                };
                if inside(side) || self.view == View::Preview {
                    self.scroll_side(d);
                } else {
                    self.move_by(d);
                }
            }
            MouseEventKind::Down(_) if m.row == 0 => {
                let hit = self
                    .drawn
                    .tabs
                    .borrow()
                    .iter()
                    .find(|(a, b, _)| m.column >= *a && m.column < *b)
                    .map(|t| t.2);
                if let Some(v) = hit {
                    self.view = v;
                    if v == View::Kernels {
                        self.want_kernels(String::new(), false);
                    }
                }
            }
            MouseEventKind::Down(_) if inside(side) => self.side_focus = true,
            MouseEventKind::Down(_) if inside(self.drawn.list.get()) => {
                self.side_focus = false;
                let i = self.drawn.list_first.get() + (m.row - self.drawn.list.get().y) as usize;
                match self.view {
                    View::Explorer if i < self.rows().len() => {
                        self.selected = i;
                        self.side_scroll = 0;
                    }
                    // The presets, a "single targets" label, then the targets.
                    View::Families if i < PRESETS.len() => self.family_cursor = i,
                    View::Families
                        if i > PRESETS.len() && i <= PRESETS.len() + self.singles.len() =>
                    {
                        self.family_cursor = i - 1;
                    }
                    View::Kernels if i < self.kernel_rows().len() => self.kernel_cursor = i,
                    View::Inspector if i < self.archive.as_ref().map_or(0, |a| a.kernels.len()) => {
                        self.archive_cursor = i;
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }

    /// Scroll the side pane by `d` lines, within what the last frame showed.
    fn scroll_side(&mut self, d: isize) {
        let max = self.drawn.side_max.get() as isize;
        self.side_scroll = (self.side_scroll as isize + d).clamp(0, max.max(0)) as u16;
    }

    fn move_by(&mut self, d: isize) {
        if self.side_focus && matches!(self.view, View::Explorer | View::Families) {
            self.scroll_side(d);
            return;
        }
        match self.view {
            View::Explorer => {
                let n = self.rows().len();
                if n > 0 {
                    self.selected = (self.selected as isize + d).clamp(0, n as isize - 1) as usize;
                    self.side_scroll = 0;
                }
            }
            View::Families => {
                let n = PRESETS.len() + self.singles.len();
                self.family_cursor =
                    (self.family_cursor as isize + d).clamp(0, n as isize - 1) as usize;
            }
            View::Inspector => {
                let n = self.archive.as_ref().map_or(0, |a| a.kernels.len());
                if n > 0 {
                    self.archive_cursor =
                        (self.archive_cursor as isize + d).clamp(0, n as isize - 1) as usize;
                }
            }
            View::Preview => self.scroll_side(d),
            View::Kernels => {
                let n = self.kernel_rows().len();
                if n > 0 {
                    self.kernel_cursor =
                        (self.kernel_cursor as isize + d).clamp(0, n as isize - 1) as usize;
                }
            }
            View::Pack => {}
        }
    }

    fn key(&mut self, k: KeyEvent) {
        if k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('c') {
            self.quit = true;
            return;
        }
        if let Some((which, dest, cursor)) = &mut self.extract_prompt {
            match k.code {
                KeyCode::Enter if !dest.is_empty() => {
                    if let Some(at) = &self.archive_at {
                        self.requests.push(Request::Extract(
                            at.clone(),
                            which.clone(),
                            PathBuf::from(dest.as_str()),
                        ));
                        self.archive_status = Some("extracting…".into());
                    }
                    self.extract_prompt = None;
                }
                KeyCode::Esc => self.extract_prompt = None,
                _ => {
                    super::textedit::edit(dest, cursor, k);
                }
            }
            return;
        }
        if self.filtering {
            let filter = if self.view == View::Kernels {
                &mut self.kernel_filter
            } else {
                &mut self.filter
            };
            match k.code {
                KeyCode::Enter => self.filtering = false,
                KeyCode::Esc => {
                    self.filtering = false;
                    filter.clear();
                }
                KeyCode::Backspace => {
                    filter.pop();
                }
                KeyCode::Char(c) => filter.push(c),
                _ => {}
            }
            self.selected = 0;
            self.scroll = 0;
            self.kernel_cursor = 0;
            return;
        }
        if self.help {
            if matches!(
                k.code,
                KeyCode::Esc | KeyCode::Char('?') | KeyCode::Char('q')
            ) {
                self.help = false;
            }
            return;
        }
        // In the Pack view Esc belongs to the view (cancel, back); in the dialog every
        // key but Tab is typing.
        let in_dialog = matches!(
            self.pack,
            Some(PackState::Confirm { .. } | PackState::Replace(_))
        );
        if self.view == View::Pack
            && (k.code == KeyCode::Esc
                || (in_dialog && !matches!(k.code, KeyCode::Tab | KeyCode::BackTab)))
        {
            self.pack_key(k);
            return;
        }
        let i = self.views.iter().position(|v| *v == self.view).unwrap_or(0);
        // q while a pack runs asks first; the next q (or y) cancels it and quits.
        if self.quit_asked {
            self.quit_asked = false;
            if matches!(k.code, KeyCode::Char('q' | 'y' | 'Y')) {
                self.quit = true;
            }
            return;
        }
        match k.code {
            KeyCode::Char('q') if self.packing() => self.quit_asked = true,
            KeyCode::Char('q') => self.quit = true,
            KeyCode::Char('?') => self.help = true,
            // Tab: into the side pane when it overflows (the detail, the plan), then
            // on to the next view; Shift-Tab back out, then to the previous view.
            KeyCode::Tab
                if matches!(self.view, View::Explorer | View::Families)
                    && !self.side_focus
                    && self.drawn.side_max.get() > 0 =>
            {
                self.side_focus = true;
            }
            KeyCode::Tab => {
                self.view = self.views[(i + 1) % self.views.len()];
                self.side_scroll = 0;
                self.side_focus = false;
            }
            KeyCode::BackTab if self.side_focus => self.side_focus = false,
            KeyCode::BackTab => {
                self.view = self.views[(i + self.views.len() - 1) % self.views.len()]
            }
            KeyCode::Char(c @ '1'..='9') => {
                if let Some(v) = self.views.get(c as usize - '1' as usize) {
                    self.view = *v;
                    if self.view == View::Kernels {
                        self.want_kernels(String::new(), false);
                    }
                }
            }
            KeyCode::Char('K') if self.view == View::Inspector => {
                let Some(a) = &self.archive else { return };
                self.kernel_entry = a
                    .kernels
                    .get(self.archive_cursor)
                    .map(|k| (k.key.clone(), k.arch.clone()));
                self.kernel_cursor = 0;
                self.want_kernels(String::new(), false);
                if !self.views.contains(&View::Kernels) {
                    self.views.push(View::Kernels);
                }
                self.view = View::Kernels;
            }
            KeyCode::Char(c @ ('x' | 'X')) if self.view == View::Inspector => {
                let (Some(a), Some(at)) = (&self.archive, &self.archive_at) else {
                    return;
                };
                let which = if c == 'x' {
                    let Some(k) = a.kernels.get(self.archive_cursor) else {
                        return;
                    };
                    Some((k.key.clone(), k.arch.clone()))
                } else {
                    None
                };
                // Ask where: by default beside the current directory, not inside the
                // install tree the archive came from.
                let dest = self.default_output(&format!("{}.extracted", at.file_name()));
                let cursor = dest.chars().count();
                self.extract_prompt = Some((which, dest, cursor));
            }
            KeyCode::Char('v') if self.view == View::Inspector => {
                if let Some(at) = &self.archive_at {
                    self.archive_status = Some("verifying…".into());
                    self.requests.push(Request::VerifyArchive(at.clone()));
                }
            }
            // Shift with the arrows or pages scrolls the side pane (the detail, the
            // plan); in the preview every move scrolls it.
            KeyCode::Down | KeyCode::Up | KeyCode::PageDown | KeyCode::PageUp
                if k.modifiers.contains(KeyModifiers::SHIFT) =>
            {
                let page = self.drawn.side.get().height.saturating_sub(2).max(1) as isize;
                self.scroll_side(match k.code {
                    KeyCode::Down => 1,
                    KeyCode::Up => -1,
                    KeyCode::PageDown => page,
                    _ => -page,
                });
            }
            KeyCode::Down | KeyCode::Char('j') => self.move_by(1),
            KeyCode::Up | KeyCode::Char('k') => self.move_by(-1),
            KeyCode::PageDown => self.move_by(self.page as isize),
            KeyCode::PageUp => self.move_by(-(self.page as isize)),
            KeyCode::Home | KeyCode::Char('g') => self.move_by(-(1 << 30)),
            KeyCode::End | KeyCode::Char('G') => self.move_by(1 << 30),
            KeyCode::Esc => {
                if !self.filter.is_empty() {
                    self.filter.clear();
                    self.selected = 0;
                }
            }
            _ => self.view_key(k),
        }
    }

    fn view_key(&mut self, k: KeyEvent) {
        match self.view {
            View::Explorer => self.explorer_key(k),
            View::Families => match k.code {
                KeyCode::Char(' ') | KeyCode::Enter => {
                    let c = self.family_cursor;
                    self.families_note = None;
                    if c < PRESETS.len() {
                        self.families[c] = !self.families[c];
                    } else if let Some(t) = self.singles.get(c - PRESETS.len()).map(|s| s.0.clone())
                    {
                        // A target inside a selected preset is packed with it: no hidden
                        // choice, say so.
                        if let Some(preset) = self.covered_by(&t) {
                            self.families_note = Some(format!(
                                "{t} is packed with {preset}; deselect {preset} to choose it on its own"
                            ));
                        } else if let Some((_, on)) = self.singles.get_mut(c - PRESETS.len()) {
                            *on = !*on;
                        }
                    }
                }
                KeyCode::Char('P') => self.open_pack_dialog(),
                KeyCode::Char('e') => {
                    let sel = self.selection();
                    if !sel.is_empty() && !self.planning {
                        self.planning = true;
                        self.requests.push(Request::Plan(sel));
                    }
                }
                _ => {}
            },
            View::Pack => self.pack_key(k),
            View::Kernels => {
                if k.code == KeyCode::Char('/') {
                    self.filtering = true;
                }
                if k.code == KeyCode::Char('a') && self.kernel_entry.is_some() {
                    // The whole archive again, not only the inspector's entry.
                    self.kernel_entry = None;
                    self.kernel_cursor = 0;
                }
                if k.code == KeyCode::Char('s') {
                    use kpack::kernels::SortBy::*;
                    self.kernel_sort = match self.kernel_sort {
                        Size => Vgpr,
                        Vgpr => Sgpr,
                        Sgpr => Lds,
                        Lds => Scratch,
                        Scratch => Spills,
                        Spills => Name,
                        Name => Target,
                        Target => Size,
                    };
                    self.resort_kernels();
                }
                if k.code == KeyCode::Char('S') {
                    self.kernel_reverse = !self.kernel_reverse;
                    self.resort_kernels();
                }
            }
            View::Preview | View::Inspector => {}
        }
    }

    /// Open the confirm dialog with the selected families.
    pub fn open_pack_dialog(&mut self) {
        if self.report.is_none() || matches!(self.pack, Some(PackState::Running(_))) {
            return;
        }
        let selection = self.selection();
        let name = self
            .root
            .file_name()
            .map_or("tree".to_string(), |n| n.to_string_lossy().into_owned());
        let wheel = self.report.as_ref().and_then(|r| r.wheel.clone());
        let settings = match wheel {
            Some(w) => PackSettings {
                group: format!("{}-device", w.name.to_lowercase().replace('_', "-")),
                selection: self.wheel_selection(),
                split: false,
                per_family: false,
                output: self.default_output(&format!(
                    "{}.split",
                    name.strip_suffix(".whl").unwrap_or(&name)
                )),
                level: kpack::kpack::archive::DEFAULT_LEVEL,
                wheel: true,
                overlay: self.overlay_guess(),
                force: false,
            },
            None => PackSettings {
                group: "rocm".into(),
                selection,
                split: false,
                per_family: false,
                output: self.default_output(&format!("{name}.packed")),
                level: kpack::kpack::archive::DEFAULT_LEVEL,
                wheel: false,
                overlay: String::new(),
                force: false,
            },
        };
        // Edits of an earlier opening are kept (the selection is today's).
        let settings = match self.last_pack.take() {
            Some(mut last) if last.wheel == settings.wheel => {
                last.selection = settings.selection;
                last
            }
            _ => settings,
        };
        let cursor = settings.group.chars().count();
        self.pack = Some(PackState::Confirm {
            settings,
            field: 0,
            cursor,
        });
        if !self.views.contains(&View::Pack) {
            self.views.push(View::Pack);
        }
        self.view = View::Pack;
    }

    /// Where a pack or split writes by default: `name` in the current directory
    /// (shown relative), or beside the tree when the current directory is inside it.
    pub fn default_output(&self, name: &str) -> String {
        let inside = match (std::env::current_dir(), std::fs::canonicalize(&self.root)) {
            (Ok(cwd), Ok(root)) => root.is_dir() && cwd.starts_with(&root),
            _ => false,
        };
        if inside {
            self.root.with_file_name(name).display().to_string()
        } else {
            name.to_string()
        }
    }

    /// Sort the kernels shown by the current order.
    fn resort_kernels(&mut self) {
        if let Some((_, Ok(r))) = &mut self.kernels {
            kpack::kernels::sort_rows(&mut r.kernels, self.kernel_sort);
            if self.kernel_reverse {
                r.kernels.reverse();
            }
        }
        self.kernel_cursor = 0;
    }

    /// The explorer's order.
    pub fn order(&self) -> super::tree::Order {
        super::tree::Order {
            sort: self.sort,
            reverse: self.sort_reverse,
        }
    }

    /// What the header calls the opened path (`demo` for the built-in demo).
    pub fn title(&self) -> String {
        self.title
            .clone()
            .unwrap_or_else(|| self.root.display().to_string())
    }

    /// For a wheel: the selection as exact target IDs (what the families view's
    /// picks take), or every target when nothing is picked.
    pub fn wheel_selection(&self) -> Selection {
        let picks = self.picks();
        let targets = self.report.as_ref().map_or_else(Vec::new, |r| {
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

    /// The top-level directory of the wheel holding the most device bytes (the
    /// overlay root a split most likely wants: `torch` in a torch wheel).
    pub fn overlay_guess(&self) -> String {
        let mut by_top: std::collections::BTreeMap<&str, u64> = Default::default();
        for f in self.report.iter().flat_map(|r| &r.files) {
            if let Some((top, _)) = f.path.split_once('/')
                && !top.ends_with(".dist-info")
                && !top.ends_with(".data")
            {
                *by_top.entry(top).or_default() += f.device_bytes;
            }
        }
        by_top
            .iter()
            .max_by_key(|(t, b)| (**b, std::cmp::Reverse(**t)))
            .map_or_else(String::new, |(t, _)| t.to_string())
    }

    fn start_pack(&mut self, s: PackSettings) {
        self.requests.push(Request::Pack(s));
        self.pack = Some(PackState::Running(PackProgress {
            started: Some(std::time::Instant::now()),
            ..PackProgress::default()
        }));
    }

    /// Whether a pack (or split) is running.
    pub fn packing(&self) -> bool {
        matches!(self.pack, Some(PackState::Running(_)))
    }

    fn pack_key(&mut self, k: KeyEvent) {
        match &mut self.pack {
            Some(PackState::Confirm {
                settings,
                field,
                cursor,
            }) => match k.code {
                KeyCode::Enter
                    if !settings.selection.is_empty()
                        && !settings.group.is_empty()
                        && (!settings.wheel || !settings.overlay.is_empty()) =>
                {
                    let s = settings.clone();
                    self.last_pack = Some(s.clone());
                    if previous_output(&s) {
                        self.pack = Some(PackState::Replace(s));
                    } else {
                        self.start_pack(s);
                    }
                }
                KeyCode::Esc => {
                    self.last_pack = Some(settings.clone());
                    self.pack = None;
                    self.views.retain(|v| *v != View::Pack);
                    self.view = View::Families;
                }
                KeyCode::Down | KeyCode::Up => {
                    let n = settings.fields();
                    *field = if k.code == KeyCode::Down {
                        (*field + 1) % n
                    } else {
                        (*field + n - 1) % n
                    };
                    *cursor = settings.field(*field).map_or(0, |t| t.chars().count());
                }
                KeyCode::F(2) if !settings.wheel => settings.split = !settings.split,
                KeyCode::F(3) if !settings.wheel => settings.per_family = !settings.per_family,
                _ => match settings.field_mut(*field) {
                    Some(text) => {
                        super::textedit::edit(text, cursor, k);
                    }
                    // The level field: +/- or ←/→.
                    None => match k.code {
                        KeyCode::Char('+') | KeyCode::Right => {
                            settings.level = (settings.level + 1).min(22);
                        }
                        KeyCode::Char('-') | KeyCode::Left => {
                            settings.level = (settings.level - 1).max(1);
                        }
                        _ => {}
                    },
                },
            },
            Some(PackState::Replace(s)) => match k.code {
                KeyCode::Char('y' | 'Y') => {
                    let mut s = s.clone();
                    s.force = true;
                    self.start_pack(s);
                }
                KeyCode::Char('n' | 'N') | KeyCode::Esc => {
                    let settings = s.clone();
                    let cursor = settings.group.chars().count();
                    self.pack = Some(PackState::Confirm {
                        settings,
                        field: 0,
                        cursor,
                    });
                }
                _ => {}
            },
            Some(PackState::Running(_)) => {
                if k.code == KeyCode::Esc {
                    self.cancel_pack = true;
                }
            }
            Some(PackState::Done(_) | PackState::WheelDone(_)) | None => {
                if k.code == KeyCode::Esc {
                    self.view = View::Families;
                }
            }
        }
    }

    fn explorer_key(&mut self, k: KeyEvent) {
        let rows = self.rows();
        let Some(tree) = &self.tree else { return };
        let Some(row) = rows.get(self.selected).copied() else {
            return;
        };
        let node = &tree.nodes[row.node];
        match k.code {
            KeyCode::Char('/') => {
                self.filtering = true;
            }
            KeyCode::Char('s') => self.sort = self.sort.next(),
            KeyCode::Char('S') => self.sort_reverse = !self.sort_reverse,
            KeyCode::Char('K') => {
                let path = tree.path(row.node);
                self.kernel_entry = None;
                self.want_kernels(path, true);
                self.view = View::Kernels;
            }
            // Enter toggles a folder; → and l only open it.
            KeyCode::Enter if node.file.is_none() && !self.expanded.insert(row.node) => {
                self.expanded.remove(&row.node);
            }
            KeyCode::Enter | KeyCode::Right | KeyCode::Char('l') if node.file.is_none() => {
                self.expanded.insert(row.node);
            }
            KeyCode::Left | KeyCode::Char('h') => {
                if node.file.is_none() && self.expanded.remove(&row.node) {
                    return;
                }
                // To the parent first; the next press there collapses it (as file
                // managers do).
                if let Some(p) = node.parent.filter(|&p| p != 0)
                    && let Some(pos) = self.rows().iter().position(|r| r.node == p)
                {
                    self.selected = pos;
                }
            }
            KeyCode::Enter
                if node
                    .file
                    .and_then(|f| self.report.as_ref().map(|r| r.files[f].kind))
                    == Some(kpack::scan::FileKind::Kpack) =>
            {
                self.requests
                    .push(Request::OpenArchive(tree.path(row.node)));
            }
            KeyCode::Enter | KeyCode::Char('p') if node.file.is_some() => {
                let path = tree.path(row.node);
                let is_fat = node
                    .file
                    .and_then(|f| self.report.as_ref().map(|r| r.files[f].kind))
                    == Some(kpack::scan::FileKind::FatBinary);
                if is_fat {
                    if self.preview.as_ref().is_none_or(|(p, _)| p != &path) {
                        self.preview = None;
                        self.requests.push(Request::Preview(path));
                    }
                    self.side_scroll = 0;
                    self.view = View::Preview;
                }
            }
            _ => {}
        }
    }
}
