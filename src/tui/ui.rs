//! The screen: tabs, the current view, the status line, overlays. Each view draws
//! itself in its own module; this shell draws them and imports no widget they need.

use super::app::{App, View};
use super::widgets::{Theme, too_small};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Wrap};

/// Draw the whole screen.
pub fn draw(frame: &mut Frame, app: &App, theme: Theme) {
    if too_small(frame) {
        return;
    }
    let area = frame.area();
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
    // Problems of the session, before the path (which the width may cut).
    let problems = app.log.problems();
    if problems > 0 {
        let style = if app.log.unseen_problems() > 0 {
            theme.fg(Color::LightRed).add_modifier(Modifier::BOLD)
        } else {
            theme.fg(Color::Gray)
        };
        let t = format!("  !{problems}");
        x += t.chars().count() as u16;
        tabs.push(Span::styled(t, style));
    }
    // The path cut in the middle, so its file name stays (trial 23).
    let room = (top.x + top.width).saturating_sub(x + 2) as usize;
    tabs.push(Span::raw(format!(
        "  {}",
        super::widgets::middle_cut(&app.title(), room)
    )));
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
            View::Explorer => {
                let rows = app.rows();
                let v = super::explorerview::ExplorerCtx {
                    scan: app.report.as_ref().zip(app.tree.as_ref()),
                    progress: app.progress,
                    partial: app.partial,
                    state: &app.explorer,
                    rows: &rows,
                    drawn: &app.drawn,
                    side: app.side(),
                };
                super::explorerview::explorer(frame, v, body, theme)
            }
            View::Families => {
                let v = super::familiesview::FamiliesCtx {
                    report: app.report.as_ref(),
                    state: &app.families,
                    drawn: &app.drawn,
                    side: app.side(),
                };
                super::familiesview::families(frame, v, body, theme)
            }
            View::Preview => {
                super::previewview::preview(frame, &app.preview, app.side(), body, theme)
            }
            View::Inspector => super::inspector::inspector(
                frame,
                (&app.inspector, &app.drawn),
                &app.title(),
                body,
                theme,
            ),
            View::Kernels => {
                let v = super::kernelsview::KernelsCtx {
                    state: &app.kernels,
                    whole: whole_name(app),
                    drawn: &app.drawn,
                };
                super::kernelsview::kernels(frame, v, body, theme);
                super::kernelmarks::draw_prompt(frame, &app.kernels, body);
            }
            View::Pack => pack(frame, app, body, theme),
        }
    }
    frame.render_widget(
        Paragraph::new(fit_status(&status(app), bottom.width as usize))
            .style(theme.fg(Color::Gray)),
        bottom,
    );
    if app.help {
        let wheel = app.report.as_ref().is_some_and(|r| r.wheel.is_some());
        super::help::help(frame, (&app.views, app.view), wheel, area);
    }
    if app.log.open {
        super::messages::draw(frame, &app.log, area, theme);
    }
}

/// The Pack view: a wheel's dialog and result are the wheel split's, the rest the
/// pack's.
fn pack(frame: &mut Frame, app: &App, body: Rect, theme: super::widgets::Theme) {
    use super::app::PackState;
    match &app.packing.run {
        Some(PackState::Confirm {
            settings,
            field,
            cursor,
        }) if settings.wheel => {
            let picked = (app.report.as_ref(), &app.families);
            super::wheelsplit::confirm(frame, picked, settings, (*field, *cursor), body, theme);
        }
        Some(PackState::WheelDone(r)) => super::wheelsplit::done(frame, app.side(), r, body, theme),
        _ => super::packview::pack(
            frame,
            &app.packing,
            (app.report.as_ref(), app.partial),
            body,
            theme,
        ),
    }
}

