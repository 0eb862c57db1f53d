//! The Pack view: the confirm dialog (its fields), the replace question, the live
//! panes of a running pack and its result.

use super::app::PackingState;
use super::widgets::{Theme, centered};
use crate::text::size;
use kpack::scan::TreeReport;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Wrap};

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
        None if field == i => Line::from(format!(
            "{mark} {label} - {} +  (←/→, Home/End)",
            level(s.level)
        )),
        None => Line::from(format!("{mark} {label} {}", level(s.level))),
    }
}

/// A zstd level as the dialog shows it: the highest is `max` (as `--level max`).
fn level(l: i32) -> String {
    if l >= kpack::kpack::archive::LEVEL_MAX {
        format!("{l} (max: long-distance matching, a window per kernel)")
    } else {
        l.to_string()
    }
}

/// The pack of `packing`, on the tree `report` holds (`partial`: its scan still
/// runs).
pub(crate) fn pack(
    frame: &mut Frame,
    packing: &PackingState,
    (report, partial): (Option<&TreeReport>, bool),
    area: Rect,
    theme: Theme,
) {
    use super::app::PackState;
    match &packing.run {
        None => frame.render_widget(
            Paragraph::new("Choose families in the Architectures view and press P."),
            area,
        ),
        // A wheel's dialog and result are the wheel split's ([`super::ui`] draws them).
        Some(PackState::Confirm { settings, .. }) if settings.wheel => {}
        Some(PackState::WheelDone(_)) => {}
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
                    "  selection  {}{}",
                    if settings.selection.is_empty() {
                        "(none selected)".to_string()
                    } else {
                        settings.selection.label()
                    },
                    if partial {
                        " (scanning: it can still grow)"
                    } else {
                        ""
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
                Line::from(format!(
                    "  other code {}",
                    match settings.unassigned {
                        kpack::pack::Unassigned::Error => {
                            "stop: code for targets not selected stops the pack (F4: drop it)"
                        }
                        kpack::pack::Unassigned::Drop => {
                            "drop: code for targets not selected is left out and reported (F4)"
                        }
                    }
                )),
                match report.map(|r| settings.selection.left_out(r)) {
                    Some(out) if !out.is_empty() => Line::from(Span::styled(
                        format!(
                            "  left out   {} (code objects): {}",
                            out.iter()
                                .map(|(a, n)| format!("{a} ({n})"))
                                .collect::<Vec<_>>()
                                .join(", "),
                            match settings.unassigned {
                                kpack::pack::Unassigned::Error => "the pack stops",
                                kpack::pack::Unassigned::Drop => "dropped",
                            },
                        ),
                        theme.fg(Color::LightRed),
                    )),
                    _ => Line::from("  (every target with code is selected)"),
                },
                Line::from(format!(
                    "  damaged    {}",
                    if settings.copy_damaged {
                        "copied with their device code (F5)"
                    } else {
                        "stop the pack (F5: copy them as they are)"
                    }
                )),
                Line::from(""),
                Line::from("Enter starts: written to a staging directory, verified, then placed."),
            ];
            let w = area.width.min(90);
            // Long lines (what is left out) wrap: the box is as high as they make it.
            let inner = usize::from(w.saturating_sub(2)).max(1);
            let rows: usize = lines.iter().map(|l| l.width().max(1).div_ceil(inner)).sum();
            let h = area.height.min(rows as u16 + 2);
            let r = centered(area, w, h);
            frame.render_widget(Clear, r);
            frame.render_widget(
                Paragraph::new(lines)
                    .wrap(Wrap { trim: false })
                    .block(Block::bordered().title(" confirm ")),
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
            super::widgets::progress(
                frame,
                g,
                (
                    Block::bordered().title(if report.is_some_and(|r| r.wheel.is_some()) {
                        " splitting the wheel "
                    } else {
                        " packing "
                    }),
                    ratio,
                    label,
                ),
                theme,
                Color::LightGreen,
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
                .map(|(w, (f, ph))| Line::from(format!("worker {w}: {:<9}{f}", ph.name())))
                .collect();
            frame.render_widget(
                Paragraph::new(wl).block(Block::bordered().title(" workers ")),
                workers,
            );
            let fl: Vec<Line> = p
                .families
                .iter()
                .map(|(f, (k, b))| {
                    Line::from(format!("{f:<14} {k:>6} code objects  {:>11}", size(*b)))
                })
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
            let mut text = e.to_string();
            if e != "cancelled" {
                text.push_str("\n\nEnter or Esc: back to the dialog");
            }
            frame.render_widget(
                Paragraph::new(text)
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
                    a.code_objects,
                    if a.code_objects == 1 {
                        "code object"
                    } else {
                        "code objects"
                    },
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
