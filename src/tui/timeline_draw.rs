//! Drawing the timeline: the header, the lanes with their axis, the panes around.

use super::timeline::*;
use super::widgets::Theme;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

/// Draw the timeline.
pub fn draw(frame: &mut Frame, t: &Timeline, theme: Theme) {
    if super::widgets::too_small(frame) {
        return;
    }
    let area = frame.area();
    let [head, body, detail, status] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(2),
        Constraint::Length(1),
    ])
    .areas(area);
    header(frame, t, head, theme);
    // The summary sits beside the lanes when there is room, under them on a narrow
    // terminal (trial 31: below 90 columns `s` did nothing).
    let (lanes_area, summary_area) = if !t.summary {
        (body, None)
    } else if body.width >= 90 {
        let [l, s] = Layout::horizontal([Constraint::Min(20), Constraint::Length(38)]).areas(body);
        (l, Some(s))
    } else if body.height >= 14 {
        let [l, s] =
            Layout::vertical([Constraint::Min(6), Constraint::Length(body.height / 2)]).areas(body);
        (l, Some(s))
    } else {
        (body, None)
    };
    lanes(frame, t, lanes_area, theme);
    if let Some(a) = summary_area {
        super::timeline_panes::summary(frame, t, a, theme);
    }
    super::timeline_panes::job_detail(frame, t, detail, theme);
    let find_hint;
    let hint = if t.find.typing {
        find_hint = format!(" search: {}▏  Enter finds · Esc clears", t.find.search);
        find_hint.as_str()
    } else if t.find.active() {
        find_hint = format!(
            " {}{}{} match(es) · n next · N previous · t next target · Esc clears · ? help",
            if t.find.search.is_empty() {
                String::new()
            } else {
                format!("\"{}\" · ", t.find.search)
            },
            t.find
                .target
                .as_deref()
                .map(|a| format!("target {a} · "))
                .unwrap_or_default(),
            t.find.count(t.current())
        );
        find_hint.as_str()
    } else if t.replay.is_some() {
        "Space play/pause · < > speed · r restart · Esc leave replay · ←→ pan · +- zoom · ? help · q quit"
    } else {
        "←→ pan · +- zoom · 0 fit · ↑↓ lanes · Tab next job · Enter zoom to job · / find · t target · Space replay · [ ] build · s summary · ? help · q quit"
    };
    frame.render_widget(
        Paragraph::new(hint).style(if theme.color {
            Style::new().fg(Color::Black).bg(Color::Gray)
        } else {
            Style::new().add_modifier(Modifier::REVERSED)
        }),
        status,
    );
    if t.help {
        super::timeline_panes::help(frame, area);
    }
    if t.log.open {
        super::messages::draw(frame, &t.log, area, theme);
    }
}

