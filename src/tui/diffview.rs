//! The diff view (`kpack-tui diff OLD NEW` in a terminal): the per-target deltas as
//! bars, the files and the kernels that changed, largest change first, growth red
//! and shrinkage green; Tab cycles the tables, `/` filters, `s` sorts by name, Enter
//! drills down (a file → its targets → their kernels; a target → its kernels),
//! Backspace goes back up, `?` lists the keys.

use super::widgets::Theme;
use crate::text::{signed, size};
use kpack::diff::{Change, DiffReport};
use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};

/// The tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// Per target.
    Targets,
    /// Files.
    Files,
    /// Kernels.
    Kernels,
}

/// The view's state.
#[derive(Debug, Clone)]
pub struct DiffView {
    /// The comparison.
    pub report: DiffReport,
    /// The table shown.
    pub section: Section,
    /// Selected row.
    pub cursor: usize,
    /// Only rows containing this (path, name or target).
    pub filter: String,
    /// Typing the filter.
    pub filtering: bool,
    /// Rows by name instead of by change.
    pub by_name: bool,
    /// Drilled-down levels, outermost first.
    pub scope: Vec<Scope>,
    /// The key help is shown.
    pub help: bool,
    /// Leave.
    pub quit: bool,
    /// Where the last frame drew the rows (first row's area) and which row was
    /// first, for the mouse.
    pub drawn: std::cell::Cell<(ratatui::layout::Rect, usize)>,
}

/// A drill-down level.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// One file: its targets.
    File(String),
    /// One target: its kernels (of one file, when inside a file).
    Target(String),
}

/// What a row stands for (to drill into).
#[derive(Debug, Clone, PartialEq, Eq)]
enum RowId {
    Target(String),
    File(String),
    Kernel,
}

fn tone(old: u64, new: u64, theme: Theme) -> Style {
    match new.cmp(&old) {
        std::cmp::Ordering::Greater => theme.fg(Color::LightRed),
        std::cmp::Ordering::Less => theme.fg(Color::LightGreen),
        std::cmp::Ordering::Equal => Style::new(),
    }
}

impl DiffView {
    /// A view on a report.
    pub fn new(report: DiffReport) -> DiffView {
        DiffView {
            report,
            section: Section::Targets,
            cursor: 0,
            filter: String::new(),
            filtering: false,
            by_name: false,
            scope: Vec::new(),
            help: false,
            quit: false,
            drawn: Default::default(),
        }
    }

    /// The file and target the view is narrowed to.
    fn narrowed(&self) -> (Option<&str>, Option<&str>) {
        let mut file = None;
        let mut target = None;
        for s in &self.scope {
            match s {
                Scope::File(f) => file = Some(f.as_str()),
                Scope::Target(t) => target = Some(t.as_str()),
            }
        }
        (file, target)
    }

    /// Breadcrumbs of the scope (`Files › lib/libk.so › gfx90a`).
    pub fn crumbs(&self) -> String {
        self.scope
            .iter()
            .map(|s| match s {
                Scope::File(f) | Scope::Target(f) => f.as_str(),
            })
            .collect::<Vec<_>>()
            .join(" › ")
    }

