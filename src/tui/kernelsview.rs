//! The Kernels view: the kernels of the selected subtree, sortable, with their
//! registers, LDS, scratch, spills and occupancy; per-target totals.

use super::app::{Drawn, KernelsState};
use super::widgets::{Theme, end_cut, middle_cut};
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

/// The header of the column a sort orders by.
fn sort_column(s: kpack::kernels::SortBy) -> &'static str {
    use kpack::kernels::SortBy::*;
    match s {
        Size => "code",
        Vgpr => "vgpr",
        Sgpr => "sgpr",
        Lds => "lds",
        Scratch => "scratch",
        Spills => "spills",
        Name => "kernel",
        Target => "target",
    }
}

/// The direction the rows are in: ▼ largest (or last) first, ▲ smallest (or A) first.
fn sort_arrow(s: kpack::kernels::SortBy, reverse: bool) -> char {
    use kpack::kernels::SortBy::*;
    let ascending = matches!(s, Name | Target);
    if ascending != reverse { '▲' } else { '▼' }
}

/// The kernels of the selected subtree: a table, per-target totals, the selected
/// kernel's detail. Spills are red, scratch yellow.
/// What the Kernels view draws from: its state, the name of the whole read, and
/// where the frame records the list (for clicks).
pub(crate) struct KernelsCtx<'a> {
    /// The view's state.
    pub state: &'a KernelsState,
    /// What a read of everything is called: `the tree`, `the archive`, or the name
    /// of the one file opened (a binary, a wheel).
    pub whole: String,
    /// Where the frame puts the list.
    pub drawn: &'a Drawn,
}

