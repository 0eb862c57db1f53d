//! The archive inspector: a `.kpack` archive's kernels as a table, and the extract
//! prompt.

use super::app::{Drawn, InspectorState};
use super::widgets::{Theme, centered, end_cut, middle_cut};
use crate::text::size;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph};

/// The archive of `state` (`title`: what was opened, when the archive is not named),
/// its list's place noted in `drawn`.
pub(crate) fn inspector(
    frame: &mut Frame,
    (state, drawn): (&InspectorState, &Drawn),
    title: &str,
    area: Rect,
    theme: Theme,
) {
    let Some(a) = &state.index else {
        return;
    };
    let [head, list] = Layout::vertical([Constraint::Length(4), Constraint::Min(3)]).areas(area);
    // TOC aliases repeat a frame: the totals count it once.
    let frames = || a.kernels.iter().filter(|k| !k.is_alias());
    let raw: u64 = frames().map(|k| k.size).sum();
    let stored: u64 = frames().map(|k| k.compressed_size).sum();
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
        // Bordered as every other view, and named (trial 38: opened from a tree,
        // the tab bar's path is the tree's).
        .block(
            Block::bordered()
                .title_bottom(
                    state
                        .status
                        .as_ref()
                        .map(|m| format!(" {} ", end_cut(m, head.width.saturating_sub(4) as usize)))
                        .unwrap_or_default(),
                )
                .title(format!(
                    " {} · {} · {} raw · {} stored ",
                    state
                        .at
                        .as_ref()
                        .map_or_else(|| title.to_string(), |a| a.file_name()),
                    crate::text::count(frames().count() as u64, "code object", "code objects"),
                    size(raw),
                    size(stored)
                )),
        ),
        head,
    );
    let outer = list;
    let list = Block::bordered().inner(outer);
    frame.render_widget(Block::bordered(), outer);
    // A table with headers: the key column takes what the others leave, long keys
    // are cut in the middle (their start and file name stay).
    let fixed = 2 + 16 + 11 + 11 + 8 + 4;
    let key_w = (list.width as usize).saturating_sub(fixed).max(12);
    let h = (list.height as usize).saturating_sub(1);
    let start = state.cursor.saturating_sub(h.saturating_sub(1));
    drawn.list.set(Rect {
        x: list.x,
        y: list.y + 1,
        width: list.width,
        height: h as u16,
    });
    drawn.list_first.set(start);
    let mut lines = vec![Line::from(Span::styled(
        format!(
            "  {:<key_w$} {:<16} {:>11} {:>11} {:>7}",
            "key (binary#TU)", "target", "raw", "stored", "ratio"
        ),
        Style::new().add_modifier(Modifier::BOLD),
    ))];
    let mut last_key = "";
    for (i, k) in a.kernels.iter().enumerate().skip(start).take(h) {
        // A key shown once for its targets.
        let key = if *k.key != *last_key || i == start {
            middle_cut(&k.key, key_w)
        } else {
            String::new()
        };
        last_key = &k.key;
        // Marked rows (Space) carry a `*`: what `x` extracts.
        let mark = if state.marks.contains(&i) { "* " } else { "  " };
        let mut line = Line::from(
            mark.to_string()
                + &match &k.alias_of {
                    // A TOC alias: the frame of another target of the key, listed again.
                    Some(of) => format!("{key:<key_w$} {:<16} = {of} (the same frame)", k.arch),
                    None => format!(
                        "{key:<key_w$} {:<16} {:>11} {:>11} {:>6.2}×",
                        k.arch,
                        size(k.size),
                        size(k.compressed_size),
                        k.size as f64 / k.compressed_size.max(1) as f64
                    ),
                },
        );
        if i == state.cursor {
            line = line.style(theme.selected());
        }
        lines.push(line);
    }
    frame.render_widget(Paragraph::new(lines), list);
    if let Some((which, dest, cursor)) = &state.extract {
        let what = match which.as_deref() {
            Some([(key, arch)]) => format!("Extract {key} @ {arch} into"),
            Some(marked) => format!("Extract the {} marked code objects into", marked.len()),
            None => format!("Extract all {} code objects into", a.kernels.len()),
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