    /// Lines of the current table.
    fn lines(&self, theme: Theme, bar_w: usize) -> Vec<Line<'static>> {
        self.entries(theme, bar_w)
            .into_iter()
            .map(|(_, l)| l)
            .collect()
    }

    fn bar_row(
        label: &str,
        old: u64,
        new: u64,
        max: u64,
        bar_w: usize,
        theme: Theme,
    ) -> Line<'static> {
        let d = (new as i64 - old as i64).unsigned_abs();
        let n = ((d as u128 * bar_w as u128) / max.max(1) as u128) as usize;
        Line::from(vec![
            Span::raw(format!(
                "{:<16} {:>11} → {:>11} {:>12} {:>7} ",
                label,
                size(old),
                size(new),
                signed(old, new),
                crate::text::delta_pct(old, new)
            )),
            Span::styled(
                "█".repeat(if d > 0 { n.max(1) } else { 0 }),
                tone(old, new, theme),
            ),
        ])
    }

    /// Rows of the current table, each with what it stands for.
    fn entries(&self, theme: Theme, bar_w: usize) -> Vec<(RowId, Line<'static>)> {
        let f = self.filter.as_str();
        let r = &self.report;
        let (file, target) = self.narrowed();
        // Inside a file and not yet a target: the file's targets.
        if let (Some(p), None) = (file, target) {
            let Some(fd) = r.files.iter().find(|x| x.path == p) else {
                return Vec::new();
            };
            let max = fd
                .targets
                .iter()
                .map(|t| (t.new_bytes as i64 - t.old_bytes as i64).unsigned_abs())
                .max()
                .unwrap_or(1);
            let mut rows: Vec<_> = fd.targets.iter().filter(|t| t.target.contains(f)).collect();
            if self.by_name {
                rows.sort_by(|a, b| kpack::natural::target_cmp(&a.target, &b.target));
            } else {
                rows.sort_by_key(|t| {
                    std::cmp::Reverse((t.new_bytes as i64 - t.old_bytes as i64).unsigned_abs())
                });
            }
            return rows
                .into_iter()
                .map(|t| {
                    (
                        RowId::Target(t.target.to_string()),
                        Self::bar_row(&t.target, t.old_bytes, t.new_bytes, max, bar_w, theme),
                    )
                })
                .collect();
        }
        match self.shown() {
            Section::Targets => {
                let max = r
                    .targets
                    .iter()
                    .map(|t| (t.new_bytes as i64 - t.old_bytes as i64).unsigned_abs())
                    .max()
                    .unwrap_or(1)
                    .max(1);
                let mut rows: Vec<_> = r.targets.iter().filter(|t| t.target.contains(f)).collect();
                // As the tab bar says: largest change first (trial 24: they were in
                // target order), or by target in processor order.
                if self.by_name {
                    rows.sort_by(|a, b| kpack::natural::target_cmp(&a.target, &b.target));
                } else {
                    rows.sort_by_key(|t| {
                        std::cmp::Reverse((t.new_bytes as i64 - t.old_bytes as i64).unsigned_abs())
                    });
                }
                rows.into_iter()
                    .map(|t| {
                        (
                            RowId::Target(t.target.clone()),
                            Self::bar_row(&t.target, t.old_bytes, t.new_bytes, max, bar_w, theme),
                        )
                    })
                    .collect()
            }
            Section::Files => {
                let mut rows: Vec<_> = r
                    .files
                    .iter()
                    .filter(|x| {
                        x.path.contains(f) || x.old_path.as_deref().is_some_and(|p| p.contains(f))
                    })
                    .collect();
                if self.by_name {
                    rows.sort_by(|a, b| a.path.cmp(&b.path));
                }
                rows.into_iter()
                    .map(|x| {
                        let mark = match x.change {
                            Change::Added => '+',
                            Change::Removed => '-',
                            Change::Grown => '>',
                            Change::Shrunk => '<',
                            Change::Same => '=',
                        };
                        let was = x
                            .old_path
                            .as_deref()
                            .map(|p| format!(" (was {p})"))
                            .unwrap_or_default();
                        let (o, n) = (x.old_size + x.old_device_raw, x.new_size + x.new_device_raw);
                        let line = Line::from(vec![
                            Span::styled(
                                format!(
                                    "{mark} {:>11} {:>11}  ",
                                    signed(x.old_size, x.new_size),
                                    signed(x.old_device_raw, x.new_device_raw)
                                ),
                                tone(o, n, theme),
                            ),
                            Span::raw(format!("{}{was}", x.path)),
                        ]);
                        (RowId::File(x.path.clone()), line)
                    })
                    .collect()
            }
            Section::Kernels => {
                let mut rows: Vec<_> = r
                    .kernels
                    .iter()
                    .filter(|k| {
                        file.is_none_or(|p| {
                            k.binary == p
                                || r.files.iter().any(|x| {
                                    x.path == p && x.old_path.as_deref() == Some(&k.binary)
                                })
                        })
                    })
                    .filter(|k| target.is_none_or(|t| k.target == t))
                    .filter(|k| {
                        k.name.contains(f)
                            || k.target.contains(f)
                            || k.binary.contains(f)
                            || k.demangled.as_deref().is_some_and(|d| d.contains(f))
                    })
                    .collect();
                if self.by_name {
                    rows.sort_by(|a, b| {
                        a.demangled
                            .as_deref()
                            .unwrap_or(&a.name)
                            .cmp(b.demangled.as_deref().unwrap_or(&b.name))
                    });
                }
                rows.into_iter()
                    .map(|k| {
                        let (o, n) = (k.old_size.unwrap_or(0), k.new_size.unwrap_or(0));
                        let mark = match (k.old_size, k.new_size) {
                            (None, _) => '+',
                            (_, None) => '-',
                            _ => '~',
                        };
                        let line = Line::from(vec![
                            Span::styled(
                                format!("{mark} {:>11}  ", signed(o, n)),
                                tone(o, n, theme),
                            ),
                            Span::raw(format!(
                                "{:<14} {}  {}",
                                k.target,
                                k.binary,
                                k.demangled.as_deref().unwrap_or(&k.name)
                            )),
                        ]);
                        (RowId::Kernel, line)
                    })
                    .collect()
            }
        }
    }

    /// The table shown: a target's kernels, a file's targets, else the tab's.
    fn shown(&self) -> Section {
        match self.narrowed() {
            (_, Some(_)) => Section::Kernels,
            (Some(_), None) => Section::Targets,
            _ => self.section,
        }
    }

    /// The current table's column headers, over its columns.
    fn header(&self) -> String {
        match self.shown() {
            Section::Targets => format!(
                "{:<16} {:>11}   {:>11} {:>12} {:>7}",
                "target", "old", "new", "change", "%"
            ),
            Section::Files => format!("  {:>11} {:>11}  path", "file Δ", "device Δ"),
            Section::Kernels => format!("  {:>11}  {:<14} binary  kernel", "code Δ", "target"),
        }
    }

    /// What an empty table says, instead of a blank box.
    fn empty(&self) -> String {
        let what = match self.narrowed() {
            (_, Some(t)) => format!("no kernel of {t} changed"),
            (Some(f), None) => format!("no target of {f} changed"),
            _ => match self.section {
                Section::Targets => "no target's device code changed".into(),
                Section::Files => "no file changed".into(),
                Section::Kernels => "no kernel changed".into(),
            },
        };
        if self.filter.is_empty() {
            what
        } else {
            format!("{what} matching {:?} (Esc clears the filter)", self.filter)
        }
    }

    fn len(&self) -> usize {
        self.entries(Theme { color: false }, 1).len()
    }

    /// The mouse: a click selects the row under it (a second click on it drills
    /// in), the wheel moves.
    pub fn mouse(&mut self, m: ratatui::crossterm::event::MouseEvent) {
        use ratatui::crossterm::event::MouseEventKind;
        let (r, first) = self.drawn.get();
        let n = self.len();
        match m.kind {
            MouseEventKind::ScrollDown => self.cursor = (self.cursor + 3).min(n.saturating_sub(1)),
            MouseEventKind::ScrollUp => self.cursor = self.cursor.saturating_sub(3),
            MouseEventKind::Down(_)
                if m.column >= r.x
                    && m.column < r.x + r.width
                    && m.row >= r.y
                    && m.row < r.y + r.height =>
            {
                let i = first + (m.row - r.y) as usize;
                if i < n {
                    if i == self.cursor {
                        self.drill();
                    } else {
                        self.cursor = i;
                    }
                }
            }
            _ => {}
        }
    }

    /// Back up one level.
    fn up(&mut self) {
        if self.scope.pop().is_some() {
            self.cursor = 0;
        }
    }

    /// Enter: into the selected file or target.
    fn drill(&mut self) {
        let Some((id, _)) = self
            .entries(Theme { color: false }, 1)
            .into_iter()
            .nth(self.cursor)
        else {
            return;
        };
        match id {
            RowId::File(p) => self.scope.push(Scope::File(p)),
            RowId::Target(t) => self.scope.push(Scope::Target(t)),
            RowId::Kernel => return,
        }
        self.cursor = 0;
        self.filter.clear();
    }

    /// One key.
    pub fn key(&mut self, k: KeyEvent) {
        if self.filtering {
            match k.code {
                KeyCode::Enter => self.filtering = false,
                KeyCode::Esc => {
                    self.filtering = false;
                    self.filter.clear();
                }
                KeyCode::Backspace => {
                    self.filter.pop();
                }
                KeyCode::Char(c) => self.filter.push(c),
                _ => {}
            }
            self.cursor = 0;
            return;
        }
        if self.help {
            self.help = false;
            return;
        }
        let n = self.len();
        let clamp = |v: isize| v.clamp(0, n.saturating_sub(1) as isize) as usize;
        match k.code {
            KeyCode::Char('q') => self.quit = true,
            KeyCode::Char('?') => self.help = true,
            KeyCode::Enter | KeyCode::Right | KeyCode::Char('l') => self.drill(),
            KeyCode::Backspace | KeyCode::Left | KeyCode::Char('h') => self.up(),
            KeyCode::Tab | KeyCode::BackTab => {
                let order = [Section::Targets, Section::Files, Section::Kernels];
                let i = order.iter().position(|s| *s == self.section).unwrap_or(0);
                let step = if k.code == KeyCode::Tab { 1 } else { 2 };
                self.section = order[(i + step) % 3];
                self.cursor = 0;
                self.scope.clear();
            }
            KeyCode::Char('/') => self.filtering = true,
            KeyCode::Esc if self.filter.is_empty() => self.up(),
            KeyCode::Esc => {
                self.filter.clear();
                self.cursor = 0;
            }
            KeyCode::Char('s') => {
                self.by_name = !self.by_name;
                self.cursor = 0;
            }
            KeyCode::Down | KeyCode::Char('j') => self.cursor = clamp(self.cursor as isize + 1),
            KeyCode::Up | KeyCode::Char('k') => self.cursor = clamp(self.cursor as isize - 1),
            KeyCode::PageDown => self.cursor = clamp(self.cursor as isize + 10),
            KeyCode::PageUp => self.cursor = clamp(self.cursor as isize - 10),
            KeyCode::Home | KeyCode::Char('g') => self.cursor = 0,
            KeyCode::End | KeyCode::Char('G') => self.cursor = clamp(isize::MAX / 2),
            _ => {}
        }
    }
}

