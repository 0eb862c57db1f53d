//! The TUI's wheel split: the projection shown in the families view when a wheel is
//! open, the confirm dialog (device package prefix, overlay root, output), and the
//! result screen listing the wheels written. The live panes are the pack's.

use super::app::PackSettings;
use super::viewstate::FamiliesState;
use super::widgets::Side;
use super::widgets::Theme;
use crate::text::size;
use kpack::scan::TreeReport;
use kpack::wheel::bootstrap::dist_name;
use kpack::wheel_split::{WheelProjection, WheelSplitReport, project};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Wrap};

/// The projection of the wheel `report` for the families view's selection.
pub fn projection(
    (report, families): (Option<&TreeReport>, &FamiliesState),
    overlay: &str,
) -> Option<WheelProjection> {
    let report = report?;
    let sel = families.wheel_selection(Some(report));
    Some(project(report, overlay, Some(&sel.targets), &[]))
}

/// Lines of the projected host and device wheels (`prefix` names the device wheels).
pub fn projection_lines(p: &WheelProjection, prefix: &str, theme: Theme) -> Vec<Line<'static>> {
    let mut l = vec![Line::from(Span::styled(
        "projected wheels: a guess (zstd keeps 25-40% of code)",
        Style::new().add_modifier(Modifier::BOLD),
    ))];
    // One name column as wide as the longest name, so the sizes line up (trial 38).
    let names: Vec<String> = p
        .devices
        .iter()
        .map(|d| dist_name(prefix, &d.key))
        .collect();
    let w = names
        .iter()
        .map(|n| n.chars().count())
        .chain([10])
        .max()
        .unwrap_or(10);
    l.push(Line::from(format!(
        "{:<w$} {:>10}–{}",
        "host wheel",
        size(p.host),
        size(p.host_high)
    )));
    for (d, name) in p.devices.iter().zip(names) {
        l.push(Line::from(format!(
            "{name:<w$} {:>10}–{:<10} {} ({} raw)",
            size(d.low),
            size(d.high),
            d.targets.join(" "),
            size(d.raw)
        )));
    }
    if p.left_out > 0 {
        l.push(Line::from(Span::styled(
            format!(
                "{} code objects of unselected targets are left out",
                p.left_out
            ),
            theme.fg(Color::Yellow),
        )));
    }
    if !p.unknown.is_empty() {
        l.push(Line::from(Span::styled(
            format!(
                "no rocm-bootstrap package for {}: deselect them to split",
                p.unknown.join(" ")
            ),
            theme.fg(Color::LightRed),
        )));
    }
    l
}

/// The confirm dialog of a wheel split.
pub fn confirm(
    frame: &mut Frame,
    picked: (Option<&TreeReport>, &FamiliesState),
    s: &PackSettings,
    at: (usize, usize),
    area: Rect,
    theme: Theme,
) {
    let f = |i: usize, label: &str| super::packview::field_line(s, at, i, label);
    let mut lines = vec![
        Line::from(Span::styled(
            "Split this wheel into a host wheel and device wheels",
            Style::new().add_modifier(Modifier::BOLD),
        )),
        Line::from(""),
        f(0, "device prefix"),
        f(1, "overlay root "),
        f(2, "output       "),
        Line::from(format!(
            "  targets       {}",
            if s.selection.is_empty() {
                "(none)".to_string()
            } else {
                s.selection.label()
            }
        )),
        f(3, "zstd level   "),
        Line::from(""),
    ];
    if let Some(p) = projection(picked, &s.overlay) {
        lines.extend(projection_lines(&p, &s.group, theme));
    }
    lines.push(Line::from(""));
    lines.push(Line::from(
        "Enter starts; the wheel is never modified, nothing appears in the output until done.",
    ));
    let w = area.width.min(100);
    let h = area.height.min(lines.len() as u16 + 2);
    let r = super::widgets::centered(area, w, h);
    frame.render_widget(Clear, r);
    frame.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" split wheel ")),
        r,
    );
}

/// The result screen.
pub fn done(
    frame: &mut Frame,
    side: Side,
    r: &Result<WheelSplitReport, String>,
    area: Rect,
    theme: Theme,
) {
    let r = match r {
        Ok(r) => r,
        Err(e) => {
            let title = if e == "cancelled" {
                " split cancelled: nothing was written "
            } else {
                " split failed: nothing was written "
            };
            frame.render_widget(
                Paragraph::new(e.as_str())
                    .wrap(Wrap { trim: false })
                    .block(Block::bordered().title(title)),
                area,
            );
            return;
        }
    };
    let mut l = vec![
        Line::from(Span::styled(
            format!("split {} {} into {}", r.name, r.version, r.output.display()),
            theme.fg(Color::LightGreen).add_modifier(Modifier::BOLD),
        )),
        Line::from(format!(
            "{} binaries rewritten host-only, {} code objects archived; {} -> {}",
            r.rewritten,
            r.code_objects,
            size(r.bytes_in),
            size(r.bytes_out)
        )),
    ];
    // What to do next comes before the list, so it shows whatever the list's length.
    if let Some(x) = r.extras.first() {
        l.push(Line::from(format!(
            "install: pip install --find-links {} '{}[{x}]'",
            r.output.display(),
            r.name.to_lowercase()
        )));
    }
    for w in &r.warnings {
        l.push(Line::from(Span::styled(w.clone(), theme.fg(Color::Yellow))));
    }
    l.push(Line::from(""));
    l.push(Line::from(format!(
        "host    {:>11}  {}",
        size(r.host.bytes),
        r.host.file
    )));
    for d in &r.devices {
        let ts: Vec<&str> = d
            .archives
            .iter()
            .flat_map(|a| a.targets.iter().map(String::as_str))
            .collect();
        l.push(Line::from(format!(
            "device  {:>11}  {}  ({})",
            size(d.bytes),
            d.file,
            ts.join(" ")
        )));
    }
    // Scrolls (↑↓, PgUp/PgDn) with "more below" when the wheels do not fit.
    super::widgets::side_pane(
        frame,
        side,
        l,
        (Block::bordered().title(" wheels written "), true),
        area,
        theme,
    );
}
