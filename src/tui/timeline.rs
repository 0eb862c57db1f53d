//! The compile-trace timeline: lanes as ninjatracing assigns them, a zoomable time
//! axis, colour per kind (device per arch, bundle, host, other), the selected job's
//! details, the analysis in a side pane, replay at 1×-100×, and `--follow` of a trace
//! a running build is still writing.
//!
//! State and drawing only; the file is read on a background thread
//! ([`kpack::trace::follow::Follower`]) and arrives as [`TimelineEvent::Update`].
//! Drawing looks at visible cells only: one binary search per lane and column.

use kpack::trace::analysis::{self, BuildAnalysis};
use kpack::trace::{Build, Job, JobKind, Trace};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseEvent, MouseEventKind};
use ratatui::layout::Rect;
use ratatui::style::Color;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Replay speeds offered.
pub const SPEEDS: [u32; 7] = [1, 2, 5, 10, 20, 50, 100];

/// Input and data arriving at the timeline.
#[derive(Debug)]
pub enum TimelineEvent {
    /// A key.
    Key(KeyEvent),
    /// The mouse.
    Mouse(MouseEvent),
    /// Real time passed (ms), for replay.
    Tick(u64),
    /// The followed file changed.
    Update(Box<Trace>, bool),
    /// The followed file cannot be read.
    FollowError(String),
}

/// Lanes and analysis of one build, computed once per build (not per frame).
pub struct Model {
    /// Lane of each job.
    pub lane_of: Vec<usize>,
    /// Jobs of each lane, by start (they never overlap, so also by end).
    pub lanes: Vec<Vec<usize>>,
    /// The analysis.
    pub analysis: BuildAnalysis,
    /// Colour slot per arch.
    pub arch_slot: BTreeMap<String, usize>,
    /// Last end.
    pub wall: i64,
}

impl Model {
    /// Build the model of a build.
    pub fn new(build: &Build) -> Model {
        let lane_of = analysis::lanes(&build.jobs);
        let n = lane_of.iter().map(|l| l + 1).max().unwrap_or(0);
        let mut lanes = vec![Vec::new(); n];
        for (i, l) in lane_of.iter().enumerate() {
            lanes[*l].push(i);
        }
        for l in &mut lanes {
            l.sort_by_key(|&i| (build.jobs[i].start, build.jobs[i].end));
        }
        let mut arch_slot = BTreeMap::new();
        for j in &build.jobs {
            if let Some(arch) = build.arch(j) {
                let next = arch_slot.len();
                arch_slot.entry(arch.to_string()).or_insert(next);
            }
        }
        Model {
            lane_of,
            lanes,
            analysis: analysis::analyse(build),
            arch_slot,
            wall: build.jobs.iter().map(|j| j.end).max().unwrap_or(0),
        }
    }
}

/// Replay state.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Replay {
    /// Position, ms from the build start.
    pub pos: f64,
    /// Index into [`SPEEDS`].
    pub speed: usize,
    /// Playing or paused.
    pub playing: bool,
}

/// Follow state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FollowState {
    /// Times the file was truncated or replaced, or a new build began.
    pub restarts: u64,
    /// Last problem reading the file.
    pub error: Option<String>,
}

/// The timeline's whole state.
pub struct Timeline {
    /// The file shown.
    pub path: PathBuf,
    /// The trace.
    pub trace: Trace,
    /// Build shown.
    pub build: usize,
    /// Its model.
    pub model: Model,
    /// Left edge of the view, ms.
    pub view_start: f64,
    /// Width of the view, ms.
    pub view_span: f64,
    /// First lane shown.
    pub lane_scroll: usize,
    /// Selected job (index into the build's jobs).
    pub selected: Option<usize>,
    /// Replay, when on.
    pub replay: Option<Replay>,
    /// Follow, when on.
    pub follow: Option<FollowState>,
    /// Summary pane shown.
    pub summary: bool,
    /// Help overlay shown.
    pub help: bool,
    /// Quit requested.
    pub quit: bool,
    /// Where the lanes were drawn last (for mouse clicks).
    pub last_lanes_area: std::cell::Cell<Rect>,
    /// Search by name and the target filter.
    pub find: super::timeline_find::Find,
    /// The trace's bad lines with their numbers (`!` shows them).
    pub log: super::messages::Log,
}

const EMPTY: &Build = &Build::EMPTY;

