//! The terminal UI: a thin layer over the core. One channel carries input, ticks and
//! background results; the drawing thread never does I/O.

pub mod app;
mod app_events;
mod app_keys;
mod app_pack;
mod app_remember;
pub mod bench;
pub mod detail;
pub mod diffview;
mod explorerview;
pub mod export;
pub mod external;
mod familiesview;
pub mod help;
pub mod inspector;
pub mod jump;
pub mod kernelmarks;
pub mod kernelsview;
pub mod marks;
pub mod messages;
pub mod packview;
mod previewview;
pub mod selection;
pub mod state;
pub mod textedit;
pub mod timeline;
pub mod timeline_draw;
pub mod timeline_find;
mod timeline_panes;
pub mod tree;
pub mod ui;
pub mod viewstate;
pub mod wheelsplit;
pub mod widgets;

#[cfg(test)]
mod tests;

use anyhow::Result;
use app::{App, AppEvent, Request};
use kpack::event::EventSink;
use kpack::scan::ScanEvent;
use ratatui::crossterm::event::{self, Event, KeyEventKind};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Sender, channel};
use std::time::{Duration, Instant};

struct ScanForward {
    tx: Sender<AppEvent>,
    done: AtomicU64,
    total: AtomicU64,
    last: std::sync::Mutex<Instant>,
    /// Reports not yet shown, taken by the aggregator thread.
    pending: std::sync::Arc<std::sync::Mutex<Vec<kpack::scan::FileReport>>>,
}

impl EventSink<ScanEvent> for ScanForward {
    fn event(&self, e: ScanEvent) {
        match e {
            ScanEvent::Discovered { files, .. } => self.total.store(files, Ordering::Relaxed),
            ScanEvent::FileDone { .. } => {
                self.done.fetch_add(1, Ordering::Relaxed);
            }
            ScanEvent::Inspected(r) => {
                if let Ok(mut p) = self.pending.lock() {
                    p.push(*r);
                }
                return;
            }
            ScanEvent::Listed { path, bytes } => {
                // Shown as not yet inspected (`?`) until its report arrives.
                if let Ok(mut p) = self.pending.lock() {
                    p.push(kpack::scan::FileReport::new(
                        path,
                        kpack::scan::FileKind::Other,
                        bytes,
                        0,
                    ));
                }
                return;
            }
        }
        // At most one progress message per frame.
        if let Ok(mut last) = self.last.lock()
            && last.elapsed() >= Duration::from_millis(30)
        {
            *last = Instant::now();
            let _ = self.tx.send(AppEvent::ScanProgress(
                self.done.load(Ordering::Relaxed),
                self.total.load(Ordering::Relaxed),
            ));
        }
    }
}

/// The core's pack plan with estimates, for the UI (written nowhere).
/// What the pack dialog says on a wheel (it is split, not packed; not from the TUI yet).
const WHEEL_PACK: &str = "a wheel is split, not packed: kpack-tui wheel split WHEEL -o DIR \
    --device-package-prefix P --overlay-root ROOT [--target …] (not from the TUI yet)";

fn plan(root: &Path, selection: &app::Selection) -> Result<kpack::pack::PackPlan, String> {
    if kpack::wheel::is_wheel_path(root) {
        return Err(WHEEL_PACK.into());
    }
    // The dialog's default group, so that the plan is the one of `pack --dry-run
    // --group rocm` with these families (archive names are in the ledger's size).
    let mut opts = selection.options(app::DEFAULT_GROUP)?;
    opts.unassigned = kpack::pack::Unassigned::Drop;
    opts.verify = false;
    opts.copy_damaged = true;
    let out = std::env::temp_dir().join("kpack-tui-plan-preview");
    let mut p = kpack::pack::plan_pack(root, &out, &opts).map_err(|e| e.to_string())?;
    kpack::pack::estimate(&mut p, root, &opts);
    Ok(p)
}

struct PackForward(Sender<AppEvent>);

impl EventSink<kpack::pack::PackEvent> for PackForward {
    fn event(&self, e: kpack::pack::PackEvent) {
        let _ = self.0.send(AppEvent::Pack(e));
    }
}

