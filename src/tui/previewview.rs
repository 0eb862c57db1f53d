//! The rewrite preview: the core's plan for the selected fat binary, as text.

use super::widgets::*;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::Block;

/// The plan computed for a path (or why there is none).
pub(crate) type Preview = Option<(String, Result<kpack::fatbin::Plan, String>)>;

pub(crate) fn preview(frame: &mut Frame, preview: &Preview, side: Side, area: Rect, theme: Theme) {
    let text = preview_text(preview);
    let lines: Vec<Line<'static>> = text.lines().map(|l| Line::from(l.to_string())).collect();
    side_pane(
        frame,
        side,
        lines,
        (
            Block::bordered().title(" rewrite preview (nothing is written) "),
            false,
        ),
        area,
        theme,
    );
}

/// The preview as text (what the pane shows, and what `V` pages).
pub(crate) fn preview_text(preview: &Preview) -> String {
    match preview {
        None => "Select a fat binary in the explorer and press Enter or p.".to_string(),
        Some((path, Err(e))) => format!("{path}: {e}"),
        Some((path, Ok(plan))) => {
            let mut buf = Vec::new();
            let path = std::path::Path::new(path);
            let _ = match plan {
                kpack::fatbin::Plan::Elf(p) => crate::text::rewrite_plan(&mut buf, path, p),
                kpack::fatbin::Plan::Pe(p) => crate::text::pe_rewrite_plan(&mut buf, path, p),
            };
            String::from_utf8_lossy(&buf).into_owned()
        }
    }
}