impl Timeline {
    /// Open a parsed trace (the last build shown).
    pub fn new(path: PathBuf, trace: Trace, follow: bool) -> Timeline {
        let build = trace.builds.len().saturating_sub(1);
        let model = Model::new(trace.builds.get(build).unwrap_or(EMPTY));
        let mut t = Timeline {
            path,
            trace,
            build,
            model,
            view_start: 0.0,
            view_span: 1.0,
            lane_scroll: 0,
            selected: None,
            replay: None,
            follow: follow.then(FollowState::default),
            summary: true,
            help: false,
            quit: false,
            last_lanes_area: std::cell::Cell::new(Rect::default()),
            find: Default::default(),
            log: Default::default(),
        };
        t.fit();
        t.refresh_log();
        t
    }

    /// The log holds the trace's bad lines as last read (a followed trace grows).
    fn refresh_log(&mut self) {
        use super::messages::Level;
        self.log.entries.clear();
        for d in &self.trace.diagnostics {
            self.log
                .push(Level::Warning, format!("line {}", d.line), &d.message);
        }
        let more = self
            .trace
            .diagnostic_count
            .saturating_sub(self.trace.diagnostics.len() as u64);
        if more > 0 {
            self.log.push(
                Level::Warning,
                "",
                format!(
                    "{more} more bad lines (the first {} are kept)",
                    kpack::trace::MAX_DIAGNOSTICS
                ),
            );
        }
    }

    /// The build shown.
    pub fn current(&self) -> &Build {
        self.trace.builds.get(self.build).unwrap_or(EMPTY)
    }

    fn set_build(&mut self, b: usize) {
        self.build = b;
        self.model = Model::new(self.current());
        self.selected = None;
        self.lane_scroll = 0;
        self.fit();
        if let Some(r) = &mut self.replay {
            r.pos = 0.0;
        }
    }

    /// Show the whole build.
    pub fn fit(&mut self) {
        self.view_start = 0.0;
        self.view_span = (self.model.wall as f64 * 1.02).max(10.0);
    }

    fn zoom(&mut self, factor: f64) {
        let centre = match self.selected.and_then(|i| self.current().jobs.get(i)) {
            Some(j)
                if (j.start as f64) >= self.view_start
                    && (j.start as f64) <= self.view_start + self.view_span =>
            {
                (j.start + j.end) as f64 / 2.0
            }
            _ => self.view_start + self.view_span / 2.0,
        };
        let span = (self.view_span * factor).clamp(1.0, (self.model.wall as f64 * 4.0).max(10.0));
        self.view_start = (centre - span / 2.0).max(0.0);
        self.view_span = span;
    }

    fn pan(&mut self, frac: f64) {
        let max = (self.model.wall as f64 - self.view_span / 2.0).max(0.0);
        self.view_start = (self.view_start + self.view_span * frac).clamp(0.0, max);
    }

    /// Move the selection to the next/previous job by start time.
    fn step(&mut self, forward: bool) {
        let n = self.current().jobs.len();
        if n == 0 {
            return;
        }
        let next = match (self.selected, forward) {
            (None, _) => 0,
            (Some(i), true) => (i + 1).min(n - 1),
            (Some(i), false) => i.saturating_sub(1),
        };
        self.select(next);
    }

    fn select(&mut self, i: usize) {
        self.selected = Some(i);
        let Some(j) = self.current().jobs.get(i) else {
            return;
        };
        let (s, e) = (j.start as f64, j.end as f64);
        if s < self.view_start || e > self.view_start + self.view_span {
            self.view_start = (s - self.view_span * 0.1).max(0.0);
        }
        let lane = self.model.lane_of[i];
        if lane < self.lane_scroll {
            self.lane_scroll = lane;
        }
    }

    /// Select a job in the lane above or below, near the current time.
    fn lane_step(&mut self, down: bool) {
        let nl = self.model.lanes.len();
        if nl == 0 {
            return;
        }
        let (lane, t) = match self.selected {
            Some(i) => {
                let j = &self.current().jobs[i];
                (self.model.lane_of[i], (j.start + j.end) / 2)
            }
            None => (0, (self.view_start + self.view_span / 2.0) as i64),
        };
        let target = if down {
            (lane + 1).min(nl - 1)
        } else {
            lane.saturating_sub(1)
        };
        let jobs = &self.current().jobs;
        let l = &self.model.lanes[target];
        if let Some(&best) = l.iter().min_by_key(|&&i| {
            let j = &jobs[i];
            if t < j.start {
                j.start - t
            } else if t > j.end {
                t - j.end
            } else {
                0
            }
        }) {
            self.select(best);
        }
        if target < self.lane_scroll {
            self.lane_scroll = target;
        }
        let rows = self.last_lanes_area.get().height.saturating_sub(1) as usize;
        if rows > 0 && target >= self.lane_scroll + rows {
            self.lane_scroll = target + 1 - rows;
        }
    }