/// Run a pack as the dialog set it.
fn run_pack(
    root: &Path,
    s: &app::PackSettings,
    tx: &Sender<AppEvent>,
    cancel: &kpack::event::CancelToken,
) -> Result<kpack::pack::PackReport, String> {
    if kpack::wheel::is_wheel_path(root) {
        return Err(WHEEL_PACK.into());
    }
    let mut opts = s.selection.options(&s.group)?;
    if s.split {
        opts.layout = kpack::pack::Layout::Split;
    }
    if s.per_family {
        opts.archive_per = kpack::pack::ArchivePer::Family;
    }
    opts.unassigned = s.unassigned;
    opts.copy_damaged = s.copy_damaged;
    opts.level = s.level;
    opts.force = s.force;
    let out = PathBuf::from(&s.output);
    let plan = kpack::pack::plan_pack(root, &out, &opts).map_err(|e| in_dialog_terms(&e))?;
    kpack::pack::execute_pack(plan, root, &out, &opts, &PackForward(tx.clone()), cancel)
        .map_err(|e| in_dialog_terms(&e))
}

/// A refusal of the core, with the CLI flags it advises named as the dialog's keys
/// (the advice has to be one the user can follow here).
fn in_dialog_terms(e: &kpack::Error) -> String {
    e.to_string()
        .replace(
            "select them (--family, --target, --all) or pass --unassigned drop",
            "select them in the Architectures view (Space), or press F4 in the dialog to drop them",
        )
        .replace(
            "pass --copy-damaged to copy them as they are",
            "press F5 in the dialog to copy them as they are",
        )
}

/// Split the open wheel as the dialog set it (targets: the families view's picks).
fn run_wheel_split(
    root: &Path,
    s: &app::PackSettings,
    tx: &Sender<AppEvent>,
    cancel: &kpack::event::CancelToken,
) -> Result<kpack::wheel_split::WheelSplitReport, String> {
    let mut opts = kpack::wheel_split::WheelSplitOptions::new(&s.group, &s.overlay);
    opts.cancel = cancel.clone();
    opts.targets = Some(s.selection.targets.clone());
    opts.level = s.level;
    opts.force = s.force;
    kpack::wheel_split::split_wheel(root, Path::new(&s.output), &opts, &PackForward(tx.clone()))
        .map_err(|e| e.to_string())
}

/// The file a relative path names: under the tree, or the opened file itself.
fn file_in(root: &Path, rel: &str) -> PathBuf {
    if root.is_dir() {
        root.join(kpack::relpath::to_path(rel))
    } else {
        root.to_path_buf()
    }
}

/// The rewrite plan of `rel`: a file of the tree, or a member of the wheel `path`
/// (read from the zip, as `wheel split` reads it).
fn preview_plan(
    path: &Path,
    rel: &str,
    marker: &kpack::kpack::Marker,
) -> Result<kpack::fatbin::Plan, String> {
    // ELF or PE, as the CLI's preview: one dispatch for both.
    let plan =
        |bytes: &[u8]| kpack::fatbin::plan_host_only(bytes, marker).map_err(|e| e.to_string());
    if path.is_file() && kpack::wheel::is_wheel_path(path) {
        let w = kpack::wheel::Wheel::open(path).map_err(|e| e.to_string())?;
        let m = w
            .member(rel)
            .ok_or_else(|| format!("{rel}: not a member of {}", path.display()))?;
        let c = w
            .contents(m, &std::env::temp_dir())
            .map_err(|e| e.to_string())?;
        return plan(&c);
    }
    let m = kpack::fsutil::map_file(path).map_err(|e| e.to_string())?;
    plan(m.as_deref().unwrap_or_default())
}

/// Write `csv` to `kpack-<name>.csv` in `dir` (`kpack-<name>-2.csv` and on when
/// taken): staged, then placed without replacing anything.
fn export_file(
    dir: &Path,
    (name, ext): (&str, &str),
    text: &str,
) -> std::result::Result<PathBuf, String> {
    use std::io::Write;
    let mut staged = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| format!("{}: cannot write here: {e}", dir.display()))?;
    staged
        .write_all(text.as_bytes())
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    for i in 1..1000 {
        let file = if i == 1 {
            format!("kpack-{name}.{ext}")
        } else {
            format!("kpack-{name}-{i}.{ext}")
        };
        let path = dir.join(file);
        match staged.persist_noclobber(&path) {
            Ok(_) => return Ok(path),
            Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => staged = e.file,
            Err(e) => return Err(format!("{}: {}", path.display(), e.error)),
        }
    }
    Err(format!(
        "{}: kpack-{name}-*.{ext} are all taken",
        dir.display()
    ))
}

