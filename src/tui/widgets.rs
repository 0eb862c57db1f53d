//! What every view draws with: the theme, panes that scroll, cut text, overlays.
//! It knows no view (the views import it, `ui` draws the views).

use kpack::scan::FileKind;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Wrap};
use std::cell::Cell;

/// Colours, or none at all when NO_COLOR is set.
#[derive(Debug, Clone, Copy)]
pub struct Theme {
    /// Colours on.
    pub color: bool,
}

impl Theme {
    /// From the environment (NO_COLOR).
    pub fn from_env() -> Theme {
        Theme {
            color: std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        }
    }
    pub(crate) fn fg(self, c: Color) -> Style {
        if self.color {
            Style::new().fg(c)
        } else {
            Style::new()
        }
    }
    pub(crate) fn kind(self, k: FileKind) -> Style {
        self.fg(match k {
            // Not red: red is for damage (`!`) and for growth in the diff (trial 33).
            FileKind::FatBinary => Color::LightYellow,
            FileKind::HostOnlyBinary => Color::LightGreen,
            FileKind::Bundle | FileKind::CodeObject | FileKind::EmbeddedCode => Color::LightMagenta,
            FileKind::KernelDatabase => Color::Magenta,
            FileKind::Kpack => Color::LightCyan,
            FileKind::Wheel => Color::LightBlue,
            FileKind::Symlink => Color::Cyan,
            FileKind::Opaque | FileKind::Other => Color::Gray,
        })
    }
    pub(crate) fn selected(self) -> Style {
        if self.color {
            Style::new()
                .bg(Color::DarkGray)
                .add_modifier(Modifier::BOLD)
        } else {
            Style::new().add_modifier(Modifier::REVERSED)
        }
    }
}

pub(crate) fn marker(k: FileKind) -> char {
    match k {
        FileKind::FatBinary => 'F',
        FileKind::HostOnlyBinary => 'H',
        FileKind::Bundle => 'B',
        FileKind::KernelDatabase => 'D',
        FileKind::Kpack => 'K',
        FileKind::Wheel => 'W',
        FileKind::CodeObject => 'C',
        FileKind::EmbeddedCode => 'E',
        FileKind::Symlink => '@',
        FileKind::Opaque => ' ',
        FileKind::Other => '?',
    }
}

/// The smallest terminal the views are laid out for: below it names are cut to a
/// few characters and tabs vanish without a sign (trial 37), so the screen says so.
pub const MIN_SIZE: (u16, u16) = (50, 12);

/// Say that the terminal is too small, instead of a view that cannot be read: true
/// when it did (the caller draws nothing else). Resizing redraws as usual.
pub fn too_small(frame: &mut Frame) -> bool {
    let area = frame.area();
    if area.width >= MIN_SIZE.0 && area.height >= MIN_SIZE.1 {
        return false;
    }
    let text = format!(
        "terminal {}x{} is too small: kpack-tui needs {}x{}. Resize it, or q to quit.",
        area.width, area.height, MIN_SIZE.0, MIN_SIZE.1
    );
    frame.render_widget(Paragraph::new(text).wrap(Wrap { trim: true }), area);
    true
}

/// What a side pane is given by the app: how far it is scrolled, whether it has the
/// keys (and in which view), and where it records itself for keys and the mouse.
#[derive(Clone, Copy)]
pub(crate) struct Side<'a> {
    /// The first line shown (clamped here to the end).
    pub scroll: u16,
    /// Whether the pane has the scrolling keys.
    pub focused: bool,
    /// The Preview view, whose one pane scrolls with the plain keys.
    pub alone: bool,
    /// Set to the pane's area when drawn.
    pub area: &'a Cell<Rect>,
    /// Set to how far it can scroll.
    pub max: &'a Cell<u16>,
}

/// A side pane that scrolls: its lines wrap, the app's `side_scroll` picks the
/// first line shown (clamped to the end), a scrollbar shows when there is more, and
/// the frame records the pane and how far it can scroll (for keys and the mouse).
pub(crate) fn side_pane(
    frame: &mut Frame,
    side: Side,
    lines: Vec<Line<'static>>,
    (block, wrap): (Block, bool),
    area: Rect,
    theme: Theme,
) {
    let inner_w = area.width.saturating_sub(2).max(1) as usize;
    let inner_h = area.height.saturating_sub(2) as usize;
    let total: usize = if wrap {
        lines
            .iter()
            .map(|l| l.width().div_ceil(inner_w).max(1))
            .sum()
    } else {
        lines.len()
    };
    let max = total.saturating_sub(inner_h).min(u16::MAX as usize) as u16;
    let scroll = side.scroll.min(max);
    side.area.set(area);
    side.max.set(max);
    // Focus shows in the border (thick, and coloured when colours are on), so the
    // pane keeps its title; the footer says which keys scroll it.
    let focused = side.focused && !side.alone;
    let block = if focused {
        block
            .border_type(ratatui::widgets::BorderType::Thick)
            .border_style(theme.fg(Color::LightCyan).add_modifier(Modifier::BOLD))
    } else {
        block
    };
    let block = if max > 0 {
        block.title_bottom(Line::from(if scroll < max {
            if focused {
                " more below ↓ "
            } else if side.alone {
                " more below ↓ (↓, PgDn, G, wheel) "
            } else {
                " more below ↓ (w, Shift-↓, wheel) "
            }
        } else {
            " end "
        }))
    } else {
        block
    };
    let p = Paragraph::new(lines).scroll((scroll, 0)).block(block);
    frame.render_widget(
        if wrap {
            p.wrap(Wrap { trim: false })
        } else {
            p
        },
        area,
    );
    if max > 0 {
        let mut state =
            ratatui::widgets::ScrollbarState::new(max as usize + 1).position(scroll as usize);
        frame.render_stateful_widget(
            ratatui::widgets::Scrollbar::new(ratatui::widgets::ScrollbarOrientation::VerticalRight),
            area,
            &mut state,
        );
    }
}

