//! Drawing. Reads the state, never changes it, never does I/O.

use super::app::{App, View};
use crate::text::size;
use kpack::family::PRESETS;
use kpack::scan::{FileKind, FileReport};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Clear, Gauge, Paragraph, Row, Table, Wrap};

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
    fn kind(self, k: FileKind) -> Style {
        self.fg(match k {
            FileKind::FatBinary => Color::LightRed,
            FileKind::HostOnlyBinary => Color::LightGreen,
            FileKind::Bundle | FileKind::CodeObject => Color::LightMagenta,
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
        FileKind::Symlink => '@',
        FileKind::Opaque => ' ',
        FileKind::Other => '?',
    }
}

/// Draw the whole screen.
pub fn draw(frame: &mut Frame, app: &App, theme: Theme) {
    let area = frame.area();
    if area.width < 2 || area.height < 3 {
        return;
    }
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
            View::Inspector => inspector(frame, app, body, theme),
            View::Kernels => kernels(frame, app, body, theme),
            View::Pack => pack(frame, app, body, theme),
        }
    }
    frame.render_widget(
        Paragraph::new(fit_status(&status(app), bottom.width as usize))
            .style(theme.fg(Color::Gray)),
        bottom,
    );
    if app.help {
        help(frame, app, area);
    }
}