/// Start the background work an app asked for.
fn start(req: Request, root: &Path, tx: &Sender<AppEvent>, cancel: &kpack::event::CancelToken) {
    match req {
        Request::Export { name, ext, text } => {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let r = std::env::current_dir()
                    .map_err(|e| format!("the current directory: {e}"))
                    .and_then(|d| export_file(&d, (name, ext), &text));
                let _ = tx.send(AppEvent::Exported(r));
            });
        }
        Request::Pack(settings) if settings.wheel => {
            let (root, tx, cancel) = (root.to_path_buf(), tx.clone(), cancel.clone());
            std::thread::spawn(move || {
                let r = run_wheel_split(&root, &settings, &tx, &cancel);
                let _ = tx.send(AppEvent::WheelDone(Box::new(r)));
            });
        }
        Request::Pack(settings) => {
            let (root, tx, cancel) = (root.to_path_buf(), tx.clone(), cancel.clone());
            std::thread::spawn(move || {
                let r = run_pack(&root, &settings, &tx, &cancel);
                let _ = tx.send(AppEvent::PackDone(Box::new(r)));
            });
        }
        Request::Plan(selection) => {
            let (root, tx) = (root.to_path_buf(), tx.clone());
            std::thread::spawn(move || {
                let r = plan(&root, &selection);
                let _ = tx.send(AppEvent::Plan(selection, Box::new(r)));
            });
        }
        Request::Extract(at, which, dest) => {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let msg = at
                    .open()
                    .and_then(|a| {
                        a.extract_to(&dest, |k| {
                            which.as_ref().is_none_or(|w| {
                                w.iter()
                                    .any(|(key, arch)| *k.key == **key && *k.arch == **arch)
                            })
                        })
                    })
                    .map(|n| format!("extracted {n} code object(s) to {}", dest.display()))
                    .map_err(|e| format!("extract failed: {e}"));
                let _ = tx.send(AppEvent::ArchiveDone(msg));
            });
        }
        Request::VerifyArchive(at) => {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let msg = match at.open().map(|a| a.verify()) {
                    Ok(f) if f.is_empty() => {
                        Ok("verify: sound (every frame decodes to its size)".into())
                    }
                    Ok(f) => Err(format!("verify: {} fault(s): {}", f.len(), f.join("; "))),
                    Err(e) => Err(format!("verify: {e}")),
                };
                let _ = tx.send(AppEvent::ArchiveDone(msg));
            });
        }
        Request::OpenArchive(rel) => {
            let at = if kpack::wheel::is_wheel_path(root) {
                app::ArchiveAt::WheelMember(root.to_path_buf(), rel.clone())
            } else {
                app::ArchiveAt::File(file_in(root, &rel))
            };
            let tx = tx.clone();
            std::thread::spawn(move || {
                let r = at.open().map(|a| a.index).map_err(|e| e.to_string());
                let _ = tx.send(AppEvent::ArchiveOpened(rel, Box::new(r)));
            });
        }
        Request::Kernels(rel) => {
            let path = if rel.is_empty() {
                root.to_path_buf()
            } else {
                file_in(root, &rel)
            };
            let tx = tx.clone();
            std::thread::spawn(move || {
                let opts = kpack::kernels::KernelsOptions {
                    cache: true,
                    ..Default::default()
                };
                let r = kpack::kernels::list_kernels(&path, &opts).map_err(|e| e.to_string());
                let _ = tx.send(AppEvent::Kernels(rel, Box::new(r)));
            });
        }
        Request::ExtractCodeObjects {
            listed,
            wanted,
            dest,
        } => {
            let path = if listed.is_empty() {
                root.to_path_buf()
            } else {
                file_in(root, &listed)
            };
            let tx = tx.clone();
            std::thread::spawn(move || {
                let r = kpack::kernels::extract_code_objects(&path, &wanted, &dest)
                    .map(|n| {
                        format!(
                            "extracted {} to {}",
                            crate::text::count(n as u64, "code object", "code objects"),
                            dest.display()
                        )
                    })
                    .map_err(|e| format!("extract failed: {e}"));
                let _ = tx.send(AppEvent::Extracted(r));
            });
        }
        Request::Layout(rel) => {
            let path = file_in(root, &rel);
            let tx = tx.clone();
            std::thread::spawn(move || {
                let r = kpack::fsutil::map_file(&path)
                    .map_err(|e| e.to_string())
                    .and_then(|m| {
                        kpack::elf::rewrite::parse_layout(m.as_deref().unwrap_or_default())
                            .map_err(|e| e.to_string())
                    });
                let _ = tx.send(AppEvent::Layout(rel, Box::new(r)));
            });
        }
        Request::Preview { path: rel, group } => {
            let path = file_in(root, &rel);
            let tx = tx.clone();
            std::thread::spawn(move || {
                let marker = kpack::kpack::Marker {
                    kernel_name: rel.clone(),
                    // What a pack with the dialog's group writes (the preview shows
                    // the marker it would get).
                    kpack_search_paths: vec![format!(
                        "{}.kpack/{group}_@GFXARCH@.kpack",
                        "../".repeat(rel.matches('/').count())
                    )],
                };
                let r = preview_plan(&path, &rel, &marker);
                let _ = tx.send(AppEvent::Preview(rel, Box::new(r)));
            });
        }
    }
}

