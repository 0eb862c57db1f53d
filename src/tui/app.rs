//! The UI's state and how input changes it. No I/O here: work runs on background
//! threads and comes back as [`AppEvent`]s.

use super::messages::Level;
pub use super::selection::{Pick, Selection};
use super::tree::{Row, Sort, Tree};
pub use super::viewstate::{AUTO_PLAN_BYTES, FamiliesState, KernelsState};
use kpack::family::{Family, PRESETS};
use kpack::kpack::archive::ArchiveIndex;
use kpack::scan::TreeReport;
use ratatui::crossterm::event::{KeyEvent, MouseEvent};
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
    Preview(String, Box<Result<kpack::fatbin::Plan, String>>),
    /// An archive was opened from the explorer (relative path, its index).
    ArchiveOpened(String, Box<Result<ArchiveIndex, String>>),
    /// An archive extract or verify finished: what it did, or what went wrong.
    ArchiveDone(Result<String, String>),
    /// The marked kernels' code objects were extracted, or why not.
    Extracted(Result<String, String>),
    /// An ELF binary's sections and segments were read.
    Layout(String, Box<Result<kpack::elf::rewrite::ElfLayout, String>>),
    /// The kernels under a relative path were read.
    Kernels(String, Box<Result<kpack::kernels::KernelsReport, String>>),
    /// The core's pack plan for the selected families finished.
    Plan(Selection, Box<Result<kpack::pack::PackPlan, String>>),
    /// Progress of a running pack.
    Pack(kpack::pack::PackEvent),
    /// The pack finished (or failed, or was cancelled).
    PackDone(Box<Result<kpack::pack::PackReport, String>>),
    /// The wheel split finished (or failed).
    WheelDone(Box<Result<kpack::wheel_split::WheelSplitReport, String>>),
    /// A table was exported: the file written, or why not.
    Exported(Result<PathBuf, String>),
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
    Preview {
        /// The file.
        path: String,
        /// The group its marker would name (the pack dialog's).
        group: String,
    },
    /// Read the sections and segments of this relative path.
    Layout(String),
    /// List the kernels under this relative path (`""`: the whole tree).
    Kernels(String),
    /// Extract kernels of the open archive: these (key, arch), or all with `None`,
    /// into the directory given.
    Extract(ArchiveAt, Option<Vec<(String, String)>>, PathBuf),
    /// Extract these code objects of what the Kernels view lists (`listed`: the
    /// relative path it read, `""` for all) into the directory given.
    ExtractCodeObjects {
        /// What the Kernels view read.
        listed: String,
        /// The code objects.
        wanted: std::collections::BTreeSet<kpack::kernels::CodeObjectRef>,
        /// The directory.
        dest: PathBuf,
    },
    /// Verify the open archive.
    VerifyArchive(ArchiveAt),
    /// Open the archive at this relative path of the tree in the inspector.
    OpenArchive(String),
    /// Compute the pack plan (with size estimates) for these family names.
    Plan(Selection),
    /// Pack the tree.
    Pack(PackSettings),
    /// Write a table to `kpack-<name>.<ext>` in the current directory (a new name
    /// when it exists: nothing is overwritten).
    Export {
        /// The table's short name.
        name: &'static str,
        /// `csv` or `json`.
        ext: &'static str,
        /// Its text in that format.
        text: String,
    },
}

/// The inspector's extract prompt: one (key, arch) or all, the destination being
/// typed, the cursor in it.
pub type ExtractPrompt = (Option<Vec<(String, String)>>, String, usize);

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
    /// The Architectures view's quick projection, for the picks and the report
    /// (files, bytes) it was computed for.
    #[allow(clippy::type_complexity)]
    pub projection: std::cell::RefCell<Option<((Vec<String>, usize, u64), (u64, Vec<u64>))>>,
}

impl App {
    /// The scrollable side pane's state, for [`super::widgets::side_pane`].
    pub(crate) fn side(&self) -> super::widgets::Side<'_> {
        super::widgets::Side {
            scroll: self.side_scroll,
            focused: self.side_focus,
            alone: self.view == View::Preview,
            area: &self.drawn.side,
            max: &self.drawn.side_max,
        }
    }
}

/// The inspector's order of an archive's kernels: keys with numbers as numbers
/// (`lib/x.so#2` before `lib/x.so#10`), then targets by processor number. Only the
/// shown copy is reordered; the file keeps its order.
pub(super) fn natural_order(mut idx: ArchiveIndex) -> ArchiveIndex {
    idx.kernels.sort_by(|a, b| {
        kpack::natural::natural_cmp(&a.key, &b.key)
            .then_with(|| kpack::natural::target_cmp(&a.arch, &b.arch))
    });
    idx
}

