//! The Architectures view: families and targets to pack, device code per target,
//! the quick projection and the core's exact plan.

use super::app::Drawn;
use super::viewstate::FamiliesState;
use super::widgets::*;
use crate::text::size;
use kpack::family::PRESETS;
use kpack::scan::FileKind;
use kpack::scan::TreeReport;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};

/// What the Architectures view draws from: the scan, the view's state, where the
/// frame records the list (and the quick projection it keeps), the side pane.
pub(crate) struct FamiliesCtx<'a> {
    /// The scan, once done.
    pub report: Option<&'a TreeReport>,
    /// The view's state.
    pub state: &'a FamiliesState,
    /// Where the frame puts things.
    pub drawn: &'a Drawn,
    /// The side pane.
    pub side: Side<'a>,
}

pub(crate) fn families(frame: &mut Frame, v: FamiliesCtx, area: Rect, theme: Theme) {
    let Some(report) = v.report else {
        frame.render_widget(Paragraph::new("scanning…"), area);
        return;
    };
    let [left, right] =
        Layout::horizontal([Constraint::Length(24), Constraint::Min(10)]).areas(area);
    let picks = v.state.picks();
    let assign = |arch: &str| picks.iter().position(|p| p.takes(arch));
    let mut lines: Vec<Line> = PRESETS
        .iter()
        .enumerate()
        .map(|(i, (name, _))| {
            let has = report
                .archs
                .keys()
                .any(|a| kpack::family::Family::parse(name).is_ok_and(|f| f.contains(a)));
            // Padded, so the cursor covers the whole row as in the Explorer.
            let mut line = Line::from(format!(
                "{:<w$}",
                format!(
                    "[{}] {name}{}",
                    if v.state.presets[i] { 'x' } else { ' ' },
                    if has { "" } else { " ·" }
                ),
                w = left.width.saturating_sub(2) as usize
            ));
            if i == v.state.cursor {
                line = line.style(theme.selected());
            }
            line
        })
        .collect();
    lines.push(Line::styled("single targets", theme.fg(Color::DarkGray)));
    for (k, (p, on)) in v.state.singles.iter().enumerate() {
        let covered = v.state.covered_by(p);
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
        let mut line = Line::from(format!("{text:<inner$}"));
        if PRESETS.len() + k == v.state.cursor {
            line = line.style(theme.selected());
        }
        lines.push(line);
    }
    v.drawn.list.set(Rect {
        x: left.x + 1,
        y: left.y + 1,
        width: left.width.saturating_sub(2),
        height: left.height.saturating_sub(2),
    });
    v.drawn.list_first.set(0);
    frame.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" architectures ")),
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
        // Selected targets' bars are solid, the others light: visible without
        // colours too (trial 32).
        let cell = if fam.is_some() { "█" } else { "░" };
        l.push(Line::from(vec![
            Span::raw(format!("{arch:<16} ")),
            Span::styled(cell.repeat(n.max(1)), style),
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
        let overlay = super::viewstate::overlay_guess(v.report);
        if let Some(p) = super::wheelsplit::projection((v.report, v.state), &overlay) {
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
            v.side,
            l,
            (
                Block::bordered().title(" raw device code per target "),
                true,
            ),
            right,
            theme,
        );
        return;
    }
    let (host_tree, per_family) = quick_projection(v.drawn, report, &picks);
    // A guess before compressing anything: zstd -3 keeps 25-40% of code objects
    // (bench/), so the range is shown; `e` computes the real figure.
    let raw: u64 = per_family.iter().sum();
    let (lo, hi) = (raw / 4, raw * 2 / 5);
    // A small tree gets the exact plan at once (below), not a guess.
    if !super::viewstate::plans_automatically(v.report) {
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
    let selection = v.state.selection();
    match &v.state.plan {
        _ if v.state.planning => l.push(Line::from("computing the pack plan…")),
        Some((for_sel, Ok(p))) if *for_sel == selection => {
            l.push(Line::from(Span::styled(
                if p.projection == kpack::pack::Projection::Exact {
                    "pack plan (every code object compressed: exact)"
                } else {
                    "pack plan (estimate from a compressed sample)"
                },
                Style::new().add_modifier(Modifier::BOLD),
            )));
            let approx = if p.projection == kpack::pack::Projection::Exact {
                ""
            } else {
                "≈"
            };
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
        v.side,
        l,
        (
            Block::bordered().title(" raw device code per target "),
            true,
        ),
        right,
        theme,
    );
}

/// The quick projection's inputs: the host-only tree's bytes and each pick's raw
/// device bytes. A pass over every file, so it is kept for the selection and the
/// report it was made for (a frame on a 100,000-file tree took 27 ms with it).
fn quick_projection(
    drawn: &Drawn,
    report: &TreeReport,
    picks: &[super::app::Pick],
) -> (u64, Vec<u64>) {
    let key = (
        picks
            .iter()
            .map(|p| p.name().to_string())
            .collect::<Vec<_>>(),
        report.files.len(),
        report.totals.bytes,
    );
    if let Some((k, v)) = drawn.projection.borrow().as_ref()
        && *k == key
    {
        return v.clone();
    }
    let assign = |arch: &str| picks.iter().position(|p| p.takes(arch));
    // What leaves the tree: the whole pages of `.hip_fatbin` of the binaries a pack
    // rewrites, and their kernels of the selected families go to the archives.
    let packed: Vec<&kpack::scan::FileReport> = report
        .files
        .iter()
        .filter(|f| f.kind == FileKind::FatBinary && f.packable())
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
    let v = (host_tree, per_family);
    *drawn.projection.borrow_mut() = Some((key, v.clone()));
    v
}