/// What the Kernels view calls a read of everything opened.
fn whole_name(app: &App) -> String {
    if app.inspector.index.is_some() {
        "the archive".to_string()
    } else if app.root_is_file {
        // Opened on one file (a binary, a wheel): that file, not "the tree".
        app.root.file_name().map_or_else(
            || app.root.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
    } else {
        "the tree".to_string()
    }
}

/// The status line cut to `width` columns so that its end (`? help · q quit`)
/// always shows: the view's hints give way first, ending in `…`.
fn fit_status(line: &str, width: usize) -> String {
    let n = line.chars().count();
    if n <= width {
        return line.to_string();
    }
    // The pack dialog's line ends in `Tab view` alone (its fields take every other key).
    let (head, tail) = match [" · Tab view · ? help · q quit", " · Tab view"]
        .into_iter()
        .find_map(|t| line.strip_suffix(t).map(|h| (h, t)))
    {
        Some(x) => x,
        None => return line.chars().take(width).collect(),
    };
    let tail_n = tail.chars().count();
    let room = width.saturating_sub(tail_n + 1);
    let cut: String = head.chars().take(room).collect();
    // End the cut at a separator when there is one, so no hint is half shown.
    let cut = match cut.rfind(" · ") {
        Some(i) if i > 0 => cut[..i].to_string(),
        _ => cut,
    };
    format!("{cut}…{tail}")
}

fn status(app: &App) -> String {
    if app.quit_asked {
        return " a pack is running: q again (or y) cancels it cleanly and quits; any other \
                key goes on"
            .to_string();
    }
    if let Some(p) = &app.jumps.prompt {
        return format!(
            " jump to: {p}▏ → {}  Enter go · Esc cancel",
            app.jump_target().as_deref().unwrap_or("(no match)")
        );
    }
    if app.explorer.filtering {
        let f = if app.view == View::Kernels {
            &app.kernels.filter
        } else {
            &app.explorer.filter
        };
        return format!(" filter: {f}▏  Enter keep · Esc clear");
    }
    if let Some(f) = &app.flash {
        return format!(" {f} · Tab view · ? help · q quit");
    }
    let hints = match app.view {
        View::Explorer | View::Families if app.side_focus => {
            "↑↓ PgUp PgDn scroll the pane · w, ← or Esc back to the list".to_string()
        }
        View::Explorer if app.explorer.note.is_some() => {
            app.explorer.note.clone().unwrap_or_default()
        }
        // Ranked by use: what a narrow footer cuts is the least needed (the sort and
        // the filter show under the list).
        View::Explorer => "Enter/p preview · K kernels · / filter · s/S sort · ↑↓ move · →← open/close · w detail"
            .to_string(),
        View::Families => app.families.note.clone().unwrap_or_else(|| {
            if app.report.as_ref().is_some_and(|r| r.wheel.is_some()) {
                "↑↓ move · Space toggle · P split the wheel".to_string()
            } else {
                "↑↓ move · Space toggle · e plan · P pack".to_string()
            }
        }),
        View::Preview => "↑↓ scroll".to_string(),
        View::Kernels => format!(
            "↑↓ move · s/S sort ({}{}) · / find by name · Space mark · x extract{}",
            super::kernelsview::kernel_sort_label(app.kernels.sort),
            if app.kernels.reverse { ", reversed" } else { "" },
            if app.kernels.entry.is_some() {
                " · a whole archive"
            } else {
                ""
            }
        ),
        // The last extract or verify shows in the view's header (and the log), so
        // the keys stay here (trial 38).
        View::Inspector => {
            "↑↓ move · x extract the selected code object · X extract all · v verify".to_string()
        }
        View::Pack if app.packing.note.is_some() => app.packing.note.clone().unwrap_or_default(),
        View::Pack => match &app.packing.run {
            Some(super::app::PackState::Confirm { settings, .. }) if settings.wheel => {
                "type to edit · ↑↓ field · Enter split · Esc back".to_string()
            }
            Some(super::app::PackState::Confirm { .. }) => {
                "type to edit · ↑↓ field · F2 layout · F3 archives · F4 other code · F5 damaged · Enter start · Esc back"
                    .to_string()
            }
            Some(super::app::PackState::Running(_)) if app.packing.cancelling => {
                "cancelling… removing what was staged; the output is left untouched".to_string()
            }
            Some(super::app::PackState::Running(_)) => {
                "Esc cancel (the output is left untouched)".to_string()
            }
            Some(super::app::PackState::Replace(_)) => {
                "y replace · n or Esc back to the dialog".to_string()
            }
            Some(super::app::PackState::Done(_) | super::app::PackState::WheelDone(_)) => {
                "o open the output in kpack-tui · Esc back".to_string()
            }
            _ => "Esc back".to_string(),
        },
    };
    // In the dialog every key types into its field: no keys it would swallow.
    if matches!(
        (app.view, &app.packing.run),
        (
            View::Pack,
            Some(super::app::PackState::Confirm { .. } | super::app::PackState::Replace(_))
        )
    ) {
        return format!(" {hints} · Tab view");
    }
    format!(" {hints} · Tab view · ? help · q quit")
}