/// A line cut to `width` columns, ending in `…` when something was cut.
pub(crate) fn cut_line(line: Line<'static>, width: usize) -> Line<'static> {
    if line.width() <= width {
        return line;
    }
    let mut left = width.saturating_sub(1);
    let mut spans = Vec::new();
    for sp in line.spans {
        if left == 0 {
            break;
        }
        let text: String = sp.content.chars().take(left).collect();
        left -= text.chars().count();
        spans.push(Span::styled(text, sp.style));
    }
    spans.push(Span::raw("…"));
    Line::from(spans).style(line.style)
}

/// A `w`×`h` box centred in `area` (dialogs and overlays).
pub(crate) fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let (w, h) = (w.min(area.width), h.min(area.height));
    Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    }
}

/// A centred box listing keys and what they do (the `?` overlays).
pub fn key_overlay(
    frame: &mut Frame,
    area: Rect,
    title: &str,
    keys: &[(&str, &str)],
    key_w: usize,
) {
    // As wide as the longest line (and the title), at most the terminal; a
    // description that does not fit wraps at a word, under its own column.
    let widest = keys
        .iter()
        .map(|(_, d)| key_w + 3 + d.chars().count())
        .chain([title.chars().count()])
        .max()
        .unwrap_or(0) as u16
        + 3;
    let w = area.width.min(widest);
    let inner = w.saturating_sub(2).max(1) as usize;
    let room = inner.saturating_sub(key_w + 3).max(8);
    let mut lines: Vec<Line> = Vec::new();
    for (k, d) in keys {
        for (i, part) in wrap_words(d, room).into_iter().enumerate() {
            let key = if i == 0 { *k } else { "" };
            lines.push(Line::from(format!(" {key:<key_w$}  {part}")));
        }
    }
    let h = (lines.len() as u16 + 2).min(area.height);
    let r = centered(area, w, h);
    frame.render_widget(Clear, r);
    frame.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(title.to_string())),
        r,
    );
}

/// `text` cut into lines of at most `width` characters at spaces (a word longer
/// than the width is cut).
fn wrap_words(text: &str, width: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        let (n, w) = (line.chars().count(), word.chars().count());
        if n > 0 && n + 1 + w > width {
            out.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
        while line.chars().count() > width {
            let head: String = line.chars().take(width).collect();
            line = line.chars().skip(width).collect();
            out.push(head);
        }
    }
    if !line.is_empty() || out.is_empty() {
        out.push(line);
    }
    out
}

/// `s` cut to `w` characters in the middle (`torch/lib/…/libtorch_hip.so#3`).
pub(crate) fn middle_cut(s: &str, w: usize) -> String {
    let n = s.chars().count();
    if n <= w {
        return s.to_string();
    }
    let keep = w.saturating_sub(1);
    // The end (the file name, the TU) matters more than the start.
    let head = keep * 2 / 5;
    let tail = keep - head;
    let a: String = s.chars().take(head).collect();
    let b: String = s.chars().skip(n - tail).collect();
    format!("{a}…{b}")
}

/// A progress bar in `block`: the label centred over it. With colours, ratatui's
/// gauge; without (NO_COLOR), the filled part in reverse video, so progress shows
/// under the label too (trial 32: only the cells left of the label showed).
pub(crate) fn progress(
    frame: &mut Frame,
    area: Rect,
    (block, ratio, label): (Block, f64, String),
    theme: Theme,
    color: Color,
) {
    if theme.color {
        frame.render_widget(
            ratatui::widgets::Gauge::default()
                .block(block)
                .gauge_style(theme.fg(color))
                .ratio(ratio)
                .label(label),
            area,
        );
        return;
    }
    let inner = block.inner(area);
    let w = inner.width as usize;
    let filled = ((ratio.clamp(0.0, 1.0) * w as f64).round() as usize).min(w);
    let text: String = {
        let label: String = label.chars().take(w).collect();
        let pad = (w - label.chars().count()) / 2;
        format!("{}{label}{}", " ".repeat(pad), " ".repeat(w))
            .chars()
            .take(w)
            .collect()
    };
    let (a, b): (String, String) = (
        text.chars().take(filled).collect(),
        text.chars().skip(filled).collect(),
    );
    frame.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled(a, Style::new().add_modifier(Modifier::REVERSED)),
            Span::raw(b),
        ]))
        .block(block),
        area,
    );
}

/// `s` cut to `w` characters at its end, with `…` when something was cut.
pub(crate) fn end_cut(s: &str, w: usize) -> String {
    if s.chars().count() <= w {
        return s.to_string();
    }
    let mut out: String = s.chars().take(w.saturating_sub(1)).collect();
    out.push('…');
    out
}
