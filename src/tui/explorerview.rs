//! The Explorer: the tree, its totals, and the selected entry's detail.

use super::app::{Drawn, ExplorerState};
use super::tree::{Row, Tree};
use super::widgets::*;
use crate::text::size;
use kpack::scan::FileKind;
use kpack::scan::TreeReport;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Color;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};

/// What the Explorer draws from: the scan (or its progress), the view's state and
/// rows, where the frame records the list, the side pane.
pub(crate) struct ExplorerCtx<'a> {
    /// The scan and its tree, once there is one (partial while scanning).
    pub scan: Option<(&'a TreeReport, &'a Tree)>,
    /// Scan progress (done, total).
    pub progress: (u64, u64),
    /// The tree shown is a scan in progress.
    pub partial: bool,
    /// The view's state.
    pub state: &'a ExplorerState,
    /// The rows shown (open folders, the order, the filter applied).
    pub rows: &'a [Row],
    /// Where the frame puts the list.
    pub drawn: &'a Drawn,
    /// The side pane.
    pub side: Side<'a>,
}

pub(crate) fn explorer(frame: &mut Frame, v: ExplorerCtx, area: Rect, theme: Theme) {
    let Some((report, tree)) = v.scan else {
        let (done, total) = v.progress;
        let ratio = if total == 0 {
            0.0
        } else {
            (done as f64 / total as f64).clamp(0.0, 1.0)
        };
        let h = area.height.min(3);
        progress(
            frame,
            Rect { height: h, ..area },
            (
                Block::bordered().title(" scanning "),
                ratio,
                format!("{done} / {total} files"),
            ),
            theme,
            Color::LightCyan,
        );
        return;
    };
    let wide = area.width >= 100;
    let [left, right] = Layout::horizontal(if wide {
        [Constraint::Percentage(55), Constraint::Percentage(45)]
    } else {
        [Constraint::Percentage(60), Constraint::Percentage(40)]
    })
    .areas(area);
    let rows = v.rows;
    let inner_h = left.height.saturating_sub(2) as usize;
    let scroll = if v.state.selected >= v.state.scroll + inner_h.max(1) {
        v.state.selected + 1 - inner_h.max(1)
    } else {
        v.state.scroll.min(v.state.selected)
    };
    let width = left.width.saturating_sub(2) as usize;
    v.drawn.list.set(Rect {
        x: left.x + 1,
        y: left.y + 1,
        width: left.width.saturating_sub(2),
        height: left.height.saturating_sub(2),
    });
    v.drawn.list_first.set(scroll);
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
                if v.state.expanded.contains(&r.node) || !v.state.filter.is_empty() {
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
        // A long name is cut in the middle: its end (`…-gfx900.hsaco`, the
        // extension, the target) tells rows apart (trial 23).
        let lead = format!("{}{} ", "  ".repeat(r.depth), mark);
        let room = width.saturating_sub(right.chars().count() + 1);
        let name_room = room.saturating_sub(lead.chars().count());
        let shown: String = format!("{lead}{}", middle_cut(&n.name, name_room))
            .chars()
            .take(room)
            .collect();
        let pad = width.saturating_sub(shown.chars().count() + right.chars().count());
        let mut line = Line::from(vec![
            Span::styled(shown, style),
            Span::raw(" ".repeat(pad)),
            Span::raw(right),
        ]);
        if i == v.state.selected {
            line = line.style(theme.selected());
        }
        lines.push(line);
    }
    let t = &report.totals;
    let title = if v.partial {
        let (done, total) = v.progress;
        format!(
            " scanning {done}/{total} · {} so far · device {} ",
            crate::text::count(t.entries, "entry", "entries"),
            size(t.device_raw)
        )
    } else {
        let damaged = report.files.iter().filter(|f| f.is_damaged()).count() as u64;
        // With a filter, the totals are the matching files'.
        let (entries, bytes, device) = if v.state.filter.is_empty() {
            (t.entries, t.bytes, t.device_raw)
        } else {
            let f = v.state.filter.to_lowercase();
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
            if v.state.filter.is_empty() {
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
    // The order and the filter always show under the list (trial 30), whatever the
    // footer has room for.
    let mut status = format!(" sort: {} ", v.state.sort.describe(v.state.reverse));
    if !v.state.filter.is_empty() {
        status.push_str(&format!("· filter {:?} ", v.state.filter));
    }
    let status = middle_cut(&status, width.saturating_sub(1));
    frame.render_widget(
        Paragraph::new(lines).block(
            Block::bordered()
                .title(end_cut(&title, width))
                .title_bottom(Line::styled(status, theme.fg(Color::Gray))),
        ),
        left,
    );
    let detail_lines = match rows
        .get(v.state.selected)
        .and_then(|r| tree.nodes[r.node].file)
    {
        Some(f) => {
            let mut l = super::detail::file_detail(&report.files[f], theme);
            if let Some(Ok(layout)) = v.state.layouts.get(&report.files[f].path) {
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
        None => match rows.get(v.state.selected) {
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
        v.side,
        detail_lines,
        (Block::bordered().title(" detail "), true),
        right,
        theme,
    );
}