/// A side pane that scrolls: its lines wrap, the app's `side_scroll` picks the
/// first line shown (clamped to the end), a scrollbar shows when there is more, and
/// the frame records the pane and how far it can scroll (for keys and the mouse).
fn side_pane(
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
    const TAIL: &str = " · Tab view · ? help · q quit";
    let n = line.chars().count();
    if n <= width {
        return line.to_string();
    }
    let Some(head) = line.strip_suffix(TAIL) else {
        return line.chars().take(width).collect();
    };
    let room = width.saturating_sub(TAIL.chars().count() + 1);
    let cut: String = head.chars().take(room).collect();
    // End the cut at a separator when there is one, so no hint is half shown.
    let cut = match cut.rfind(" · ") {
        Some(i) if i > 0 => cut[..i].to_string(),
        _ => cut,
    };
    format!("{cut}…{TAIL}")
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
            kernel_sort_label(app.kernel_sort),
            if app.kernel_reverse { ", reversed" } else { "" },
            if app.kernel_entry.is_some() {
                " · a whole archive"
            } else {
                ""
            }
        ),
        View::Inspector => match &app.archive_status {
            Some(m) => m.clone(),
            None => {
                "↑↓ move · x extract the selected kernel · X extract all · v verify".to_string()
            }
        },
        View::Pack => match &app.pack {
            Some(super::app::PackState::Confirm { settings, .. }) if settings.wheel => {
                "type to edit · ↑↓ field · Enter split · Esc back".to_string()
            }
            Some(super::app::PackState::Confirm { .. }) => {
                "type to edit · ↑↓ field · F2 layout · F3 archives · Enter start · Esc back"
                    .to_string()
            }
            Some(super::app::PackState::Running(_)) => {
                "Esc cancel (the output is left untouched)".to_string()
            }
            _ => "Esc back".to_string(),
        },
    };
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
            size(t.device_bytes)
        )
    } else {
        let damaged = report.files.iter().filter(|f| f.is_damaged()).count() as u64;
        // With a filter, the totals are the matching files'.
        let (entries, bytes, device) = if app.filter.is_empty() {
            (t.entries, t.bytes, t.device_bytes)
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
                        d + if counted { x.device_bytes } else { 0 },
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
            let mut l = file_detail(&report.files[f], theme);
            if let Some(Ok(layout)) = app.layouts.get(&report.files[f].path) {
                // Segment rows are cut at the pane's edge, not wrapped into each
                // other; the last line (the sections, a flowing list) wraps.
                let w = right.width.saturating_sub(2) as usize;
                let ll = layout_lines(layout, theme);
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
                    Line::from(format!(
                        "device code {} ({:.0}%)",
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

/// An ELF file's segments (one line each) and sections (name and size, wrapped).
pub fn layout_lines(l: &kpack::elf::rewrite::ElfLayout, theme: Theme) -> Vec<Line<'static>> {
    let mut out = vec![Line::from(Span::styled(
        format!("segments ({})", l.segments.len()),
        theme.fg(Color::LightBlue),
    ))];
    for g in &l.segments {
        let flags: String = [(4, 'R'), (2, 'W'), (1, 'X')]
            .iter()
            .map(|(b, c)| if g.p_flags & b != 0 { *c } else { '-' })
            .collect();
        out.push(Line::from(format!(
            "  {:<12} {flags} off {:#08x} {:>10}",
            g.type_name(),
            g.p_offset,
            size(g.p_filesz)
        )));
    }
    out.push(Line::from(Span::styled(
        format!("sections ({})", l.sections.len()),
        theme.fg(Color::LightBlue),
    )));
    let names: Vec<String> = l
        .sections
        .iter()
        .filter(|s| !s.name.is_empty())
        .map(|s| format!("{} {}", s.name, size(s.sh_size)))
        .collect();
    out.push(Line::from(format!("  {}", names.join(" · "))));
    out
}

/// The lines describing one file (bundles per TU, targets, wrappers, marker, problems).
pub fn file_detail(f: &FileReport, theme: Theme) -> Vec<Line<'static>> {
    let mut l = vec![
        Line::from(Span::styled(
            f.path.clone(),
            theme.kind(f.kind).add_modifier(Modifier::BOLD),
        )),
        Line::from(match (f.kind, f.elf_kind) {
            // An ELF without device code is a host ELF, not an opaque blob.
            (FileKind::Opaque, Some(e)) => format!("host ELF ({}), {}", e.name(), size(f.size)),
            (k, e) => format!(
                "{}{}, {}",
                k.name(),
                e.map(|e| format!(" ({})", e.name())).unwrap_or_default(),
                size(f.size)
            ),
        }),
    ];
    let dbd = super::tree::db_device(f);
    if dbd > 0 {
        l.push(Line::from(format!(
            "device code in this database: {}",
            size(dbd)
        )));
    }
    if let Some(h) = f.host_bytes {
        l.push(Line::from(format!(
            "host {} · device {}",
            size(h),
            size(f.device_bytes)
        )));
    }
    if let Some(t) = &f.target {
        l.push(Line::from(format!("→ {t}")));
    }
    if let Some(a) = &f.arch {
        l.push(Line::from(format!("arch {a}")));
    }
    if matches!(
        f.kind,
        FileKind::FatBinary | FileKind::Bundle | FileKind::Kpack | FileKind::CodeObject
    ) {
        l.push(Line::from(Span::styled(
            "K: the kernels of its code objects",
            theme.fg(Color::DarkGray),
        )));
    }
    if let (Some(d), Some(rule)) = (f.database, f.database_rule) {
        let key = f
            .database_key
            .as_deref()
            .filter(|k| Some(*k) != f.arch.as_deref())
            .map(|k| format!(" from {k}"))
            .unwrap_or_default();
        l.push(Line::from(format!(
            "{} database{key} · {}",
            d.name(),
            rule.describe()
        )));
    }
    for b in f.all_bundles() {
        let comp = b
            .ccob_version
            .map(|v| format!("{} v{v}", b.compression.name()))
            .unwrap_or_else(|| b.compression.name().to_string());
        l.push(Line::from(Span::styled(
            format!("TU {} · {comp} · {}", b.index, size(b.stored_size)),
            theme.fg(Color::LightYellow),
        )));
        for t in &b.targets {
            let ratio = if t.compressed_size > 0 && t.compressed_size != t.size {
                format!(" (≈{:.1}×)", t.size as f64 / t.compressed_size as f64)
            } else {
                String::new()
            };
            l.push(Line::from(format!(
                "  {:<15} {:>10}{ratio}",
                t.arch,
                size(t.size)
            )));
        }
    }
    if !f.wrappers.is_empty() {
        let w: Vec<String> = f
            .wrappers
            .iter()
            .map(|w| match (w.magic, w.bundle) {
                (kpack::elf::WrapperMagic::Hipf, Some(b)) => format!("HIPF→{b}"),
                (kpack::elf::WrapperMagic::Hipk, _) => format!("HIPK#{}", w.reserved & 0xffff_ffff),
                _ => "?".to_string(),
            })
            .collect();
        l.push(Line::from(format!("wrappers: {}", w.join(" "))));
    }
    if let Some(m) = &f.marker {
        l.push(Line::from(format!("marker: {}", m.kernel_name)));
        for p in &m.kpack_search_paths {
            l.push(Line::from(format!("  {p}")));
        }
    }
    if let Some(k) = &f.kpack {
        l.push(Line::from(format!(
            "{} / {} · {} · {}",
            k.group_name,
            k.gfx_arch_family,
            crate::text::count(k.kernels, "kernel", "kernels"),
            k.compression_scheme
        )));
    }
    for p in &f.problems {
        l.push(Line::from(Span::styled(
            format!("! {p}"),
            theme.fg(Color::LightRed),
        )));
    }
    l
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
    let bar_w = right.width.saturating_sub(40) as u64;
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
        l.push(Line::from(vec![
            Span::raw(format!("{arch:<16} ")),
            Span::styled("█".repeat(n.max(1)), style),
            Span::raw(format!(" {}", size(*raw))),
        ]));
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
            (Block::bordered().title(" device bytes per arch "), true),
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
    let leaving: u64 = packed
        .iter()
        .map(|f| f.fatbin.as_ref().map_or(0, |s| s.size / 4096 * 4096))
        .sum();
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
    // A guess before compressing anything: zstd -3 keeps 25-40% of code objects
    // (bench/), so the range is shown; `e` computes the real figure.
    let raw: u64 = per_family.iter().sum();
    let (lo, hi) = (raw / 4, raw * 2 / 5);
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
                    "pack plan (every kernel compressed: exact)"
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
                    "{:<14} {:>5} {:<7} {:>11} raw {approx}{:>11}{note}",
                    f.name,
                    f.kernels,
                    if f.kernels == 1 { "kernel" } else { "kernels" },
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
        (Block::bordered().title(" device bytes per arch "), true),
        right,
    );
}

fn kernel_sort_label(s: kpack::kernels::SortBy) -> &'static str {
    use kpack::kernels::SortBy::*;
    match s {
        Size => "code size",
        Vgpr => "VGPRs",
        Sgpr => "SGPRs",
        Lds => "LDS",
        Scratch => "scratch",
        Spills => "spills",
        Name => "name",
        Target => "target",
    }
}

/// The kernels of the selected subtree: a table, per-target totals, the selected
/// kernel's detail. Spills are red, scratch yellow.
fn kernels(frame: &mut Frame, app: &App, area: Rect, theme: Theme) {
    let (path, report) = match &app.kernels {
        _ if app.kernels_loading => {
            frame.render_widget(
                Paragraph::new("reading the code objects…")
                    .block(Block::bordered().title(" kernels ")),
                area,
            );
            return;
        }
        None => {
            frame.render_widget(
                Paragraph::new("Select a file or folder in the explorer and press K.")
                    .block(Block::bordered().title(" kernels ")),
                area,
            );
            return;
        }
        Some((p, Err(e))) => {
            frame.render_widget(
                Paragraph::new(format!("{p}: {e}")).block(Block::bordered().title(" kernels ")),
                area,
            );
            return;
        }
        Some((p, Ok(r))) => (p, r),
    };
    let [head, list, detail] = Layout::vertical([
        Constraint::Length(4),
        Constraint::Min(3),
        Constraint::Length(6),
    ])
    .areas(area);
    // Narrow terminals drop the AGPR and location columns (the detail shows them).
    let wide = area.width >= 120;
    let shown = app.kernel_rows();
    let code: u64 = shown.iter().filter_map(|k| k.kernel.code_size).sum();
    let spilling = shown
        .iter()
        .filter(|k| k.kernel.spills().unwrap_or(0) > 0)
        .count();
    let mut per_target: std::collections::BTreeMap<&str, (usize, u64)> = Default::default();
    for k in &shown {
        let e = per_target.entry(k.target.as_str()).or_default();
        e.0 += 1;
        e.1 += k.kernel.code_size.unwrap_or(0);
    }
    let targets: Vec<String> = per_target
        .iter()
        .map(|(t, (n, b))| format!("{t} {n} / {}", size(*b)))
        .collect();
    let mut title = match &app.kernel_entry {
        Some((key, arch)) => format!("{key} {arch}"),
        None if path.is_empty() && app.archive.is_some() => "the archive".to_string(),
        None if path.is_empty() => "the tree".to_string(),
        None => path.clone(),
    };
    if !app.kernel_filter.is_empty() {
        title = format!("{title} matching {:?}", app.kernel_filter);
    }
    frame.render_widget(
        Paragraph::new(vec![
            Line::from(format!(
                "{} kernel{} in {} code object{} · {} of code · {} spilling · by {}",
                shown.len(),
                if shown.len() == 1 { "" } else { "s" },
                report.code_objects,
                if report.code_objects == 1 { "" } else { "s" },
                size(code),
                spilling,
                kernel_sort_label(app.kernel_sort)
            )),
            Line::from(Span::styled(targets.join(" · "), theme.fg(Color::Gray))),
        ])
        .block(Block::bordered().title(format!(" kernels of {title} "))),
        head,
    );
    let rows_h = list.height.saturating_sub(3) as usize;
    let start = app.kernel_cursor.saturating_sub(rows_h.saturating_sub(1));
    // Data rows start under the border and the header.
    app.drawn.list.set(Rect {
        x: list.x + 1,
        y: list.y + 2,
        width: list.width.saturating_sub(2),
        height: rows_h as u16,
    });
    app.drawn.list_first.set(start);
    let opt = |v: Option<u64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
    let rows: Vec<Row> = shown
        .iter()
        .enumerate()
        .skip(start)
        .take(rows_h.max(1))
        .map(|(i, r)| {
            let k = &r.kernel;
            let spills = k.spills().unwrap_or(0);
            let where_ = match (&r.key, r.bundle) {
                (Some(key), _) => key.clone(),
                (None, Some(b)) => format!("{}#{b}", r.path),
                _ => r.path.clone(),
            };
            let mut cells = vec![
                Cell::from(k.code_size.map_or_else(|| "-".into(), size)),
                Cell::from(opt(k.vgpr)),
            ];
            if wide {
                cells.push(Cell::from(opt(k.agpr)));
            }
            cells.extend([
                Cell::from(opt(k.sgpr)),
                Cell::from(opt(k.lds)),
                Cell::from(opt(k.scratch)).style(if k.scratch.unwrap_or(0) > 0 {
                    theme.fg(Color::Yellow)
                } else {
                    Style::new()
                }),
                Cell::from(opt(k.spills())).style(if spills > 0 {
                    theme.fg(Color::LightRed)
                } else {
                    Style::new()
                }),
                Cell::from(
                    r.occupancy
                        .map_or_else(|| "-".into(), |o| format!("{}/{}", o.waves, o.max_waves)),
                ),
                Cell::from(r.target.clone()),
                Cell::from(k.display_name().to_string()),
            ]);
            if wide {
                cells.push(Cell::from(where_));
            }
            let mut row = Row::new(cells);
            if i == app.kernel_cursor {
                row = row.style(theme.selected());
            }
            row
        })
        .collect();
    let mut widths = vec![Constraint::Length(10), Constraint::Length(5)];
    let mut header = vec!["code", "vgpr"];
    if wide {
        widths.push(Constraint::Length(5));
        header.push("agpr");
    }
    widths.extend([
        Constraint::Length(5),
        Constraint::Length(6),
        Constraint::Length(7),
        Constraint::Length(6),
        Constraint::Length(5),
        Constraint::Length(14),
        Constraint::Fill(2),
    ]);
    header.extend([
        "sgpr", "lds", "scratch", "spills", "waves", "target", "kernel",
    ]);
    if wide {
        widths.push(Constraint::Fill(1));
        header.push("where");
    }
    let table = Table::new(rows, widths)
        .header(Row::new(header).style(Style::new().add_modifier(Modifier::BOLD)))
        .block(Block::bordered());
    frame.render_widget(table, list);
    let lines = match shown.get(app.kernel_cursor) {
        None => vec![Line::from("no kernels")],
        Some(r) => {
            let k = &r.kernel;
            vec![
                Line::from(k.display_name().to_string()),
                Line::from(Span::styled(
                    format!("{} · {}", k.name, k.symbol.as_deref().unwrap_or("-")),
                    theme.fg(Color::Gray),
                )),
                Line::from(format!(
                    "{}{} · code object v{} · wave{} · max workgroup {} · kernarg {} B{}",
                    r.path,
                    r.bundle.map(|b| format!("#{b}")).unwrap_or_default(),
                    r.code_object_version
                        .map_or_else(|| "?".into(), |v| v.to_string()),
                    opt(k.wavefront_size),
                    opt(k.max_flat_workgroup_size),
                    opt(k.kernarg_size),
                    if k.uses_dynamic_stack == Some(true) {
                        " · dynamic stack"
                    } else {
                        ""
                    }
                )),
                Line::from(match r.occupancy {
                    None => "occupancy: not known for this target".to_string(),
                    Some(o) => format!(
                        "occupancy {} of {} waves per SIMD: VGPRs allow {}{}{}",
                        o.waves,
                        o.max_waves,
                        o.by_vgprs,
                        o.by_sgprs
                            .map(|v| format!(", SGPRs {v}"))
                            .unwrap_or_default(),
                        o.by_lds
                            .map(|v| format!(", LDS {v} (at the max workgroup size)"))
                            .unwrap_or_default()
                    ),
                }),
            ]
        }
    };
    frame.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" kernel ")),
        detail,
    );
}

