//! The Kernels view: the kernels of the selected subtree, sortable, with their
//! registers, LDS, scratch, spills and occupancy; per-target totals.

use super::app::App;
use super::widgets::Theme;
use crate::text::size;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Cell, Paragraph, Row, Table};

pub(crate) fn kernel_sort_label(s: kpack::kernels::SortBy) -> &'static str {
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
pub(crate) fn kernels(frame: &mut Frame, app: &App, area: Rect, theme: Theme) {
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
        // Opened on one file (a binary, a wheel): that file, not "the tree".
        None if path.is_empty() && app.root_is_file => app.root.file_name().map_or_else(
            || app.root.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        ),
        None if path.is_empty() => "the tree".to_string(),
        None => path.clone(),
    };
    // The code objects of what is shown: all of the read's, or, narrowed to an entry
    // or a search, those the shown kernels come from.
    let code_objects = if app.kernel_entry.is_none() && app.kernel_filter.is_empty() {
        report.code_objects
    } else {
        shown
            .iter()
            .map(|k| (&k.path, &k.key, k.bundle, &k.target))
            .collect::<std::collections::BTreeSet<_>>()
            .len() as u64
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
                code_objects,
                if code_objects == 1 { "" } else { "s" },
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
                    None => format!(
                        "occupancy: no hint ({})",
                        kpack::occupancy::why_unknown(&r.target, k).unwrap_or("not known")
                    ),
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