/// An archive the UI opens: its index, or why it cannot be read (shown in the UI,
/// as a damaged wheel is, rather than before it).
pub type OpenedArchive = Result<kpack::kpack::archive::ArchiveIndex, String>;

/// Open the UI on a tree or file (a `.kpack` opens the inspector).
pub fn run(path: PathBuf, archive: Option<OpenedArchive>) -> Result<()> {
    run_titled(path, archive, None)
}

/// [`run`], with the header naming the path `title` (the demo's temporary copy is
/// `demo`).
pub fn run_titled(
    path: PathBuf,
    archive: Option<OpenedArchive>,
    title: Option<String>,
) -> Result<()> {
    let (tx, rx) = channel::<AppEvent>();
    let is_archive = archive.is_some();
    let mut app = match archive {
        Some(Err(e)) => App::unreadable_archive(path.clone(), e),
        Some(Ok(index)) => App::new(path.clone(), Some(index)),
        None => App::new(path.clone(), None),
    };
    app.title = title;
    let state_file = state::file();
    if !is_archive {
        app.pending_restore = state_file.as_ref().and_then(|f| state::load(f, &path));
    }
    if !is_archive {
        let tx2 = tx.clone();
        let p = path.clone();
        std::thread::spawn(move || {
            let pending =
                std::sync::Arc::new(std::sync::Mutex::new(Vec::<kpack::scan::FileReport>::new()));
            let finished = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            // The tree fills in: every 300 ms the entries inspected so far become a
            // partial report and tree, built here, not on the drawing thread.
            let aggregator = {
                let (pending, finished, tx) = (pending.clone(), finished.clone(), tx2.clone());
                let root = p.display().to_string();
                std::thread::spawn(move || {
                    let mut all: Vec<kpack::scan::FileReport> = Vec::new();
                    let mut at: std::collections::HashMap<String, usize> =
                        std::collections::HashMap::new();
                    let mut wait = Duration::from_millis(40);
                    loop {
                        std::thread::park_timeout(wait);
                        wait = Duration::from_millis(300);
                        if finished.load(Ordering::SeqCst) {
                            break;
                        }
                        let new = pending.lock().map(|mut v| std::mem::take(&mut *v));
                        match new {
                            Ok(v) if !v.is_empty() => {
                                // A report replaces the walk's placeholder of its path.
                                for r in v {
                                    match at.get(&r.path) {
                                        Some(&i) => all[i] = r,
                                        None => {
                                            at.insert(r.path.clone(), all.len());
                                            all.push(r);
                                        }
                                    }
                                }
                            }
                            _ => continue,
                        }
                        let report = kpack::scan::partial_report(&root, all.clone());
                        let tree = tree::Tree::build(&report);
                        if tx
                            .send(AppEvent::Partial(Box::new((report, tree))))
                            .is_err()
                        {
                            break;
                        }
                    }
                })
            };
            let sink = ScanForward {
                tx: tx2.clone(),
                done: AtomicU64::new(0),
                total: AtomicU64::new(0),
                last: std::sync::Mutex::new(Instant::now()),
                pending,
            };
            let r = kpack::scan::scan(&p, &kpack::scan::ScanOptions::default(), &sink)
                .map_err(|e| e.to_string());
            finished.store(true, Ordering::SeqCst);
            aggregator.thread().unpark();
            let _ = aggregator.join();
            let _ = tx2.send(AppEvent::ScanDone(Box::new(r)));
        });
    }
    let tx_in = tx.clone();
    let gate = std::sync::Arc::new(external::InputGate::default());
    let reader_gate = gate.clone();
    std::thread::spawn(move || {
        loop {
            // Stopped while a pager or an editor has the terminal.
            reader_gate.wait_open();
            let ev = match event::poll(Duration::from_millis(250)) {
                Ok(true) => match event::read() {
                    Ok(Event::Key(k)) if k.kind == KeyEventKind::Press => AppEvent::Key(k),
                    Ok(Event::Mouse(m)) => AppEvent::Mouse(m),
                    Ok(Event::Resize(..)) => AppEvent::Resize,
                    Ok(_) => continue,
                    Err(_) => break,
                },
                Ok(false) => AppEvent::Tick,
                Err(_) => break,
            };
            if tx_in.send(ev).is_err() {
                break;
            }
        }
    });
    let theme = widgets::Theme::from_env();
    let mut pack_cancel = kpack::event::CancelToken::new();
    with_terminal(|terminal| {
        loop {
            terminal.draw(|f| ui::draw(f, &app, theme))?;
            let Ok(ev) = rx.recv() else { break };
            app.update(ev);
            // Drain what queued up meanwhile: one frame per batch.
            while let Ok(ev) = rx.try_recv() {
                app.update(ev);
            }
            if let Some(ext) = app.external.take() {
                let r = hand_over(terminal, &gate, &ext);
                if let Err(e) = &r {
                    app.log.push(messages::Level::Error, ext.var, e);
                }
                app.flash = r.err();
                terminal.draw(|f| ui::draw(f, &app, theme))?;
            }
            // OSC 52: the terminal (or tmux, or the ssh client's terminal) puts it on
            // the clipboard.
            if let Some(text) = app.copy.take() {
                let _ = ratatui::crossterm::execute!(
                    terminal.backend_mut(),
                    crossterm::clipboard::CopyToClipboard::to_clipboard_from(text)
                );
            }
            for r in std::mem::take(&mut app.requests) {
                if matches!(r, Request::Pack(_)) {
                    pack_cancel = kpack::event::CancelToken::new();
                }
                start(r, &app.root, &tx, &pack_cancel);
            }
            if std::mem::take(&mut app.packing.cancel) {
                pack_cancel.cancel();
            }
            if app.quit {
                // A running pack is cancelled and waited for, so that its staging
                // directory is removed before we exit, saying so meanwhile; the exit
                // status is then the cancelled one.
                if app.packing() {
                    pack_cancel.cancel();
                    app.packing.cancelling = true;
                    app.view = app::View::Pack;
                    terminal.draw(|f| ui::draw(f, &app, theme))?;
                    let until = Instant::now() + Duration::from_secs(60);
                    while let Some(left) = until.checked_duration_since(Instant::now()) {
                        match rx.recv_timeout(left) {
                            Ok(AppEvent::PackDone(_) | AppEvent::WheelDone(_)) | Err(_) => break,
                            Ok(_) => {}
                        }
                    }
                    return Err(kpack::Error::Cancelled.into());
                }
                break;
            }
        }
        Ok(())
    })?;
    // Remembered for the next run of this path (a failure to write is not the
    // run's failure: the state is a convenience).
    // The demo's tree is a temporary copy: nothing to come back to.
    let demo = app.title.is_some();
    if let (Some(f), Some(r), false) = (&state_file, app.remembered(), is_archive || demo) {
        let _ = state::save(f, &path, r);
    }
    Ok(())
}

