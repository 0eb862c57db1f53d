//! Drawing. Reads the state, never changes it, never does I/O.

use super::app::{App, View};
use crate::text::size;
use kpack::family::PRESETS;
use kpack::scan::FileKind;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Gauge, Paragraph, Wrap};

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
            FileKind::FatBinary => Color::LightRed,
            FileKind::HostOnlyBinary => Color::LightGreen,
            FileKind::Bundle | FileKind::CodeObject | FileKind::EmbeddedCode => Color::LightMagenta,
            FileKind::KernelDatabase => Color::Yellow,
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

fn marker(k: FileKind) -> char {
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

/// Draw the whole screen.
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

pub fn draw(frame: &mut Frame, app: &App, theme: Theme) {
    if too_small(frame) {
        return;
    }
    let area = frame.area();
    let [top, body, bottom] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(area);
    let mut tabs = vec![Span::styled(
        " kpack-tui ",
        theme.fg(Color::LightCyan).add_modifier(Modifier::BOLD),
    )];
    // Where each tab is, for clicks; nothing is a list or a side pane until drawn.
    app.drawn.list.set(Rect::default());
    app.drawn.side.set(Rect::default());
    app.drawn.side_max.set(0);
    let mut x = top.x + 11;
    let mut spans = Vec::new();
    for (i, v) in app.views.iter().enumerate() {
        let style = if *v == app.view {
            theme.selected()
        } else {
            Style::new()
        };
        let text = format!(" {}:{} ", i + 1, v.title());
        let w = text.chars().count() as u16;
        spans.push((x, x + w, *v));
        x += w;
        tabs.push(Span::styled(text, style));
    }
    *app.drawn.tabs.borrow_mut() = spans;
    tabs.push(Span::raw(format!("  {}", app.title())));
    frame.render_widget(Paragraph::new(Line::from(tabs)), top);
    if let Some(e) = &app.error {
        frame.render_widget(
            Paragraph::new(e.as_str())
                .wrap(Wrap { trim: false })
                .block(Block::bordered().title(" error ")),
            body,
        );
    } else {
        match app.view {
            View::Explorer => explorer(frame, app, body, theme),
            View::Families => families(frame, app, body, theme),
            View::Preview => preview(frame, app, body),
            View::Inspector => super::inspector::inspector(frame, app, body, theme),
            View::Kernels => super::kernelsview::kernels(frame, app, body, theme),
            View::Pack => super::packview::pack(frame, app, body, theme),
        }
    }
    frame.render_widget(
        Paragraph::new(fit_status(&status(app), bottom.width as usize))
            .style(theme.fg(Color::Gray)),
        bottom,
    );
    if app.help {
        super::help::help(frame, app, area);
    }
}

/// A side pane that scrolls: its lines wrap, the app's `side_scroll` picks the
/// first line shown (clamped to the end), a scrollbar shows when there is more, and
/// the frame records the pane and how far it can scroll (for keys and the mouse).
pub(super) fn side_pane(
    frame: &mut Frame,
    app: &App,
    lines: Vec<Line<'static>>,
    (block, wrap): (Block, bool),
    area: Rect,
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
    let scroll = app.side_scroll.min(max);
    app.drawn.side.set(area);
    app.drawn.side_max.set(max);
    let focused = app.side_focus && app.view != View::Preview;
    let block = if focused {
        block
            .border_style(Style::new().add_modifier(Modifier::BOLD))
            .title(Line::from(" ◆ focus: ↑↓ scroll, Shift-Tab back ").right_aligned())
    } else {
        block
    };
    let block = if max > 0 {
        block.title_bottom(Line::from(if scroll < max {
            if focused {
                " more below ↓ "
            } else if app.view == View::Preview {
                " more below ↓ (↓, PgDn, G, wheel) "
            } else {
                " more below ↓ (Tab, Shift-↓, wheel) "
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
fn cut_line(line: Line<'static>, width: usize) -> Line<'static> {
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

/// The status line cut to `width` columns so that its end (`? help · q quit`)
/// always shows: the view's hints give way first, ending in `…`.
fn fit_status(line: &str, width: usize) -> String {
    let n = line.chars().count();
    if n <= width {
        return line.to_string();
    }
    // The pack dialog's line ends in `Tab view` alone (its fields take every other key).
    let (head, tail) = match [" · Tab view · ? help · q quit", " · Tab view"]
        .into_iter()
        .find_map(|t| line.strip_suffix(t).map(|h| (h, t)))
    {
        Some(x) => x,
        None => return line.chars().take(width).collect(),
    };
    let tail_n = tail.chars().count();
    let room = width.saturating_sub(tail_n + 1);
    let cut: String = head.chars().take(room).collect();
    // End the cut at a separator when there is one, so no hint is half shown.
    let cut = match cut.rfind(" · ") {
        Some(i) if i > 0 => cut[..i].to_string(),
        _ => cut,
    };
    format!("{cut}…{tail}")
}

fn status(app: &App) -> String {
    if app.quit_asked {
        return " a pack is running: q again (or y) cancels it cleanly and quits; any other \
                key goes on"
            .to_string();
    }
    if app.filtering {
        let f = if app.view == View::Kernels {
            &app.kernel_filter
        } else {
            &app.filter
        };
        return format!(" filter: {f}▏  Enter keep · Esc clear");
    }
    let hints = match app.view {
        View::Explorer if app.explorer_note.is_some() => {
            app.explorer_note.clone().unwrap_or_default()
        }
        View::Explorer => format!(
            "↑↓/jk move · →/l open · ←/h close · Enter/p preview · s/S sort ({}{}) · / filter",
            app.sort.label(),
            if app.sort_reverse { ", reversed" } else { "" }
        ),
        View::Families => app.families_note.clone().unwrap_or_else(|| {
            if app.report.as_ref().is_some_and(|r| r.wheel.is_some()) {
                "↑↓ move · Space toggle · P split the wheel".to_string()
            } else {
                "↑↓ move · Space toggle · e plan · P pack".to_string()
            }
        }),
        View::Preview => "↑↓ scroll".to_string(),
        View::Kernels => format!(
            "↑↓ move · s/S sort ({}{}) · / find by name{}",
            super::kernelsview::kernel_sort_label(app.kernel_sort),
            if app.kernel_reverse { ", reversed" } else { "" },
            if app.kernel_entry.is_some() {
                " · a whole archive"
            } else {
                ""
            }
        ),
        View::Inspector => match &app.archive_status {
            Some(m) => m.clone(),
            None => "↑↓ move · x extract the selected code object · X extract all · v verify"
                .to_string(),
        },
        View::Pack if app.pack_note.is_some() => app.pack_note.clone().unwrap_or_default(),
        View::Pack => match &app.pack {
            Some(super::app::PackState::Confirm { settings, .. }) if settings.wheel => {
                "type to edit · ↑↓ field · Enter split · Esc back".to_string()
            }
            Some(super::app::PackState::Confirm { .. }) => {
                "type to edit · ↑↓ field · F2 layout · F3 archives · F4 other code · F5 damaged · Enter start · Esc back"
                    .to_string()
            }
            Some(super::app::PackState::Running(_)) if app.cancelling => {
                "cancelling… removing what was staged; the output is left untouched".to_string()
            }
            Some(super::app::PackState::Running(_)) => {
                "Esc cancel (the output is left untouched)".to_string()
            }
            Some(super::app::PackState::Replace(_)) => {
                "y replace · n or Esc back to the dialog".to_string()
            }
            _ => "Esc back".to_string(),
        },
    };
    // In the dialog every key types into its field: no keys it would swallow.
    if matches!(
        (app.view, &app.pack),
        (
            View::Pack,
            Some(super::app::PackState::Confirm { .. } | super::app::PackState::Replace(_))
        )
    ) {
        return format!(" {hints} · Tab view");
    }
    format!(" {hints} · Tab view · ? help · q quit")
}

fn explorer(frame: &mut Frame, app: &App, area: Rect, theme: Theme) {
    let (Some(report), Some(tree)) = (&app.report, &app.tree) else {
        let (done, total) = app.progress;
        let ratio = if total == 0 {
            0.0
        } else {
            (done as f64 / total as f64).clamp(0.0, 1.0)
        };
        let g = Gauge::default()
            .block(Block::bordered().title(" scanning "))
            .gauge_style(theme.fg(Color::LightCyan))
            .ratio(ratio)
            .label(format!("{done} / {total} files"));
        let h = area.height.min(3);
        frame.render_widget(g, Rect { height: h, ..area });
        return;
    };
    let wide = area.width >= 100;
    let [left, right] = Layout::horizontal(if wide {
        [Constraint::Percentage(55), Constraint::Percentage(45)]
    } else {
        [Constraint::Percentage(60), Constraint::Percentage(40)]
    })
    .areas(area);
    let rows = app.rows();
    let inner_h = left.height.saturating_sub(2) as usize;
    let scroll = if app.selected >= app.scroll + inner_h.max(1) {
        app.selected + 1 - inner_h.max(1)
    } else {
        app.scroll.min(app.selected)
    };
    let width = left.width.saturating_sub(2) as usize;
    app.drawn.list.set(Rect {
        x: left.x + 1,
        y: left.y + 1,
        width: left.width.saturating_sub(2),
        height: left.height.saturating_sub(2),
    });
    app.drawn.list_first.set(scroll);
    let mut lines = Vec::new();
    for (i, r) in rows.iter().enumerate().skip(scroll).take(inner_h) {
        let n = &tree.nodes[r.node];
        let (mark, style) = match n.file {
            Some(f) if report.files[f].is_damaged() => ('!', theme.fg(Color::LightRed)),
            Some(f) => (
                marker(report.files[f].kind),
                theme.kind(report.files[f].kind),
            ),
            None => (
                if app.expanded.contains(&r.node) || !app.filter.is_empty() {
                    '▾'
                } else {
                    '▸'
                },
                theme.fg(Color::LightBlue),
            ),
        };
        let right = if n.device > 0 {
            format!(
                "{:>10} {:>3.0}%",
                size(n.size),
                n.device as f64 * 100.0 / n.size.max(1) as f64
            )
        } else {
            format!("{:>10}     ", size(n.size))
        };
        let left_text = format!("{}{} {}", "  ".repeat(r.depth), mark, n.name);
        let room = width.saturating_sub(right.chars().count() + 1);
        let shown: String = left_text.chars().take(room).collect();
        let pad = width.saturating_sub(shown.chars().count() + right.chars().count());
        let mut line = Line::from(vec![
            Span::styled(shown, style),
            Span::raw(" ".repeat(pad)),
            Span::raw(right),
        ]);
        if i == app.selected {
            line = line.style(theme.selected());
        }
        lines.push(line);
    }
    let t = &report.totals;
    let title = if app.partial {
        let (done, total) = app.progress;
        format!(
            " scanning {done}/{total} · {} so far · device {} ",
            crate::text::count(t.entries, "entry", "entries"),
            size(t.device_raw)
        )
    } else {
        let damaged = report.files.iter().filter(|f| f.is_damaged()).count() as u64;
        // With a filter, the totals are the matching files'.
        let (entries, bytes, device) = if app.filter.is_empty() {
            (t.entries, t.bytes, t.device_raw)
        } else {
            let f = app.filter.to_lowercase();
            report
                .files
                .iter()
                .filter(|x| super::tree::matches_filter(x, &f))
                .fold((0, 0, 0), |(n, b, d), x| {
                    let counted = x.hard_link_of.is_none() && x.kind != FileKind::Symlink;
                    (
                        n + 1,
                        b + if counted { x.size } else { 0 },
                        d + if counted { x.device_raw() } else { 0 },
                    )
                })
        };
        format!(
            " {}{} · {} · device {}{} ",
            if app.filter.is_empty() {
                ""
            } else {
                "matching: "
            },
            crate::text::count(entries, "entry", "entries"),
            size(bytes),
            size(device),
            if damaged > 0 {
                format!(" · ! {}", crate::text::count(damaged, "damaged", "damaged"))
            } else {
                String::new()
            }
        )
    };
    frame.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(title)),
        left,
    );
    let detail_lines = match rows.get(app.selected).and_then(|r| tree.nodes[r.node].file) {
        Some(f) => {
            let mut l = super::detail::file_detail(&report.files[f], theme);
            if let Some(Ok(layout)) = app.layouts.get(&report.files[f].path) {
                // Segment rows are cut at the pane's edge, not wrapped into each
                // other; the last line (the sections, a flowing list) wraps.
                let w = right.width.saturating_sub(2) as usize;
                let ll = super::detail::layout_lines(layout, theme);
                let n = ll.len();
                l.extend(
                    ll.into_iter()
                        .enumerate()
                        .map(|(i, x)| if i + 1 < n { cut_line(x, w) } else { x }),
                );
            }
            l
        }
        None => match rows.get(app.selected) {
            Some(r) => {
                let n = &tree.nodes[r.node];
                vec![
                    Line::from(Span::styled(tree.path(r.node), theme.fg(Color::LightBlue))),
                    Line::from(format!(
                        "{}, {}",
                        crate::text::count(n.children.len() as u64, "entry", "entries"),
                        size(n.size)
                    )),
                    Line::from(format!("device code {} raw", size(n.raw))),
                    Line::from(format!(
                        "fatbin {} ({:.0}%)",
                        size(n.device),
                        n.device as f64 * 100.0 / n.size.max(1) as f64
                    )),
                ]
                .into_iter()
                .chain((n.db_device > 0).then(|| {
                    Line::from(format!(
                        "kernel-database device code {} ({:.0}%)",
                        size(n.db_device),
                        n.db_device as f64 * 100.0 / n.size.max(1) as f64
                    ))
                }))
                .collect()
            }
            None => vec![Line::from("empty tree")],
        },
    };
    side_pane(
        frame,
        app,
        detail_lines,
        (Block::bordered().title(" detail "), true),
        right,
    );
}

fn families(frame: &mut Frame, app: &App, area: Rect, theme: Theme) {
    let Some(report) = &app.report else {
        frame.render_widget(Paragraph::new("scanning…"), area);
        return;
    };
    let [left, right] =
        Layout::horizontal([Constraint::Length(24), Constraint::Min(10)]).areas(area);
    let picks = app.picks();
    let assign = |arch: &str| picks.iter().position(|p| p.takes(arch));
    let mut lines: Vec<Line> = PRESETS
        .iter()
        .enumerate()
        .map(|(i, (name, _))| {
            let has = report
                .archs
                .keys()
                .any(|a| kpack::family::Family::parse(name).is_ok_and(|f| f.contains(a)));
            let mut line = Line::from(format!(
                "[{}] {name}{}",
                if app.families[i] { 'x' } else { ' ' },
                if has { "" } else { " ·" }
            ));
            if i == app.family_cursor {
                line = line.style(theme.selected());
            }
            line
        })
        .collect();
    lines.push(Line::styled("single targets", theme.fg(Color::DarkGray)));
    for (k, (p, on)) in app.singles.iter().enumerate() {
        let covered = app.covered_by(p);
        let mark = if covered.is_some() {
            '-'
        } else if *on {
            'x'
        } else {
            ' '
        };
        // "in <preset>" only where it fits the column.
        let inner = left.width.saturating_sub(2) as usize;
        let text = match covered {
            Some(c) if p.len() + c.len() + 8 <= inner => format!("[{mark}] {p} in {c}"),
            _ => format!("[{mark}] {p}"),
        };
        let mut line = Line::from(text);
        if PRESETS.len() + k == app.family_cursor {
            line = line.style(theme.selected());
        }
        lines.push(line);
    }
    app.drawn.list.set(Rect {
        x: left.x + 1,
        y: left.y + 1,
        width: left.width.saturating_sub(2),
        height: left.height.saturating_sub(2),
    });
    app.drawn.list_first.set(0);
    frame.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" families ")),
        left,
    );
    let max = report.archs.values().copied().max().unwrap_or(1).max(1);
    // Room for "+10.39 KiB DB" when kernel-database files carry code for a target.
    let has_db = report.archs.keys().any(|a| {
        report
            .arch_totals
            .get(a)
            .is_some_and(|t| t.kernel_database > 0)
    });
    let bar_w = right
        .width
        .saturating_sub(if has_db { 54 } else { 40 })
        .max(1) as u64;
    let mut l = Vec::new();
    let mut unassigned = Vec::new();
    let mut by_target: Vec<(&String, &u64)> = report.archs.iter().collect();
    by_target.sort_by(|a, b| kpack::natural::target_cmp(a.0, b.0));
    for (arch, raw) in by_target {
        let fam = assign(arch);
        if fam.is_none() {
            unassigned.push(arch.clone());
        }
        let n = (raw * bar_w / max) as usize;
        let style = if fam.is_some() {
            theme.fg(Color::LightGreen)
        } else {
            theme.fg(Color::DarkGray)
        };
        // Kernel-database files of this target, apart from the binaries' code.
        let db = report
            .arch_totals
            .get(arch.as_str())
            .map_or(0, |t| t.kernel_database);
        l.push(Line::from(vec![
            Span::raw(format!("{arch:<16} ")),
            Span::styled("█".repeat(n.max(1)), style),
            Span::raw(format!(" {}", size(*raw))),
            Span::styled(
                if db > 0 {
                    format!(" +{} DB", size(db))
                } else {
                    String::new()
                },
                theme.fg(Color::Yellow),
            ),
        ]));
    }
    // Targets with only kernel-database files (no code in binaries).
    let mut db_only: Vec<(&String, u64)> = report
        .arch_totals
        .iter()
        .filter(|(a, t)| t.kernel_database > 0 && !report.archs.contains_key(*a))
        .map(|(a, t)| (a, t.kernel_database))
        .collect();
    db_only.sort_by(|a, b| kpack::natural::target_cmp(a.0, b.0));
    for (arch, db) in db_only {
        l.push(Line::from(Span::styled(
            format!("{arch:<16} {} in kernel DBs only", size(db)),
            theme.fg(Color::Yellow),
        )));
    }
    // Device code the binaries load themselves: counted apart, never packed.
    let mut embedded: Vec<(&String, u64)> = report
        .arch_totals
        .iter()
        .filter(|(_, t)| t.embedded > 0)
        .map(|(a, t)| (a, t.embedded))
        .collect();
    if !embedded.is_empty() {
        embedded.sort_by(|a, b| kpack::natural::target_cmp(a.0, b.0));
        l.push(Line::from(Span::styled(
            "embedded in binaries' data (loaded by them, not packable):",
            theme.fg(Color::LightMagenta),
        )));
        for (arch, n) in embedded {
            l.push(Line::from(format!("  {arch:<14} {}", size(n))));
        }
    }
    l.push(Line::from(""));
    if report.wheel.is_some() {
        let overlay = app.overlay_guess();
        if let Some(p) = super::wheelsplit::projection(app, &overlay) {
            let prefix = report.wheel.as_ref().map_or("pkg-device".into(), |w| {
                format!("{}-device", w.name.to_lowercase())
            });
            l.extend(super::wheelsplit::projection_lines(&p, &prefix, theme));
        }
        l.push(Line::from(""));
        l.push(Line::from(format!(
            "P: split the wheel (overlay root {overlay}/) with these targets"
        )));
        side_pane(
            frame,
            app,
            l,
            (
                Block::bordered().title(" raw device code per target "),
                true,
            ),
            right,
        );
        return;
    }
    // What leaves the tree: the whole pages of `.hip_fatbin` of the binaries a pack
    // rewrites, and their kernels of the selected families go to the archives.
    let packed: Vec<&kpack::scan::FileReport> = report
        .files
        .iter()
        .filter(|f| f.kind == FileKind::FatBinary && kpack::pack::packable(f))
        .collect();
    // A packed tree's archives are packed again: they leave too, and their kernels
    // count like the binaries' below.
    let leaving: u64 = packed
        .iter()
        .map(|f| f.fatbin.as_ref().map_or(0, |s| s.size / 4096 * 4096))
        .sum::<u64>()
        + report
            .files
            .iter()
            .filter(|f| f.kind == FileKind::Kpack && f.hard_link_of.is_none())
            .map(|f| f.size)
            .sum::<u64>();
    // Each rewritten binary gains a page-aligned segment for its marker.
    let host_tree = report.totals.bytes.saturating_sub(leaving) + packed.len() as u64 * 4096;
    let mut per_family = vec![0u64; picks.len()];
    for f in &packed {
        for t in f.bundles.iter().flat_map(|b| &b.targets) {
            if let Some(i) = assign(&t.arch) {
                per_family[i] += t.size;
            }
        }
    }
    for (arch, t) in &report.arch_totals {
        if let Some(i) = assign(arch) {
            per_family[i] += t.archived;
        }
    }
    // A guess before compressing anything: zstd -3 keeps 25-40% of code objects
    // (bench/), so the range is shown; `e` computes the real figure.
    let raw: u64 = per_family.iter().sum();
    let (lo, hi) = (raw / 4, raw * 2 / 5);
    // A small tree gets the exact plan at once (below), not a guess.
    if !app.plans_automatically() {
        l.push(Line::from(Span::styled(
            "projected output: a guess (zstd keeps 25-40% of code)",
            Style::new().add_modifier(Modifier::BOLD),
        )));
        l.push(Line::from(format!("host-only tree  ≈{}", size(host_tree))));
        for (f, b) in picks.iter().zip(&per_family) {
            l.push(Line::from(format!(
                "{:<15} {}–{} ({} raw)",
                f.name(),
                size(b / 4),
                size(b * 2 / 5),
                size(*b)
            )));
        }
        l.push(Line::from(format!(
            "total           {}–{} of {}",
            size(host_tree + lo),
            size(host_tree + hi),
            size(report.totals.bytes),
        )));
    }
    if !unassigned.is_empty() {
        l.push(Line::from(Span::styled(
            format!("unassigned: {}", unassigned.join(" ")),
            theme.fg(Color::LightRed),
        )));
    }
    l.push(Line::from(""));
    let selection = app.selection();
    match &app.plan {
        _ if app.planning => l.push(Line::from("computing the pack plan…")),
        Some((for_sel, Ok(p))) if *for_sel == selection => {
            l.push(Line::from(Span::styled(
                if p.projection == "exact" {
                    "pack plan (every code object compressed: exact)"
                } else {
                    "pack plan (estimate from a compressed sample)"
                },
                Style::new().add_modifier(Modifier::BOLD),
            )));
            let approx = if p.projection == "exact" { "" } else { "≈" };
            for f in &p.units {
                let note = if f.archive.is_none() && f.database_files > 0 {
                    format!("  ({} kernel-database files, no archive)", f.database_files)
                } else {
                    String::new()
                };
                l.push(Line::from(format!(
                    "{:<14}{:>4} {:<12} {:>10} → {approx}{}{note}",
                    f.name,
                    f.code_objects,
                    if f.code_objects == 1 {
                        "code object"
                    } else {
                        "code objects"
                    },
                    size(f.raw_bytes),
                    size(f.estimated_bytes)
                )));
            }
            l.push(Line::from(format!(
                "output {approx}{} of {}",
                size(p.projected_bytes),
                size(p.input_bytes)
            )));
            if !p.unassigned.is_empty() {
                let u: Vec<String> = p
                    .unassigned
                    .iter()
                    .map(|(a, n)| format!("{a} ({n})"))
                    .collect();
                l.push(Line::from(format!("dropped: {}", u.join(", "))));
            }
        }
        Some((_, Err(e))) => l.push(Line::from(format!("plan: {e}"))),
        _ => l.push(Line::from(
            "e: compute the exact pack plan for this selection",
        )),
    }
    side_pane(
        frame,
        app,
        l,
        (
            Block::bordered().title(" raw device code per target "),
            true,
        ),
        right,
    );
}

fn preview(frame: &mut Frame, app: &App, area: Rect) {
    let text = match &app.preview {
        None => "Select a fat binary in the explorer and press Enter or p.".to_string(),
        Some((path, Err(e))) => format!("{path}: {e}"),
        Some((path, Ok(plan))) => {
            let mut buf = Vec::new();
            let path = std::path::Path::new(path);
            let _ = match plan {
                kpack::fatbin::Plan::Elf(p) => crate::text::rewrite_plan(&mut buf, path, p),
                kpack::fatbin::Plan::Pe(p) => crate::text::pe_rewrite_plan(&mut buf, path, p),
            };
            String::from_utf8_lossy(&buf).into_owned()
        }
    };
    let lines: Vec<Line<'static>> = text.lines().map(|l| Line::from(l.to_string())).collect();
    side_pane(
        frame,
        app,
        lines,
        (
            Block::bordered().title(" rewrite preview (nothing is written) "),
            false,
        ),
        area,
    );
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