    /// The replay position, if replaying.
    pub fn replay_pos(&self) -> Option<i64> {
        self.replay.map(|r| r.pos as i64)
    }

    /// Jobs running, done and in all at the replay position (or at the end).
    pub fn counters(&self) -> (usize, usize, usize) {
        let jobs = &self.current().jobs;
        let pos = self.replay_pos().unwrap_or(i64::MAX);
        let running = jobs
            .iter()
            .filter(|j| j.start <= pos && pos < j.end)
            .count();
        let done = jobs.iter().filter(|j| j.end <= pos).count();
        (running, done, jobs.len())
    }

    /// Handle one event.
    pub fn update(&mut self, ev: TimelineEvent) {
        match ev {
            TimelineEvent::Key(k) => self.key(k),
            TimelineEvent::Mouse(m) => self.mouse(m),
            TimelineEvent::Tick(ms) => {
                let wall = self.model.wall as f64;
                if let Some(r) = &mut self.replay
                    && r.playing
                {
                    r.pos += ms as f64 * SPEEDS[r.speed] as f64;
                    if r.pos >= wall {
                        r.pos = wall;
                        r.playing = false;
                    }
                    // Keep the play head in view when zoomed in (never past the end).
                    if r.pos > self.view_start + self.view_span * 0.9
                        && self.view_start + self.view_span < wall
                    {
                        self.view_start = (r.pos - self.view_span * 0.1)
                            .min(wall - self.view_span * 0.95)
                            .max(0.0);
                    }
                }
            }
            TimelineEvent::Update(trace, restarted) => {
                let was_last = self.build + 1 >= self.trace.builds.len();
                let old_builds = self.trace.builds.len();
                let fitted = self.view_start == 0.0
                    && (self.view_span - (self.model.wall as f64 * 1.02).max(10.0)).abs() < 1.0;
                self.trace = *trace;
                self.refresh_log();
                let new_build = self.trace.builds.len() > old_builds && old_builds > 0;
                if let Some(f) = &mut self.follow {
                    f.error = None;
                    if restarted || new_build {
                        f.restarts += 1;
                    }
                }
                if restarted || was_last || self.build >= self.trace.builds.len() {
                    let b = self.trace.builds.len().saturating_sub(1);
                    if b != self.build || restarted {
                        self.set_build(b);
                    } else {
                        self.model = Model::new(self.current());
                        if fitted {
                            self.fit();
                        }
                    }
                }
            }
            TimelineEvent::FollowError(e) => {
                if let Some(f) = &mut self.follow {
                    f.error = Some(e);
                }
            }
        }
    }