/// Give the terminal to a pager or an editor until it exits: the input thread stops
/// reading first, the screen and raw mode are restored, then set up again.
fn hand_over(
    terminal: &mut ratatui::DefaultTerminal,
    gate: &external::InputGate,
    ext: &external::External,
) -> std::result::Result<(), String> {
    gate.pause();
    let _ = ratatui::crossterm::execute!(
        std::io::stdout(),
        ratatui::crossterm::event::DisableMouseCapture
    );
    ratatui::restore();
    let r = external::run(ext);
    *terminal = ratatui::init();
    let _ = ratatui::crossterm::execute!(
        std::io::stdout(),
        ratatui::crossterm::event::EnableMouseCapture
    );
    let _ = terminal.clear();
    gate.resume();
    r
}

/// Run `body` on the terminal in raw mode with mouse capture; the terminal is restored
/// whatever `body` returns.
fn with_terminal(body: impl FnOnce(&mut ratatui::DefaultTerminal) -> Result<()>) -> Result<()> {
    let mut terminal = ratatui::init();
    let _ = ratatui::crossterm::execute!(
        std::io::stdout(),
        ratatui::crossterm::event::EnableMouseCapture
    );
    crate::sigbus::TUI_ACTIVE.store(true, std::sync::atomic::Ordering::Relaxed);
    let result = body(&mut terminal);
    crate::sigbus::TUI_ACTIVE.store(false, std::sync::atomic::Ordering::Relaxed);
    let _ = ratatui::crossterm::execute!(
        std::io::stdout(),
        ratatui::crossterm::event::DisableMouseCapture
    );
    ratatui::restore();
    result
}