fn header(frame: &mut Frame, t: &Timeline, area: Rect, theme: Theme) {
    let b = t.current();
    let file = t
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut spans = vec![
        Span::styled(
            format!(" {file} "),
            Style::new().add_modifier(Modifier::BOLD),
        ),
        Span::raw(format!(
            "· build {}/{} · {} jobs · {} ",
            t.build + 1,
            t.trace.builds.len().max(1),
            b.jobs.len(),
            dur(t.model.wall)
        )),
    ];
    if let Some(r) = t.replay {
        let (running, done, total) = t.counters();
        spans.push(Span::styled(
            format!(
                "{} {}× {} / {} · running {running} · done {done}/{total} ",
                if r.playing { "▶" } else { "⏸" },
                SPEEDS[r.speed],
                dur(r.pos as i64),
                dur(t.model.wall)
            ),
            if theme.color {
                Style::new().fg(Color::LightYellow)
            } else {
                Style::new()
            },
        ));
    }
    if let Some(f) = &t.follow {
        let text = match &f.error {
            Some(e) => format!("· following: {e} "),
            None => format!(
                "· following · {} lines{} ",
                t.trace.lines,
                if f.restarts > 0 {
                    format!(" · new build ({})", f.restarts)
                } else {
                    String::new()
                }
            ),
        };
        spans.push(Span::styled(
            text,
            if theme.color {
                Style::new().fg(Color::LightGreen)
            } else {
                Style::new()
            },
        ));
    }
    if t.trace.diagnostic_count > 0 {
        spans.push(Span::raw(format!(
            "· {} bad lines skipped (! lists them) ",
            t.trace.diagnostic_count
        )));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn lanes(frame: &mut Frame, t: &Timeline, area: Rect, theme: Theme) {
    t.last_lanes_area.set(area);
    let w = area.width.saturating_sub(LABEL_W) as usize;
    if w == 0 || area.height < 2 {
        return;
    }
    let buf = frame.buffer_mut();
    // Axis: a tick every ~12 columns at a round step.
    let per_col = t.view_span / w as f64;
    let step = nice_step(per_col * 12.0);
    let mut tick = (t.view_start / step).ceil() * step;
    let axis_style = if theme.color {
        Style::new().fg(Color::DarkGray)
    } else {
        Style::new()
    };
    buf.set_string(area.x, area.y, "    ", axis_style);
    while tick < t.view_start + t.view_span {
        let x = ((tick - t.view_start) / per_col) as usize;
        if x + 1 < w {
            let label = format!("┆{}", dur(tick as i64));
            let room = w - x;
            let label: String = label.chars().take(room).collect();
            buf.set_string(area.x + LABEL_W + x as u16, area.y, label, axis_style);
        }
        tick += step;
    }
    let jobs = &t.current().jobs;
    let rows = (area.height - 1) as usize;
    let pos = t.replay_pos();
    for r in 0..rows {
        let lane = t.lane_scroll + r;
        let y = area.y + 1 + r as u16;
        if lane >= t.model.lanes.len() {
            break;
        }
        buf.set_string(area.x, y, format!("{lane:>3} "), axis_style);
        let mut x = 0;
        while x < w {
            let Some(i) = t.job_at(lane, x, w) else {
                x += 1;
                continue;
            };
            // The run of columns this job covers.
            let mut end = x + 1;
            while end < w && t.job_at(lane, end, w) == Some(i) {
                end += 1;
            }
            let j = &jobs[i];
            let sel = t.selected == Some(i);
            let running = pos.is_some_and(|p| j.end > p);
            let hidden = t.find.active() && !t.find.matches(t.current(), j);
            let colour = if hidden {
                Color::DarkGray
            } else {
                kind_colour(t, j)
            };
            let label = short_name(t.current(), j);
            let mut chars = label.chars();
            for cx in x..end {
                let cell = &mut buf[(area.x + LABEL_W + cx as u16, y)];
                let text = if end - x >= 6 && cx > x && !hidden {
                    chars.next()
                } else {
                    None
                };
                if theme.color {
                    let mut st = Style::new().bg(colour).fg(Color::Black);
                    if (i % 2) == 1 {
                        st = st.add_modifier(Modifier::DIM);
                    }
                    if sel {
                        st = Style::new()
                            .bg(Color::White)
                            .fg(Color::Black)
                            .add_modifier(Modifier::BOLD);
                    }
                    if running {
                        st = st.add_modifier(Modifier::ITALIC);
                    }
                    cell.set_char(text.unwrap_or(' ')).set_style(st);
                } else {
                    let st = if sel {
                        Style::new().add_modifier(Modifier::REVERSED)
                    } else {
                        Style::new()
                    };
                    let c = if cx == x && x > 0 {
                        '▕'
                    } else if hidden {
                        '·'
                    } else {
                        kind_char(j.kind)
                    };
                    cell.set_char(text.unwrap_or(c)).set_style(st);
                }
            }
            x = end;
        }
    }
    // The replay head.
    if let Some(p) = pos {
        let x = ((p as f64 - t.view_start) / per_col) as i64;
        if x >= 0 && (x as usize) < w {
            let shown = rows.min(t.model.lanes.len().saturating_sub(t.lane_scroll));
            for r in 0..=shown {
                let cell = &mut buf[(area.x + LABEL_W + x as u16, area.y + r as u16)];
                if cell.symbol() == " " {
                    cell.set_char('│');
                }
            }
        }
    }
}

/// A round time step (1, 2, 5 × 10ⁿ ms) near `ms`.
fn nice_step(ms: f64) -> f64 {
    let ms = ms.max(1.0);
    let p = 10f64.powf(ms.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if p * m >= ms {
            return p * m;
        }
    }
    p * 10.0
}