    fn key(&mut self, k: KeyEvent) {
        if self.help {
            self.help = false;
            return;
        }
        if self.log.open {
            match k.code {
                KeyCode::Esc | KeyCode::Char('!' | 'q') => self.log.toggle(),
                KeyCode::Down | KeyCode::Char('j') => self.log.scroll_by(1),
                KeyCode::Up | KeyCode::Char('k') => self.log.scroll_by(-1),
                KeyCode::PageDown => self.log.scroll_by(10),
                KeyCode::PageUp => self.log.scroll_by(-10),
                _ => {}
            }
            return;
        }
        if self.find.typing {
            match k.code {
                KeyCode::Enter => {
                    self.find.typing = false;
                    if let Some(i) = self.find.step(self.current(), self.selected, true) {
                        self.select(i);
                    }
                }
                KeyCode::Esc => {
                    self.find.typing = false;
                    self.find.search.clear();
                }
                KeyCode::Backspace => {
                    self.find.search.pop();
                }
                KeyCode::Char(c) => self.find.search.push(c),
                _ => {}
            }
            return;
        }
        let shift = k.modifiers.contains(KeyModifiers::SHIFT);
        match k.code {
            KeyCode::Char('q') => self.quit = true,
            KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => self.quit = true,
            KeyCode::Char('?') => self.help = true,
            KeyCode::Char('!') => self.log.toggle(),
            KeyCode::Left | KeyCode::Char('h') => self.pan(if shift { -1.0 } else { -0.125 }),
            KeyCode::Right | KeyCode::Char('l') => self.pan(if shift { 1.0 } else { 0.125 }),
            KeyCode::Char('H') => self.pan(-1.0),
            KeyCode::Char('L') => self.pan(1.0),
            KeyCode::Char('+') | KeyCode::Char('=') => self.zoom(0.5),
            KeyCode::Char('-') | KeyCode::Char('_') => self.zoom(2.0),
            KeyCode::Char('0') | KeyCode::Home => self.fit(),
            KeyCode::Up | KeyCode::Char('k') => self.lane_step(false),
            KeyCode::Down | KeyCode::Char('j') => self.lane_step(true),
            KeyCode::Tab => self.step(true),
            KeyCode::BackTab => self.step(false),
            KeyCode::Enter => {
                if let Some((s, e)) = self
                    .selected
                    .and_then(|i| self.current().jobs.get(i))
                    .map(|j| (j.start, j.end))
                {
                    let d = (e - s).max(1) as f64;
                    self.view_span = d * 1.5;
                    self.view_start = (s as f64 - d * 0.25).max(0.0);
                }
            }
            KeyCode::Char('[') if self.build > 0 => self.set_build(self.build - 1),
            KeyCode::Char(']') if self.build + 1 < self.trace.builds.len() => {
                self.set_build(self.build + 1)
            }
            KeyCode::Char(' ') => match &mut self.replay {
                Some(r) => {
                    if !r.playing && r.pos >= self.model.wall as f64 {
                        r.pos = 0.0;
                    }
                    r.playing = !r.playing;
                }
                None => {
                    self.replay = Some(Replay {
                        pos: 0.0,
                        speed: 3,
                        playing: true,
                    });
                    self.fit();
                }
            },
            KeyCode::Char('r') => {
                let speed = self.replay.map_or(3, |r| r.speed);
                self.replay = Some(Replay {
                    pos: 0.0,
                    speed,
                    playing: true,
                });
                self.fit();
            }
            KeyCode::Char('>') | KeyCode::Char('.') => {
                if let Some(r) = &mut self.replay {
                    r.speed = (r.speed + 1).min(SPEEDS.len() - 1);
                }
            }
            KeyCode::Char('<') | KeyCode::Char(',') => {
                if let Some(r) = &mut self.replay {
                    r.speed = r.speed.saturating_sub(1);
                }
            }
            KeyCode::Esc if self.find.active() => self.find = Default::default(),
            KeyCode::Esc => {
                if self.replay.is_some() {
                    self.replay = None;
                } else {
                    self.selected = None;
                }
            }
            KeyCode::Char('s') => self.summary = !self.summary,
            KeyCode::Char('/') => {
                self.find.typing = true;
                self.find.search.clear();
            }
            KeyCode::Char(c @ ('n' | 'N')) if self.find.active() => {
                if let Some(i) = self.find.step(self.current(), self.selected, c == 'n') {
                    self.select(i);
                }
            }
            KeyCode::Char('t') => {
                let b = self.trace.builds.get(self.build).unwrap_or(EMPTY);
                self.find.next_target(b);
                // The selection follows the narrowing: a job that no longer matches
                // gives way to the first that does (trial 31).
                let b = self.current();
                if self
                    .selected
                    .is_some_and(|i| !self.find.matches(b, &b.jobs[i]))
                {
                    match self.find.step(b, None, true) {
                        Some(i) => self.select(i),
                        None => self.selected = None,
                    }
                }
            }
            KeyCode::PageDown => {
                let rows = self.last_lanes_area.get().height.saturating_sub(1) as usize;
                let max = self.model.lanes.len().saturating_sub(1);
                self.lane_scroll = (self.lane_scroll + rows.max(1)).min(max);
            }
            KeyCode::PageUp => {
                let rows = self.last_lanes_area.get().height.saturating_sub(1) as usize;
                self.lane_scroll = self.lane_scroll.saturating_sub(rows.max(1));
            }
            _ => {}
        }
    }