/// The diff view on a computed comparison.
pub fn run_diff(report: kpack::diff::DiffReport) -> Result<()> {
    let mut v = diffview::DiffView::new(report);
    let theme = widgets::Theme::from_env();
    with_terminal(|terminal| {
        while !v.quit {
            terminal.draw(|f| diffview::draw(f, &v, theme))?;
            if !event::poll(Duration::from_millis(250))? {
                continue;
            }
            match event::read()? {
                Event::Key(k) if k.kind == event::KeyEventKind::Press => {
                    if k.modifiers.contains(event::KeyModifiers::CONTROL)
                        && k.code == event::KeyCode::Char('c')
                    {
                        break;
                    }
                    v.key(k);
                }
                Event::Mouse(m) => v.mouse(m),
                _ => {}
            }
        }
        Ok(())
    })
}

/// Open the timeline on a trace file; with `follow`, keep reading what a running
/// build appends. The file is read on a background thread.
pub fn run_timeline(path: PathBuf, follow: bool) -> Result<()> {
    use timeline::{Timeline, TimelineEvent};
    let (tx, rx) = channel::<TimelineEvent>();
    let p = path.clone();
    std::thread::spawn(move || {
        let mut f = kpack::trace::follow::Follower::new(&p);
        if !follow {
            let ev = match f.read_to_end() {
                Ok(t) => TimelineEvent::Update(Box::new(t), false),
                Err(e) => TimelineEvent::FollowError(e.to_string()),
            };
            let _ = tx.send(ev);
            return;
        }
        loop {
            let ev = match f.poll() {
                Ok(Some(u)) => Some(TimelineEvent::Update(Box::new(u.trace), u.restarted)),
                Ok(None) => None,
                Err(e) => Some(TimelineEvent::FollowError(e.to_string())),
            };
            if let Some(ev) = ev
                && tx.send(ev).is_err()
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    });
    let mut t = Timeline::new(path, kpack::trace::Trace::default(), follow);
    let theme = widgets::Theme::from_env();
    with_terminal(|terminal| {
        let mut last = Instant::now();
        while !t.quit {
            terminal.draw(|f| timeline_draw::draw(f, &t, theme))?;
            let playing = t.replay.is_some_and(|r| r.playing);
            let wait = Duration::from_millis(if playing { 33 } else { 150 });
            if event::poll(wait)? {
                match event::read()? {
                    Event::Key(k) if k.kind == KeyEventKind::Press => {
                        t.update(TimelineEvent::Key(k))
                    }
                    Event::Mouse(m) => t.update(TimelineEvent::Mouse(m)),
                    _ => {}
                }
            }
            while let Ok(ev) = rx.try_recv() {
                t.update(ev);
            }
            let now = Instant::now();
            t.update(TimelineEvent::Tick(
                now.duration_since(last).as_millis() as u64
            ));
            last = now;
        }
        Ok(())
    })
}