/// Whether the dialog's output holds what a run would replace: a previous pack's
/// output (its ledger), or, for a wheel split, a non-empty directory.
pub(super) fn previous_output(s: &PackSettings) -> bool {
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
                let member = wheel.member(m).ok_or_else(|| kpack::Error::Changed {
                    path: w.clone(),
                    what: format!("no member {m} (any more)"),
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

/// The pack dialog's group until the user changes it (what the CLI's examples use).
pub const DEFAULT_GROUP: &str = "rocm";

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
    /// Code for targets outside the selection: stop before writing (the CLI's
    /// default), or leave it out and report it (F4 switches).
    pub unassigned: kpack::pack::Unassigned,
    /// Copy damaged fat binaries with their device code instead of refusing (F5).
    pub copy_damaged: bool,
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

    pub(super) fn field_mut(&mut self, i: usize) -> Option<&mut String> {
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
    WheelDone(Box<Result<kpack::wheel_split::WheelSplitReport, String>>),
}

/// The Explorer: open folders, the selection, the order and the filter.
pub struct ExplorerState {
    /// Open folders.
    pub expanded: HashSet<usize>,
    /// Row selected.
    pub selected: usize,
    /// First row shown.
    pub scroll: usize,
    /// Order of children.
    pub sort: Sort,
    /// The order reversed (key `S`).
    pub reverse: bool,
    /// The filter.
    pub filter: String,
    /// Typing the filter.
    pub filtering: bool,
    /// What the Explorer says of the last key that did nothing visible (Enter on a
    /// file without a preview), until the next key.
    pub note: Option<String>,
    /// Last height of the list, for paging.
    pub page: usize,
    /// Sections and segments of ELF files (the detail pane's layout), read in the
    /// background on selection.
    pub layouts: std::collections::HashMap<String, Result<kpack::elf::rewrite::ElfLayout, String>>,
}

impl Default for ExplorerState {
    fn default() -> Self {
        ExplorerState {
            expanded: HashSet::new(),
            selected: 0,
            scroll: 0,
            sort: Sort::Size,
            reverse: false,
            filter: String::new(),
            filtering: false,
            note: None,
            page: 10,
            layouts: Default::default(),
        }
    }
}

/// The pack dialog (Pack view) and the pack it runs.
#[derive(Default)]
pub struct PackingState {
    /// The dialog, and the pack once started.
    pub run: Option<PackState>,
    /// The dialog's settings when it was last closed (kept for the next opening).
    pub last: Option<PackSettings>,
    /// Why Enter did not start the pack (an empty field, nothing selected).
    pub note: Option<String>,
    /// Set by Esc during a pack: the loop cancels the core's token.
    pub cancel: bool,
    /// A cancel was asked of the running pack: said until it ends.
    pub cancelling: bool,
}

/// The `z` prompt, and the Explorer's jump list.
#[derive(Default)]
pub struct JumpState {
    /// The prompt's letters, while it is open.
    pub prompt: Option<String>,
    /// Places jumped from (`[` goes back).
    pub back: Vec<String>,
    /// Places gone back from (`]`).
    pub forward: Vec<String>,
}

/// The archive inspector: the archive shown, where it is, and what is selected.
#[derive(Default)]
pub struct InspectorState {
    /// The archive shown.
    pub index: Option<ArchiveIndex>,
    /// Where it is.
    pub at: Option<ArchiveAt>,
    /// The extract prompt: what to extract (one kernel, or all), the destination
    /// being typed, the cursor.
    pub extract: Option<ExtractPrompt>,
    /// Row selected.
    pub cursor: usize,
    /// Rows marked (Space): what `x` extracts when any is.
    pub marks: std::collections::BTreeSet<usize>,
    /// The last extract/verify outcome, or the one running.
    pub status: Option<String>,
}

/// The whole UI state.
pub struct App {
    /// What was opened.
    pub root: PathBuf,
    /// Whether the root is one file (a binary, a wheel, an archive), read once.
    pub root_is_file: bool,
    /// Views available.
    pub views: Vec<View>,
    /// Current view.
    pub view: View,
    /// The scan, when done.
    pub report: Option<TreeReport>,
    /// Its tree.
    pub tree: Option<Tree>,
    /// The Explorer's state.
    pub explorer: ExplorerState,
    /// Scan progress (done, total).
    pub progress: (u64, u64),
    /// The tree shown is a scan in progress.
    pub partial: bool,
    /// A fatal error to show.
    pub error: Option<String>,
    /// Help overlay shown.
    pub help: bool,
    /// Views a drill-down came from (K, Enter on a fat binary or an archive): Esc or
    /// Backspace returns to the last.
    pub back: Vec<View>,
    /// The Architectures view's state.
    pub families: FamiliesState,
    /// The archive inspector's state.
    pub inspector: InspectorState,
    /// Preview result, for the path it was computed for.
    pub preview: Option<(String, Result<kpack::fatbin::Plan, String>)>,
    /// Preview scroll.
    /// Background requests to start.
    pub requests: Vec<Request>,
    /// Leave the loop.
    pub quit: bool,
    /// The pack dialog and the pack it runs.
    pub packing: PackingState,
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
    /// The Kernels view's state.
    pub kernels: KernelsState,
    /// Every problem and operation outcome of the session (`!` shows them whole).
    pub log: super::messages::Log,
    /// Text for the terminal's clipboard (OSC 52), written by the loop.
    pub copy: Option<String>,
    /// What the last key did, said in the footer until the next key (copied,
    /// exported).
    pub flash: Option<String>,
    /// A pager or editor to hand the terminal to (`V`, `e`), run by the loop.
    pub external: Option<super::external::External>,
    /// What an earlier run remembered of this path, put back when the scan is done.
    pub pending_restore: Option<super::state::Remembered>,
    /// The `z` prompt and the places jumped from.
    pub jumps: JumpState,
}

impl App {
    /// The app for a `.kpack` that cannot be read: the inspector's tab, the reason in
    /// the error pane and the log, and q quits.
    pub fn unreadable_archive(root: PathBuf, error: String) -> App {
        let mut app = App::new(root, None);
        app.views = vec![View::Inspector];
        app.view = View::Inspector;
        // The reader's error names the file already.
        app.log.push(Level::Error, "", &error);
        app.error = Some(format!(
            "{error}\n\nThis archive cannot be read. `kpack-tui verify {}` says the same; q quits.",
            app.root.display()
        ));
        app
    }

    /// A new app for a tree (scan pending) or an archive.
    pub fn new(root: PathBuf, archive: Option<ArchiveIndex>) -> App {
        let archive_at = archive.is_some().then(|| ArchiveAt::File(root.clone()));
        let root_is_file = root.is_file();
        let views = if archive.is_some() {
            vec![View::Inspector]
        } else {
            vec![View::Explorer, View::Families, View::Preview, View::Kernels]
        };
        App {
            root,
            root_is_file,
            view: views[0],
            views,
            report: None,
            tree: None,
            explorer: ExplorerState::default(),
            progress: (0, 0),
            error: None,
            help: false,
            families: FamiliesState {
                presets: vec![false; PRESETS.len()],
                ..FamiliesState::default()
            },
            inspector: InspectorState {
                index: archive.map(natural_order),
                at: archive_at,
                ..InspectorState::default()
            },
            preview: None,
            requests: Vec::new(),
            quit: false,
            packing: PackingState::default(),
            title: None,
            quit_asked: false,
            drawn: Drawn::default(),
            side_scroll: 0,
            side_focus: false,
            log: Default::default(),
            copy: None,
            flash: None,
            external: None,
            pending_restore: None,
            jumps: JumpState::default(),
            kernels: KernelsState::default(),
            back: Vec::new(),
            partial: false,
        }
    }

    /// Show a (new or more complete) report, keeping open folders and the selection.
    pub(super) fn show(&mut self, report: TreeReport, tree: Tree) {
        match self.tree.take() {
            None => {
                // First sight: open the first level, preselect the families with code.
                self.explorer.expanded = tree.nodes[0]
                    .children
                    .iter()
                    .copied()
                    .filter(|&c| tree.nodes[c].file.is_none())
                    .collect();
                for (i, (name, _)) in PRESETS.iter().enumerate() {
                    if let Ok(f) = Family::parse(name) {
                        self.families.presets[i] = report.archs.keys().any(|a| f.contains(a));
                    }
                }
            }
            Some(old) => {
                let selected = self.report.as_ref().and_then(|r| {
                    old.rows(
                        &self.explorer.expanded,
                        self.order(),
                        &self.explorer.filter,
                        r,
                    )
                    .get(self.explorer.selected)
                    .map(|row| old.path(row.node))
                });
                self.explorer.expanded = self
                    .explorer
                    .expanded
                    .iter()
                    .filter_map(|&n| tree.find(&old.path(n)))
                    .collect();
                if report.archs.len() > self.report.as_ref().map_or(0, |r| r.archs.len()) {
                    for (i, (name, _)) in PRESETS.iter().enumerate() {
                        if let Ok(f) = Family::parse(name) {
                            self.families.presets[i] |= report.archs.keys().any(|a| f.contains(a));
                        }
                    }
                }
                self.tree = Some(tree);
                self.report = Some(report);
                self.refresh_singles();
                self.refresh_dialog_selection();
                if let Some(path) = selected {
                    let rows = self.rows();
                    if let Some(i) = rows
                        .iter()
                        .position(|r| self.tree.as_ref().is_some_and(|t| t.path(r.node) == path))
                    {
                        self.explorer.selected = i;
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
        let f = tree.nodes[rows.get(self.explorer.selected)?.node].file?;
        report.files.get(f)
    }

    /// Ask for the selected ELF file's layout once.
    pub(super) fn want_layout(&mut self) {
        let Some(f) = self.selected_file() else {
            return;
        };
        if f.elf_kind.is_none() || f.hard_link_of.is_some() {
            return;
        }
        let path = f.path.clone();
        if !self.explorer.layouts.contains_key(&path) {
            // Pending until the answer arrives; never asked twice.
            self.explorer
                .layouts
                .insert(path.clone(), Err("reading…".to_string()));
            self.requests.push(Request::Layout(path));
        }
    }

    /// Rows of the explorer.
    pub fn rows(&self) -> Vec<Row> {
        match (&self.tree, &self.report) {
            (Some(t), Some(r)) => t.rows(
                &self.explorer.expanded,
                self.order(),
                &self.explorer.filter,
                r,
            ),
            _ => Vec::new(),
        }
    }

    /// Ask for the kernels under `path` (relative; `""` the whole tree), unless they
    /// are shown already (or, without `replace`, anything is shown or loading).
    pub(super) fn want_kernels(&mut self, path: String, replace: bool) {
        if (self.report.is_none() && self.inspector.index.is_none()) || self.kernels.loading {
            return;
        }
        let shown = self.kernels.report.as_ref().map(|(p, _)| p.as_str());
        if shown == Some(path.as_str()) || (!replace && shown.is_some()) {
            return;
        }
        self.kernels.loading = true;
        self.kernels.report = None;
        self.requests.push(Request::Kernels(path));
    }

    /// Refresh the single targets from the report, keeping toggles: every processor
    /// with code, and every feature-flagged target ID after its processor.
    pub(super) fn refresh_singles(&mut self) {
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
        let old = std::mem::take(&mut self.families.singles);
        self.families.singles = rows
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
        if self.view == View::Families {
            self.want_plan();
        }
    }

    /// On a tree whose device code the core compresses whole in a moment (at most
    /// [`AUTO_PLAN_BYTES`]), the exact pack plan of the current selection is asked
    /// for as soon as the Architectures view shows it, instead of a guess (#30 item 7).
    fn want_plan(&mut self) {
        let Some(r) = &self.report else { return };
        if self.families.planning
            || self.partial
            || r.wheel.is_some()
            || r.totals.device_raw > AUTO_PLAN_BYTES
        {
            return;
        }
        let sel = self.families.selection();
        if sel.is_empty() || self.families.plan.as_ref().is_some_and(|(s, _)| *s == sel) {
            return;
        }
        self.families.planning = true;
        self.requests.push(Request::Plan(sel));
    }

    pub(super) fn resort_kernels(&mut self) {
        if let Some((_, Ok(r))) = &mut self.kernels.report {
            kpack::kernels::sort_rows(&mut r.kernels, self.kernels.sort);
            if self.kernels.reverse {
                r.kernels.reverse();
            }
        }
        self.kernels.cursor = 0;
    }

    /// The explorer's order.
    pub fn order(&self) -> super::tree::Order {
        super::tree::Order {
            sort: self.explorer.sort,
            reverse: self.explorer.reverse,
        }
    }

    /// What the header calls the opened path (`demo` for the built-in demo).
    pub fn title(&self) -> String {
        self.title
            .clone()
            .unwrap_or_else(|| self.root.display().to_string())
    }
}