    fn mouse(&mut self, m: MouseEvent) {
        match m.kind {
            MouseEventKind::ScrollUp => self.zoom(0.8),
            MouseEventKind::ScrollDown => self.zoom(1.25),
            MouseEventKind::Down(_) => {
                let a = self.last_lanes_area.get();
                if m.column < a.x + LABEL_W
                    || m.column >= a.x + a.width
                    || m.row <= a.y
                    || m.row >= a.y + a.height
                {
                    return;
                }
                let lane = self.lane_scroll + (m.row - a.y - 1) as usize;
                let x = (m.column - a.x - LABEL_W) as usize;
                let w = a.width.saturating_sub(LABEL_W) as usize;
                if let Some(i) = self.job_at(lane, x, w) {
                    self.select(i);
                }
            }
            _ => {}
        }
    }

    /// Time range of column `x` of `w`.
    fn cell_range(&self, x: usize, w: usize) -> (i64, i64) {
        let per = self.view_span / w.max(1) as f64;
        let a = self.view_start + per * x as f64;
        (a.floor() as i64, (a + per).ceil() as i64)
    }

    /// The job covering column `x` (of `w`) in `lane`, as replay shows it.
    pub fn job_at(&self, lane: usize, x: usize, w: usize) -> Option<usize> {
        let (a, b) = self.cell_range(x, w);
        let jobs = &self.current().jobs;
        let l = self.model.lanes.get(lane)?;
        // First job whose end is after the cell's start (ends are sorted in a lane).
        let k = l.partition_point(|&i| jobs[i].end <= a);
        let &i = l.get(k)?;
        let j = &jobs[i];
        let end = match self.replay_pos() {
            Some(p) if j.start > p => return None,
            Some(p) => j.end.min(p),
            None => j.end,
        };
        (j.start < b && end > a).then_some(i)
    }
}

/// Width of the lane labels.
pub(super) const LABEL_W: u16 = 4;

pub(crate) fn arch_colour(t: &Timeline, arch: &str) -> Color {
    const ARCH: [Color; 8] = [
        Color::LightBlue,
        Color::LightMagenta,
        Color::LightCyan,
        Color::Blue,
        Color::Magenta,
        Color::Cyan,
        Color::LightRed,
        Color::Red,
    ];
    ARCH[t.model.arch_slot.get(arch).copied().unwrap_or(0) % ARCH.len()]
}

pub(crate) fn kind_colour(t: &Timeline, j: &Job) -> Color {
    match j.kind {
        JobKind::Device => arch_colour(t, t.current().arch(j).unwrap_or_default()),
        JobKind::Bundle => Color::Yellow,
        JobKind::Host => Color::LightGreen,
        JobKind::Other => Color::Gray,
    }
}

pub(crate) fn kind_char(k: JobKind) -> char {
    match k {
        JobKind::Device => '█',
        JobKind::Bundle => '▒',
        JobKind::Host => '▓',
        JobKind::Other => '░',
    }
}

/// Short label of a job inside its bar.
pub(crate) fn short_name(b: &Build, j: &Job) -> String {
    let o = tail2(b.object(j).unwrap_or_default());
    match j.kind {
        JobKind::Device => format!("{o} {}", b.arch(j).unwrap_or_default()),
        JobKind::Bundle => format!("{o} bundle"),
        JobKind::Host => format!("{o} host"),
        JobKind::Other => tail2(b.name(j)).to_string(),
    }
}

/// The file name with its directory (`src/a/file.o` → `a/file.o`): a name alone is
/// ambiguous in trees with one file name in many directories.
fn tail2(p: &str) -> &str {
    match p.rmatch_indices('/').nth(1) {
        Some((i, _)) => &p[i + 1..],
        None => p,
    }
}

pub(crate) fn base(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

/// `1.2 s`, `340 ms`, `2 m 05 s`, `27 h 49 m`, `3 d 04 h`.
pub fn dur(ms: i64) -> String {
    if ms >= 86_400_000 {
        format!("{} d {:02} h", ms / 86_400_000, (ms / 3_600_000) % 24)
    } else if ms >= 3_600_000 {
        format!("{} h {:02} m", ms / 3_600_000, (ms / 60_000) % 60)
    } else if ms >= 120_000 {
        format!("{} m {:02} s", ms / 60_000, (ms / 1000) % 60)
    } else if ms >= 10_000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else if ms >= 1000 {
        format!("{:.2} s", ms as f64 / 1000.0)
    } else {
        format!("{ms} ms")
    }
}
