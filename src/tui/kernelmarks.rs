//! Marks in the Kernels view and their batch action: Space marks the kernel under
//! the cursor (and moves on), `u` clears the marks, `x` extracts the code objects
//! holding the marked kernels (or the selected one) to a directory it asks for.

use super::app::{App, KernelsState, Request};
use super::marks::mark_of;
use super::widgets::centered;
use kpack::kernels::CodeObjectRef;
use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent};
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Block, Clear, Paragraph};
use std::collections::BTreeSet;
use std::path::PathBuf;

impl App {
    /// Space, `u` and `x` in the Kernels view.
    pub(super) fn kernels_mark_key(&mut self, k: KeyEvent) {
        match k.code {
            KeyCode::Char(' ') => {
                let Some(m) = self
                    .kernels
                    .rows()
                    .get(self.kernels.cursor)
                    .map(|r| mark_of(r))
                else {
                    return;
                };
                if !self.kernels.marks.remove(&m) {
                    self.kernels.marks.insert(m);
                }
                self.move_by(1);
            }
            KeyCode::Char('u') => self.kernels.marks.clear(),
            KeyCode::Char('x') => self.open_kernel_extract(),
            _ => {}
        }
    }

    /// `x`: ask where to extract the marked kernels' code objects (the selected
    /// kernel's when none is marked).
    fn open_kernel_extract(&mut self) {
        let Some((listed, Ok(_))) = &self.kernels.report else {
            self.flash = Some("no kernels listed to extract".into());
            return;
        };
        let listed = listed.clone();
        let wanted: BTreeSet<CodeObjectRef> = if self.kernels.marks.is_empty() {
            self.kernels
                .rows()
                .get(self.kernels.cursor)
                .map(|r| r.code_object())
                .into_iter()
                .collect()
        } else {
            self.kernels.marks.iter().map(|(c, _)| c.clone()).collect()
        };
        if wanted.is_empty() {
            return;
        }
        let name = if listed.is_empty() {
            self.root
                .file_name()
                .map_or("kernels".into(), |n| n.to_string_lossy().into_owned())
        } else {
            listed.rsplit('/').next().unwrap_or(&listed).to_string()
        };
        let dest = self.default_output(&format!("{name}.extracted"));
        let cursor = dest.chars().count();
        self.kernels.extract = Some((wanted, dest, cursor));
    }

    /// Keys of the extract prompt: Enter extracts (in the background), Esc cancels.
    pub(super) fn kernel_extract_key(&mut self, k: KeyEvent) {
        let Some((wanted, dest, cursor)) = &mut self.kernels.extract else {
            return;
        };
        match k.code {
            KeyCode::Enter if !dest.is_empty() => {
                let listed = self
                    .kernels
                    .report
                    .as_ref()
                    .map(|(p, _)| p.clone())
                    .unwrap_or_default();
                self.requests.push(Request::ExtractCodeObjects {
                    listed,
                    wanted: std::mem::take(wanted),
                    dest: PathBuf::from(dest.as_str()),
                });
                self.flash = Some("extracting…".into());
                self.kernels.extract = None;
            }
            KeyCode::Esc => self.kernels.extract = None,
            _ => {
                super::textedit::edit(dest, cursor, k);
            }
        }
    }
}

/// The extract prompt over the Kernels view, when it is open.
pub(crate) fn draw_prompt(frame: &mut Frame, kernels: &KernelsState, area: Rect) {
    let Some((wanted, dest, cursor)) = &kernels.extract else {
        return;
    };
    let what = if kernels.marks.is_empty() {
        "Extract the selected kernel's code object into".to_string()
    } else {
        format!(
            "Extract the {} holding the {} marked kernel(s) into",
            crate::text::count(wanted.len() as u64, "code object", "code objects"),
            kernels.marks.len()
        )
    };
    let body = vec![
        Line::from(what),
        Line::from(format!("▶ {}", super::textedit::with_cursor(dest, *cursor))),
        Line::from(""),
        Line::from("Enter extracts (<binary>#<bundle>/<target>.hsaco) · Esc cancels"),
    ];
    let r = centered(area, area.width.min(90), 6);
    frame.render_widget(Clear, r);
    frame.render_widget(
        Paragraph::new(body).block(Block::bordered().title(" extract ")),
        r,
    );
}
