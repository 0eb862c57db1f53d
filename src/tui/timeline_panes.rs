//! The timeline's panes: the summary, the selected job's detail, the key help.

use super::timeline::*;
use super::widgets::Theme;
use kpack::trace::JobKind;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

pub(crate) fn summary(frame: &mut Frame, t: &Timeline, area: Rect, theme: Theme) {
    let a = &t.model.analysis;
    let bold = Style::new().add_modifier(Modifier::BOLD);
    let mut lines = vec![
        Line::from(vec![
            Span::styled("wall         ", bold),
            Span::raw(dur(a.wall_ms)),
        ]),
        Line::from(format!("job time     {}", dur(a.job_ms))),
        Line::from(format!(
            "parallelism  avg {:.1} · peak {}",
            a.average_parallelism, a.peak_parallelism
        )),
        Line::from(format!(
            "critical     {}{}",
            dur(a.critical_path_ms),
            a.critical_object
                .as_deref()
                .map(|o| format!(" ({})", base(o)))
                .unwrap_or_default()
        )),
        Line::from(format!(
            "idle         {:.1} slot·s",
            a.idle_capacity_ms as f64 / 1000.0
        )),
        Line::from(format!("plain est.   {}", dur(a.estimated_plain_wall_ms))),
        Line::from(""),
    ];
    if !a.per_arch_detail.is_empty() {
        lines.push(Line::styled("device time per arch", bold));
        let max = a
            .per_arch_detail
            .values()
            .map(|v| v.total_ms)
            .max()
            .unwrap_or(1)
            .max(1);
        // Targets in processor order (gfx900 before gfx1030), as every other view.
        let mut archs: Vec<_> = a.per_arch_detail.iter().collect();
        archs.sort_by(|x, y| kpack::natural::target_cmp(x.0, y.0));
        for (arch, v) in archs {
            let bar = ((v.total_ms as f64 / max as f64) * 10.0).round() as usize;
            let colour = arch_colour(t, arch);
            lines.push(Line::from(vec![
                Span::raw(format!(
                    " {:<10}",
                    arch.chars().take(10).collect::<String>()
                )),
                Span::styled(
                    format!("{:<10}", "█".repeat(bar)),
                    if theme.color {
                        Style::new().fg(colour)
                    } else {
                        Style::new()
                    },
                ),
                Span::raw(format!(" {}", dur(v.total_ms))),
            ]));
        }
        lines.push(Line::from(""));
    }
    if !a.objects.is_empty() {
        lines.push(Line::styled("slowest objects (critical path)", bold));
        for o in a.objects.iter().take(5) {
            lines.push(Line::from(format!(
                " {:<22} {}",
                base(&o.object).chars().take(22).collect::<String>(),
                dur(o.critical_path_ms)
            )));
        }
    } else if !a.slowest_steps.is_empty() {
        lines.push(Line::styled("slowest steps", bold));
        for s in a.slowest_steps.iter().take(5) {
            lines.push(Line::from(format!(
                " {:<22} {}",
                base(&s.name).chars().take(22).collect::<String>(),
                dur(s.ms)
            )));
        }
    }
    frame.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::LEFT).title(" Summary ")),
        area,
    );
}

pub(crate) fn job_detail(frame: &mut Frame, t: &Timeline, area: Rect, theme: Theme) {
    let text = match t
        .selected
        .and_then(|i| t.current().jobs.get(i).map(|j| (i, j)))
    {
        None => vec![Line::from(
            " No job selected: Tab selects the first, ↑↓ move between lanes, click a bar.",
        )],
        Some((i, j)) => {
            let kind = match j.kind {
                JobKind::Device => format!(
                    "device compile for {}",
                    t.current().arch(j).unwrap_or_default()
                ),
                JobKind::Bundle => "bundling".to_string(),
                JobKind::Host => "host compile".to_string(),
                JobKind::Other => "build step".to_string(),
            };
            vec![
                Line::from(vec![
                    Span::styled(
                        format!(" {} ", t.current().label(j)),
                        if theme.color {
                            Style::new()
                                .fg(kind_colour(t, j))
                                .add_modifier(Modifier::BOLD)
                        } else {
                            Style::new().add_modifier(Modifier::BOLD)
                        },
                    ),
                    Span::raw(format!("· {kind}")),
                ]),
                Line::from(format!(
                    " start {} · end {} · took {} · lane {} · line {}",
                    dur(j.start),
                    dur(j.end),
                    dur(j.duration()),
                    t.model.lane_of[i],
                    j.line
                )),
            ]
        }
    };
    frame.render_widget(Paragraph::new(text), area);
}

pub(crate) fn help(frame: &mut Frame, area: Rect) {
    let keys = [
        ("← → / h l", "pan (Shift or H L: a whole screen)"),
        ("+ -  / wheel", "zoom in, out"),
        ("0 / Home", "fit the whole build"),
        ("↑ ↓ / k j", "previous, next lane"),
        ("Tab / Shift-Tab", "next, previous job in time"),
        ("Enter", "zoom to the selected job"),
        ("click", "select a job"),
        ("PgUp PgDn", "scroll lanes"),
        ("[ ]", "previous, next build"),
        ("Space", "replay: start, pause, resume"),
        ("r", "replay from the start"),
        ("< >", "replay speed (1× to 100×)"),
        ("s", "summary pane"),
        ("/", "find jobs by name (Enter jumps to the first)"),
        ("n N", "next, previous match"),
        ("t", "only one target's device compiles (cycles)"),
        (
            "Esc",
            "one step back: the search and target, else the replay, else the selection",
        ),
        ("!", "the trace's bad lines, with their numbers"),
        ("?", "this help"),
        ("q", "quit"),
    ];
    super::widgets::key_overlay(frame, area, " Timeline keys ", &keys, 16);
}