fn preview(frame: &mut Frame, app: &App, area: Rect) {
    let text = match &app.preview {
        None => "Select a fat binary in the explorer and press Enter or p.".to_string(),
        Some((path, Err(e))) => format!("{path}: {e}"),
        Some((path, Ok(plan))) => {
            let mut buf = Vec::new();
            let _ = crate::text::rewrite_plan(&mut buf, std::path::Path::new(path), plan);
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

fn inspector(frame: &mut Frame, app: &App, area: Rect, theme: Theme) {
    let Some(a) = &app.archive else { return };
    let [head, list] = Layout::vertical([Constraint::Length(4), Constraint::Min(1)]).areas(area);
    let raw: u64 = a.kernels.iter().map(|k| k.size).sum();
    let stored: u64 = a.kernels.iter().map(|k| k.compressed_size).sum();
    frame.render_widget(
        Paragraph::new(vec![
            Line::from(format!(
                "group {} · family {} · {}",
                a.meta.group_name,
                a.meta.gfx_arch_family,
                a.compression_scheme.name()
            )),
            Line::from(format!("arches {}", a.meta.gfx_arches.join(" "))),
        ])
        .block(Block::new().borders(Borders::BOTTOM).title(format!(
            " {} · {} raw · {} stored ",
            crate::text::count(a.kernels.len() as u64, "kernel", "kernels"),
            size(raw),
            size(stored)
        ))),
        head,
    );
    // A table with headers: the key column takes what the others leave, long keys
    // are cut in the middle (their start and file name stay).
    let fixed = 16 + 11 + 11 + 8 + 4;
    let key_w = (list.width as usize).saturating_sub(fixed).max(12);
    let h = (list.height as usize).saturating_sub(1);
    let start = app.archive_cursor.saturating_sub(h.saturating_sub(1));
    app.drawn.list.set(Rect {
        x: list.x,
        y: list.y + 1,
        width: list.width,
        height: h as u16,
    });
    app.drawn.list_first.set(start);
    let mut lines = vec![Line::from(Span::styled(
        format!(
            "{:<key_w$} {:<16} {:>11} {:>11} {:>7}",
            "key (binary#TU)", "target", "raw", "stored", "ratio"
        ),
        Style::new().add_modifier(Modifier::BOLD),
    ))];
    let mut last_key = "";
    for (i, k) in a.kernels.iter().enumerate().skip(start).take(h) {
        // A key shown once for its targets.
        let key = if k.key != last_key || i == start {
            middle_cut(&k.key, key_w)
        } else {
            String::new()
        };
        last_key = &k.key;
        let mut line = Line::from(format!(
            "{key:<key_w$} {:<16} {:>11} {:>11} {:>6.2}×",
            k.arch,
            size(k.size),
            size(k.compressed_size),
            k.size as f64 / k.compressed_size.max(1) as f64
        ));
        if i == app.archive_cursor {
            line = line.style(theme.selected());
        }
        lines.push(line);
    }
    frame.render_widget(Paragraph::new(lines), list);
    if let Some((which, dest, cursor)) = &app.extract_prompt {
        let what = match which {
            Some((key, arch)) => format!("Extract {key} @ {arch} into"),
            None => format!("Extract all {} kernels into", a.kernels.len()),
        };
        let body = vec![
            Line::from(what),
            Line::from(format!("▶ {}", super::textedit::with_cursor(dest, *cursor))),
            Line::from(""),
            Line::from("Enter extracts · Esc cancels (a directory; created if needed)"),
        ];
        let r = centered(area, 90, 6);
        frame.render_widget(Clear, r);
        frame.render_widget(
            Paragraph::new(body).block(Block::bordered().title(" extract ")),
            r,
        );
    }
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

fn help(frame: &mut Frame, app: &App, area: Rect) {
    let views = format!("Tab / Shift-Tab, 1-{}", app.views.len());
    let wheel = app.report.as_ref().is_some_and(|r| r.wheel.is_some());
    let mut keys: Vec<(&str, &str)> = vec![(views.as_str(), "switch view")];
    match app.view {
        View::Explorer => keys.extend([
            ("↑↓ j k, PgUp PgDn, g G", "move"),
            ("→ l, Enter", "open a folder"),
            ("← h", "go to the parent; on an open folder, close it"),
            ("Enter, p", "rewrite preview of a fat binary"),
            ("Enter", "on a .kpack: open it in the inspector"),
            ("K", "kernels of the selected file or folder"),
            ("s, S", "sort: size, name, device share; S reverses"),
            (
                "/",
                "filter by path, target (gfx942) or class (fat_binary); Esc clears",
            ),
            (
                "Tab / Shift-Tab",
                "into an overflowing detail (arrows scroll it), back",
            ),
            ("Shift-↑↓, Shift-PgUp/PgDn", "scroll the detail"),
            (
                "mouse",
                "wheel scrolls the pane under it, click selects, tabs switch",
            ),
        ]),
        View::Families if wheel => keys.extend([
            ("↑↓ j k", "move"),
            (
                "Space, Enter",
                "toggle the family or target under the cursor",
            ),
            ("P", "split the wheel with these targets (all when none)"),
        ]),
        View::Families => keys.extend([
            ("↑↓ j k", "move"),
            (
                "Tab / Shift-Tab",
                "into an overflowing plan (arrows scroll it), back",
            ),
            ("Shift-↑↓, Shift-PgUp/PgDn", "scroll the plan"),
            (
                "Space, Enter",
                "toggle the family or target under the cursor",
            ),
            ("e", "compute the pack plan (the core's, as pack --dry-run)"),
            ("P", "pack the tree with these families"),
        ]),
        View::Pack => keys.extend([
            ("↑↓", "next / previous field"),
            (
                "typing, ← → Home End",
                "edit the field (Ctrl-A/E/U/W/K as in a shell)",
            ),
            ("← → + -", "on the level field: zstd level"),
            (
                "F2, F3",
                "layout combined/split, archives per target/family (trees)",
            ),
            ("Enter", "start"),
            ("Esc", "back; while running: cancel cleanly"),
        ]),
        View::Inspector => keys.extend([
            ("↑↓ j k, PgUp PgDn, g G", "move"),
            ("K", "the kernels inside the selected code object"),
            ("x", "extract the selected kernel (asks where)"),
            ("X", "extract every kernel (asks where)"),
            ("v", "verify the archive (every frame decodes to its size)"),
        ]),
        View::Kernels => keys.extend([
            ("↑↓ j k, PgUp PgDn, g G", "move"),
            (
                "s, S",
                "sort: code size, VGPRs, SGPRs, LDS, scratch, spills, name, target; S reverses",
            ),
            ("/", "find kernels by name; Esc clears"),
        ]),
        View::Preview => {
            keys.extend([("↑↓ j k, PgUp PgDn, g G", "scroll (to the start, the end)")])
        }
    }
    keys.extend([("?", "this help (any key closes)"), ("q, Ctrl-C", "quit")]);
    let key_w = keys
        .iter()
        .map(|(k, _)| k.chars().count())
        .max()
        .unwrap_or(8);
    key_overlay(
        frame,
        area,
        &format!(" keys: {} ", app.view.title()),
        &keys,
        key_w,
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
    // As wide as the longest line (and the title), at most the terminal; lines
    // that do not fit wrap.
    let lines: Vec<String> = keys
        .iter()
        .map(|(k, d)| format!(" {k:<key_w$}  {d}"))
        .collect();
    let content = lines
        .iter()
        .map(|l| l.chars().count())
        .chain([title.chars().count()])
        .max()
        .unwrap_or(0) as u16
        + 3;
    let w = area.width.min(content);
    let inner = w.saturating_sub(2).max(1) as usize;
    let rows: usize = lines
        .iter()
        .map(|l| l.chars().count().div_ceil(inner).max(1))
        .sum();
    let h = (rows as u16 + 2).min(area.height);
    let r = centered(area, w, h);
    let lines: Vec<Line> = lines.into_iter().map(Line::from).collect();
    frame.render_widget(Clear, r);
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(Block::bordered().title(title.to_string())),
        r,
    );
}

/// One line of the pack or split dialog: `▶ label value` with the cursor in the
/// field being edited (the level field shows `- N +`).
pub(crate) fn field_line(
    s: &super::app::PackSettings,
    (field, cursor): (usize, usize),
    i: usize,
    label: &str,
) -> Line<'static> {
    let mark = if field == i { "▶" } else { " " };
    match s.field(i) {
        Some(text) if field == i => Line::from(format!(
            "{mark} {label} {}",
            super::textedit::with_cursor(text, cursor)
        )),
        Some(text) => Line::from(format!("{mark} {label} {text}")),
        None if field == i => Line::from(format!("{mark} {label} - {} +  (←/→)", s.level)),
        None => Line::from(format!("{mark} {label} {}", s.level)),
    }
}

fn pack(frame: &mut Frame, app: &App, area: Rect, theme: Theme) {
    use super::app::PackState;
    match &app.pack {
        None => frame.render_widget(
            Paragraph::new("Choose families in the Architectures view and press P."),
            area,
        ),
        Some(PackState::Confirm {
            settings,
            field,
            cursor,
        }) if settings.wheel => {
            super::wheelsplit::confirm(frame, app, settings, (*field, *cursor), area, theme);
        }
        Some(PackState::WheelDone(r)) => super::wheelsplit::done(frame, r, area, theme),
        Some(PackState::Replace(s)) => {
            let what = if s.wheel {
                "already holds files; wheels of the same names are replaced"
            } else {
                "holds a previous pack's output; it is replaced (as pack --force)"
            };
            let lines = vec![
                Line::from(Span::styled(
                    "Replace the previous output?",
                    Style::new().add_modifier(Modifier::BOLD),
                )),
                Line::from(""),
                Line::from(format!("{} {what}.", s.output)),
                Line::from(""),
                Line::from("y replaces it · n or Esc goes back to the dialog"),
            ];
            let w = area.width.min(90);
            let h = area.height.min(lines.len() as u16 + 2);
            let r = centered(area, w, h);
            frame.render_widget(Clear, r);
            frame.render_widget(
                Paragraph::new(lines)
                    .wrap(Wrap { trim: false })
                    .block(Block::bordered().title(" replace? ")),
                r,
            );
        }
        Some(PackState::Confirm {
            settings,
            field,
            cursor,
        }) => {
            let f = |i: usize, label: &str| field_line(settings, (*field, *cursor), i, label);
            let lines = vec![
                Line::from(Span::styled(
                    "Pack this tree",
                    Style::new().add_modifier(Modifier::BOLD),
                )),
                Line::from(""),
                f(0, "group     "),
                f(1, "output    "),
                Line::from(format!(
                    "  selection  {}",
                    if settings.selection.is_empty() {
                        "(none selected)".to_string()
                    } else {
                        settings.selection.label()
                    }
                )),
                Line::from(format!(
                    "  layout     {}",
                    if settings.split {
                        "split (generic + overlays)"
                    } else {
                        "combined"
                    }
                )),
                Line::from(format!(
                    "  archives   {}",
                    if settings.per_family {
                        "one per family (markers list each)"
                    } else {
                        "one per target (markers: <group>_@GFXARCH@.kpack)"
                    }
                )),
                f(2, "zstd level"),
                Line::from(""),
                Line::from(
                    "Enter starts; code for archs outside these families is dropped and reported.",
                ),
            ];
            let w = area.width.min(90);
            let h = area.height.min(lines.len() as u16 + 2);
            let r = centered(area, w, h);
            frame.render_widget(Clear, r);
            frame.render_widget(
                Paragraph::new(lines).block(Block::bordered().title(" confirm ")),
                r,
            );
        }
        Some(PackState::Running(run)) => {
            let p = &run.tally;
            let [g, rest] =
                Layout::vertical([Constraint::Length(3), Constraint::Min(1)]).areas(area);
            let ratio = if p.bytes == 0 {
                0.0
            } else {
                (p.done_bytes as f64 / p.bytes as f64).clamp(0.0, 1.0)
            };
            let secs = run
                .started
                .map_or(0.0, |t| t.elapsed().as_secs_f64())
                .max(0.001);
            let rate = p.done_bytes as f64 / secs;
            let eta = if rate > 0.0 && p.bytes > p.done_bytes {
                format!(", ETA {:.0} s", (p.bytes - p.done_bytes) as f64 / rate)
            } else {
                String::new()
            };
            let label = if p.stage.is_empty() {
                format!(
                    "{} / {} files · {} / {} · {}/s{eta}",
                    p.done,
                    p.files,
                    size(p.done_bytes),
                    size(p.bytes),
                    size(rate as u64)
                )
            } else {
                p.stage.to_string()
            };
            frame.render_widget(
                Gauge::default()
                    .block(Block::bordered().title(" packing "))
                    .gauge_style(theme.fg(Color::LightGreen))
                    .ratio(ratio)
                    .label(label),
                g,
            );
            let [workers, fams, warns] = Layout::vertical([
                Constraint::Length(p.workers.len() as u16 + 2),
                Constraint::Length(p.families.len() as u16 + 2),
                Constraint::Min(1),
            ])
            .areas(rest);
            let wl: Vec<Line> = p
                .workers
                .iter()
                .map(|(w, (f, ph))| Line::from(format!("worker {w}: {:<8} {f}", ph.name())))
                .collect();
            frame.render_widget(
                Paragraph::new(wl).block(Block::bordered().title(" workers ")),
                workers,
            );
            let fl: Vec<Line> = p
                .families
                .iter()
                .map(|(f, (k, b))| Line::from(format!("{f:<14} {k:>6} kernels  {:>11}", size(*b))))
                .collect();
            frame.render_widget(
                Paragraph::new(fl).block(Block::bordered().title(" archives ")),
                fams,
            );
            let start = p
                .warnings
                .len()
                .saturating_sub(warns.height.saturating_sub(2) as usize);
            let ww: Vec<Line> = p.warnings[start..]
                .iter()
                .map(|w| Line::from(Span::styled(w.clone(), theme.fg(Color::Yellow))))
                .collect();
            frame.render_widget(
                Paragraph::new(ww)
                    .block(Block::bordered().title(format!(" warnings ({}) ", p.warnings.len()))),
                warns,
            );
        }
        Some(PackState::Done(r)) if r.is_err() => {
            let e = r.as_ref().as_ref().err().map_or("", String::as_str);
            let title = if e == "cancelled" {
                " pack cancelled: nothing was written "
            } else {
                " pack failed: nothing was written "
            };
            frame.render_widget(
                Paragraph::new(e)
                    .wrap(Wrap { trim: false })
                    .block(Block::bordered().title(title)),
                area,
            );
        }
        Some(PackState::Done(done)) => {
            let Ok(r) = done.as_ref() else { return };
            let mut l = vec![
                Line::from(Span::styled(
                    format!("packed into {} in {:.2} s", r.plan.output, r.seconds),
                    theme.fg(Color::LightGreen).add_modifier(Modifier::BOLD),
                )),
                Line::from(format!(
                    "verify: {}",
                    if r.verified { "sound" } else { "skipped" }
                )),
                Line::from(format!(
                    "bytes: {} -> {}",
                    size(r.bytes_in),
                    size(r.bytes_out)
                )),
            ];
            for a in &r.archives {
                l.push(Line::from(format!(
                    "{}: {} {}, {}",
                    a.path,
                    a.kernels,
                    if a.kernels == 1 { "kernel" } else { "kernels" },
                    size(a.bytes)
                )));
            }
            if r.bytes_out > r.bytes_in {
                l.push(Line::from(format!(
                    "the output is larger than the input: {} binaries stored their device code \
                     compressed (CCOB); try zstd level max",
                    r.grown.len()
                )));
            }
            if !r.plan.unassigned.is_empty() {
                let u: Vec<String> = r
                    .plan
                    .unassigned
                    .iter()
                    .map(|(a, n)| format!("{a} ({n})"))
                    .collect();
                l.push(Line::from(format!("dropped: {}", u.join(", "))));
            }
            l.push(Line::from(format!("warnings: {}", r.warnings.len())));
            frame.render_widget(
                Paragraph::new(l).block(Block::bordered().title(" pack done ")),
                area,
            );
        }
    }
}
