//! The session's message log (`!`): every problem the scan found and every error or
//! warning of the operations run, whole, where the footer has room for one line.

use super::widgets::{Theme, centered};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Wrap};

/// How serious a message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Something failed or is damaged.
    Error,
    /// Something was skipped or looks odd.
    Warning,
    /// An operation's outcome.
    Info,
}

impl Level {
    fn label(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warning => "warning",
            Level::Info => "info",
        }
    }
}

impl From<kpack::scan::Severity> for Level {
    fn from(s: kpack::scan::Severity) -> Level {
        match s {
            kpack::scan::Severity::Error => Level::Error,
            kpack::scan::Severity::Warning => Level::Warning,
        }
    }
}

/// One message: what it is about (a path, an operation) and its text, whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Its level.
    pub level: Level,
    /// What it is about: a path relative to the root, or an operation (`pack`).
    pub about: String,
    /// The text.
    pub text: String,
}

/// The log and its overlay's state.
#[derive(Debug, Default)]
pub struct Log {
    /// Every message, oldest first.
    pub entries: Vec<Message>,
    /// The overlay is open.
    pub open: bool,
    /// Its scroll, in lines.
    pub scroll: u16,
    /// How far it can scroll (written by the last frame).
    pub max: std::cell::Cell<u16>,
    /// Entries there were when the overlay was last open.
    pub seen: usize,
}

impl Log {
    /// Add a message.
    pub fn push(&mut self, level: Level, about: impl Into<String>, text: impl Into<String>) {
        self.entries.push(Message {
            level,
            about: about.into(),
            text: text.into(),
        });
    }

    /// Errors and warnings so far.
    pub fn problems(&self) -> usize {
        self.entries
            .iter()
            .filter(|m| m.level != Level::Info)
            .count()
    }

    /// Errors and warnings added since the overlay was last open.
    pub fn unseen_problems(&self) -> usize {
        self.entries[self.seen.min(self.entries.len())..]
            .iter()
            .filter(|m| m.level != Level::Info)
            .count()
    }

    /// Open or close the overlay.
    pub fn toggle(&mut self) {
        self.open = !self.open;
        self.scroll = 0;
        self.seen = self.entries.len();
    }

    /// Scroll the open overlay by `d` lines, within what the last frame showed.
    pub fn scroll_by(&mut self, d: isize) {
        let max = self.max.get() as isize;
        self.scroll = (self.scroll as isize + d).clamp(0, max.max(0)) as u16;
    }
}

/// The overlay: every message, newest last, each whole (wrapped), scrollable.
pub(crate) fn draw(frame: &mut Frame, log: &Log, area: Rect, theme: Theme) {
    let w = area.width.saturating_sub(4).max(20);
    let h = area.height.saturating_sub(2).max(5);
    let r = centered(area, w, h);
    let mut lines: Vec<Line> = Vec::new();
    if log.entries.is_empty() {
        lines.push(Line::from("no messages: nothing failed or was skipped"));
    }
    for m in &log.entries {
        let style = match m.level {
            Level::Error => theme.fg(Color::LightRed),
            Level::Warning => theme.fg(Color::Yellow),
            Level::Info => theme.fg(Color::Gray),
        }
        .add_modifier(Modifier::BOLD);
        lines.push(Line::from(vec![
            Span::styled(format!("{:<8}", m.level.label()), style),
            Span::raw(if m.about.is_empty() {
                String::new()
            } else {
                format!("{}: ", m.about)
            }),
            Span::raw(m.text.clone()),
        ]));
    }
    let inner_w = r.width.saturating_sub(2).max(1) as usize;
    let inner_h = r.height.saturating_sub(2) as usize;
    let total: usize = lines
        .iter()
        .map(|l| l.width().div_ceil(inner_w).max(1))
        .sum();
    let max = total.saturating_sub(inner_h).min(u16::MAX as usize) as u16;
    log.max.set(max);
    let scroll = log.scroll.min(max);
    let title = format!(
        " messages: {} error(s), {} warning(s) ",
        log.entries
            .iter()
            .filter(|m| m.level == Level::Error)
            .count(),
        log.entries
            .iter()
            .filter(|m| m.level == Level::Warning)
            .count()
    );
    let bottom = if scroll < max {
        " ↑↓ PgUp PgDn scroll · more below ↓ · Esc or ! closes "
    } else {
        " ↑↓ PgUp PgDn scroll · Esc or ! closes "
    };
    frame.render_widget(Clear, r);
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .scroll((scroll, 0))
            .block(Block::bordered().title(title).title_bottom(bottom)),
        r,
    );
}
