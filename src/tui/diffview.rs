//! The diff view (`kpack-tui diff OLD NEW` in a terminal): the per-target deltas as
//! bars, the files and the kernels that changed, largest change first, growth red
//! and shrinkage green; Tab cycles the tables, `/` filters, `s` sorts by name.

use super::ui::Theme;
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
    /// Leave.
    pub quit: bool,
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
            quit: false,
        }
    }

    /// Lines of the current table (label for filtering, then the rendered line).
    fn lines(&self, theme: Theme, bar_w: usize) -> Vec<Line<'static>> {
        let f = self.filter.as_str();
        let r = &self.report;
        match self.section {
            Section::Targets => {
                let max = r
                    .targets
                    .iter()
                    .map(|t| (t.new_bytes as i64 - t.old_bytes as i64).unsigned_abs())
                    .max()
                    .unwrap_or(1)
                    .max(1);
                let mut rows: Vec<_> = r.targets.iter().filter(|t| t.target.contains(f)).collect();
                if self.by_name {
                    rows.sort_by(|a, b| a.target.cmp(&b.target));
                }
                rows.into_iter()
                    .map(|t| {
                        let d = (t.new_bytes as i64 - t.old_bytes as i64).unsigned_abs();
                        let n = ((d as u128 * bar_w as u128) / max as u128) as usize;
                        Line::from(vec![
                            Span::raw(format!(
                                "{:<16} {:>11} → {:>11} {:>12} {:>7} ",
                                t.target,
                                size(t.old_bytes),
                                size(t.new_bytes),
                                signed(t.old_bytes, t.new_bytes),
                                crate::text::delta_pct(t.old_bytes, t.new_bytes)
                            )),
                            Span::styled(
                                "█".repeat(if d > 0 { n.max(1) } else { 0 }),
                                tone(t.old_bytes, t.new_bytes, theme),
                            ),
                        ])
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
                        let (o, n) = (x.old_size + x.old_device, x.new_size + x.new_device);
                        Line::from(vec![
                            Span::styled(
                                format!(
                                    "{mark} {:>11} {:>11}  ",
                                    signed(x.old_size, x.new_size),
                                    signed(x.old_device, x.new_device)
                                ),
                                tone(o, n, theme),
                            ),
                            Span::raw(format!("{}{was}", x.path)),
                        ])
                    })
                    .collect()
            }
            Section::Kernels => {
                let mut rows: Vec<_> = r
                    .kernels
                    .iter()
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
                        Line::from(vec![
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
                        ])
                    })
                    .collect()
            }
        }
    }

    fn len(&self) -> usize {
        self.lines(Theme { color: false }, 1).len()
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
        let n = self.len();
        let clamp = |v: isize| v.clamp(0, n.saturating_sub(1) as isize) as usize;
        match k.code {
            KeyCode::Char('q') => self.quit = true,
            KeyCode::Tab | KeyCode::BackTab => {
                let order = [Section::Targets, Section::Files, Section::Kernels];
                let i = order.iter().position(|s| *s == self.section).unwrap_or(0);
                let step = if k.code == KeyCode::Tab { 1 } else { 2 };
                self.section = order[(i + step) % 3];
                self.cursor = 0;
            }
            KeyCode::Char('/') => self.filtering = true,
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
                format!("{} → {}", r.old.display(), r.new.display()),
                Style::new().add_modifier(Modifier::BOLD),
            )),
            Line::from(vec![
                Span::raw("device code "),
                Span::styled(
                    format!(
                        "{} → {} ({}, {})",
                        size(r.old_device),
                        size(r.new_device),
                        signed(r.old_device, r.new_device),
                        crate::text::delta_pct(r.old_device, r.new_device)
                    ),
                    tone(r.old_device, r.new_device, theme),
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
    let h = body.height.saturating_sub(2) as usize;
    let start = v.cursor.saturating_sub(h.saturating_sub(1));
    let shown: Vec<Line> = lines
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
        })
        .collect();
    let title = if v.filter.is_empty() {
        String::new()
    } else {
        format!(" matching {:?} ", v.filter)
    };
    frame.render_widget(
        Paragraph::new(shown).block(Block::bordered().title(title)),
        body,
    );
    let hint = if v.filtering {
        format!(" filter: {}▏  Enter keep · Esc clear", v.filter)
    } else {
        " Tab table · ↑↓ move · / filter · s sort · q quit".to_string()
    };
    frame.render_widget(Paragraph::new(hint).style(theme.fg(Color::Gray)), foot);
}