pub(crate) fn kernels(frame: &mut Frame, v: KernelsCtx, area: Rect, theme: Theme) {
    let (path, report) = match &v.state.report {
        _ if v.state.loading => {
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
    // A short terminal keeps the table and drops the kernel's detail.
    let detail_h = if area.height >= 16 { 6 } else { 0 };
    let [head, list, detail] = Layout::vertical([
        Constraint::Length(4),
        Constraint::Min(3),
        Constraint::Length(detail_h),
    ])
    .areas(area);
    // Narrow terminals drop the AGPR and location columns (the detail shows them).
    let wide = area.width >= 120;
    let shown = v.state.rows();
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
    let mut title = match &v.state.entry {
        Some((key, arch)) => format!("{key} {arch}"),
        None if path.is_empty() => v.whole.clone(),
        None => path.clone(),
    };
    // The code objects of what is shown: all of the read's, or, narrowed to an entry
    // or a search, those the shown kernels come from.
    let code_objects = if v.state.entry.is_none() && v.state.filter.is_empty() {
        report.code_objects
    } else {
        shown
            .iter()
            .map(|k| (&k.path, &k.key, k.bundle, &k.target))
            .collect::<std::collections::BTreeSet<_>>()
            .len() as u64
    };
    if !v.state.filter.is_empty() {
        title = format!("{title} matching {:?}", v.state.filter);
    }
    let marked = if v.state.marks.is_empty() {
        String::new()
    } else {
        format!(" · {} marked", v.state.marks.len())
    };
    frame.render_widget(
        Paragraph::new(vec![
            Line::from(format!(
                "{} kernel{} in {} code object{} · {} of code · {} spilling · by {} {}{marked}",
                shown.len(),
                if shown.len() == 1 { "" } else { "s" },
                code_objects,
                if code_objects == 1 { "" } else { "s" },
                size(code),
                spilling,
                kernel_sort_label(v.state.sort),
                sort_arrow(v.state.sort, v.state.reverse)
            )),
            Line::from(Span::styled(targets.join(" · "), theme.fg(Color::Gray))),
        ])
        .block(Block::bordered().title(format!(" kernels of {title} "))),
        head,
    );
    let rows_h = list.height.saturating_sub(3) as usize;
    let start = v.state.cursor.saturating_sub(rows_h.saturating_sub(1));
    // Data rows start under the border and the header.
    v.drawn.list.set(Rect {
        x: list.x + 1,
        y: list.y + 2,
        width: list.width.saturating_sub(2),
        height: rows_h as u16,
    });
    v.drawn.list_first.set(start);
    let opt = |v: Option<u64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
    // Numbers right-aligned, as the CLI prints them.
    let num = |s: String| Cell::from(Line::from(s).right_aligned());
    let page: Vec<_> = shown
        .iter()
        .enumerate()
        .skip(start)
        .take(rows_h.max(1))
        .collect();
    let where_of = |r: &kpack::kernels::KernelRow| match (&r.key, r.bundle) {
        (Some(key), _) => key.clone(),
        (None, Some(b)) => format!("{}#{b}", r.path),
        _ => r.path.clone(),
    };
    // The sorted column says so, with its direction.
    let sorted = sort_column(v.state.sort);
    let arrow = sort_arrow(v.state.sort, v.state.reverse);
    let mut heads: Vec<&str> = vec!["code", "vgpr"];
    if wide {
        heads.push("agpr");
    }
    heads.extend(["sgpr", "lds", "scratch", "spills", "waves", "target"]);
    // Each row's values for those columns, as shown.
    let values: Vec<Vec<String>> = page
        .iter()
        .map(|(_, r)| {
            let k = &r.kernel;
            let spills = k.spills().unwrap_or(0);
            let mut v = vec![k.code_size.map_or_else(|| "-".into(), size), opt(k.vgpr)];
            if wide {
                v.push(opt(k.agpr));
            }
            v.extend([
                opt(k.sgpr),
                opt(k.lds),
                opt(k.scratch),
                // `!` marks spilling kernels without colours too, as the CLI does.
                if spills > 0 {
                    format!("{spills}!")
                } else {
                    opt(k.spills())
                },
                r.occupancy
                    .map_or_else(|| "-".into(), |o| format!("{}/{}", o.waves, o.max_waves)),
                r.target.clone(),
            ]);
            v
        })
        .collect();
    // Columns as wide as their header (with the arrow) or their widest value on the
    // page; the name takes what is left, the location at most a third of it.
    let cols: Vec<(String, u16)> = heads
        .iter()
        .enumerate()
        .map(|(c, h)| {
            let h = if *h == sorted {
                format!("{h}{arrow}")
            } else {
                h.to_string()
            };
            let w = values
                .iter()
                .map(|v| v[c].chars().count())
                .chain([h.chars().count()])
                .max()
                .unwrap_or(1);
            (h, w as u16)
        })
        .collect();
    let fixed: u16 = cols.iter().map(|c| c.1 + 1).sum();
    let left = list.width.saturating_sub(2 + fixed);
    let where_w = if wide {
        let longest = page
            .iter()
            .map(|(_, r)| where_of(r).chars().count())
            .max()
            .unwrap_or(5) as u16;
        longest.clamp(5, (left / 3).max(5))
    } else {
        0
    };
    let name_w = left.saturating_sub(if wide { where_w + 1 } else { 0 });
    let at = |name: &str| heads.iter().position(|h| *h == name).unwrap_or(usize::MAX);
    let (scratch_c, spills_c, target_c) = (at("scratch"), at("spills"), at("target"));
    let rows: Vec<Row> = page
        .iter()
        .zip(values)
        .map(|(&(i, r), vals)| {
            let k = &r.kernel;
            let mut cells: Vec<Cell> = vals
                .into_iter()
                .enumerate()
                .map(|(c, v)| {
                    let style = if c == scratch_c && k.scratch.unwrap_or(0) > 0 {
                        theme.fg(Color::Yellow)
                    } else if c == spills_c && k.spills().unwrap_or(0) > 0 {
                        theme.fg(Color::LightRed)
                    } else {
                        Style::new()
                    };
                    if c == target_c {
                        Cell::from(v)
                    } else {
                        num(v).style(style)
                    }
                })
                .collect();
            // A marked kernel: `*` before its name, as the inspector marks rows.
            let marked = v.state.is_marked(r);
            cells.push(Cell::from(if marked {
                format!(
                    "* {}",
                    end_cut(k.display_name(), (name_w as usize).saturating_sub(2))
                )
            } else {
                end_cut(k.display_name(), name_w as usize)
            }));
            if wide {
                cells.push(Cell::from(middle_cut(&where_of(r), where_w as usize)));
            }
            let mut row = Row::new(cells);
            if marked {
                row = row.style(theme.fg(Color::LightCyan).add_modifier(Modifier::BOLD));
            }
            if i == v.state.cursor {
                row = row.style(theme.selected());
            }
            row
        })
        .collect();
    let mut widths: Vec<Constraint> = cols.iter().map(|c| Constraint::Length(c.1)).collect();
    widths.push(Constraint::Min(name_w.min(12)));
    let mut header: Vec<String> = cols.iter().map(|c| c.0.clone()).collect();
    header.push(if sorted == "kernel" {
        format!("kernel{arrow}")
    } else {
        "kernel".into()
    });
    if wide {
        widths.push(Constraint::Length(where_w));
        header.push("where".into());
    }
    let header: Vec<Cell> = header
        .into_iter()
        .enumerate()
        .map(|(c, h)| {
            // Number columns' headers sit over their numbers.
            if c < target_c {
                Cell::from(Line::from(h).right_aligned())
            } else {
                Cell::from(h)
            }
        })
        .collect();
    let table = Table::new(rows, widths)
        .header(Row::new(header).style(Style::new().add_modifier(Modifier::BOLD)))
        .block(Block::bordered());
    frame.render_widget(table, list);
    if detail.height == 0 {
        return;
    }
    let lines = match shown.get(v.state.cursor) {
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