/// Draw the view.
pub fn draw(frame: &mut Frame, v: &DiffView, theme: Theme) {
    if super::widgets::too_small(frame) {
        return;
    }
    let area = frame.area();
    let [head, tabs, body, foot] = Layout::vertical([
        Constraint::Length(4),
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(area);
    let r = &v.report;
    let count = |c: Change| r.files.iter().filter(|f| f.change == c).count();
    frame.render_widget(
        Paragraph::new(vec![
            Line::from(Span::styled(
                {
                    // Both sides show, each cut in the middle to half the width (trial
                    // 23: the NEW side was pushed out).
                    let half = (area.width as usize).saturating_sub(3) / 2;
                    format!(
                        "{} → {}",
                        super::widgets::middle_cut(&r.old.display().to_string(), half),
                        super::widgets::middle_cut(&r.new.display().to_string(), half)
                    )
                },
                Style::new().add_modifier(Modifier::BOLD),
            )),
            Line::from(vec![
                Span::raw("device code (raw) "),
                Span::styled(
                    format!(
                        "{} → {} ({}, {})",
                        size(r.old_device_raw),
                        size(r.new_device_raw),
                        signed(r.old_device_raw, r.new_device_raw),
                        crate::text::delta_pct(r.old_device_raw, r.new_device_raw)
                    ),
                    tone(r.old_device_raw, r.new_device_raw, theme),
                ),
            ]),
            Line::from(format!(
                "files: {} added, {} removed, {} grown, {} shrunk · kernels: {} changed",
                count(Change::Added),
                count(Change::Removed),
                count(Change::Grown),
                count(Change::Shrunk),
                r.kernels.len()
            )),
        ])
        .block(Block::default().title(" kpack-tui diff ")),
        head,
    );
    let tab = |s: Section, name: &str| {
        let st = if v.section == s {
            theme.selected()
        } else {
            Style::new()
        };
        Span::styled(format!(" {name} "), st)
    };
    frame.render_widget(
        Paragraph::new(Line::from(vec![
            tab(Section::Targets, "Targets"),
            Span::raw(" "),
            tab(Section::Files, "Files"),
            Span::raw(" "),
            tab(Section::Kernels, "Kernels"),
            Span::raw(if v.by_name {
                "   sorted by name"
            } else {
                "   largest change first"
            }),
        ])),
        tabs,
    );
    let bar_w = body.width.saturating_sub(66) as usize;
    let lines = v.lines(theme, bar_w.max(1));
    // The first row under the border is the columns' header (trial 24).
    let h = body.height.saturating_sub(3) as usize;
    let start = v.cursor.saturating_sub(h.saturating_sub(1));
    v.drawn.set((
        ratatui::layout::Rect {
            x: body.x + 1,
            y: body.y + 2,
            width: body.width.saturating_sub(2),
            height: h as u16,
        },
        start,
    ));
    let total = lines.len();
    let mut shown: Vec<Line> = vec![Line::styled(
        v.header(),
        Style::new().add_modifier(Modifier::BOLD),
    )];
    if total == 0 {
        shown.push(Line::styled(v.empty(), theme.fg(Color::Gray)));
    }
    shown.extend(
        lines
            .into_iter()
            .enumerate()
            .skip(start)
            .take(h.max(1))
            .map(|(i, l)| {
                if i == v.cursor {
                    l.style(theme.selected())
                } else {
                    l
                }
            }),
    );
    let mut title = String::new();
    if !v.scope.is_empty() {
        title = format!(" {} ", v.crumbs());
    }
    if !v.filter.is_empty() {
        title.push_str(&format!(" matching {:?} ", v.filter));
    }
    let mut block = Block::bordered().title(title);
    if start + h < total {
        block = block.title_bottom(format!(" more below ↓ ({} of {total}) ", start + h));
    }
    frame.render_widget(Paragraph::new(shown).block(block), body);
    let hint = if v.filtering {
        format!(" filter: {}▏  Enter keep · Esc clear", v.filter)
    } else {
        " Tab table · ↑↓ move · Enter into · ⌫ back · / filter · s sort · ? help · q quit"
            .to_string()
    };
    frame.render_widget(Paragraph::new(hint).style(theme.fg(Color::Gray)), foot);
    if v.help {
        let keys = [
            ("Tab / Shift-Tab", "targets, files, kernels"),
            ("↑↓ jk PgUp PgDn g G", "move"),
            (
                "Enter → l",
                "into the selected file (its targets) or target (its kernels)",
            ),
            ("Backspace ← h Esc", "back up one level"),
            (
                "/",
                "filter by path, name or target (Enter keeps, Esc clears)",
            ),
            ("s", "largest change first, or by name"),
            (
                "+ - > < =",
                "file added, removed, grown, shrunk, same size (file and device bytes)",
            ),
            ("~", "a kernel whose code size changed"),
            ("mouse", "click selects (again: into it), wheel moves"),
            ("q", "quit"),
        ];
        let lines: Vec<Line> = keys
            .iter()
            .map(|(k, w)| Line::from(format!(" {k:<20} {w}")))
            .collect();
        let w = area.width.min(90);
        let h = area.height.min(lines.len() as u16 + 2);
        let r = super::widgets::centered(area, w, h);
        frame.render_widget(ratatui::widgets::Clear, r);
        frame.render_widget(
            Paragraph::new(lines).block(Block::bordered().title(" keys (any key closes) ")),
            r,
        );
    }
}
