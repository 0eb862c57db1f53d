//! The app's pack and wheel-split dialog: opening it with sensible defaults, its
//! keys, starting a run.

use super::app::*;
use ratatui::crossterm::event::{KeyCode, KeyEvent};

impl App {
    /// Open the confirm dialog with the selected families.
    pub fn open_pack_dialog(&mut self) {
        if self.report.is_none() || matches!(self.packing.run, Some(PackState::Running(_))) {
            return;
        }
        let selection = self.families.selection();
        let name = self
            .root
            .file_name()
            .map_or("tree".to_string(), |n| n.to_string_lossy().into_owned());
        let wheel = self.report.as_ref().and_then(|r| r.wheel.clone());
        let settings = match wheel {
            Some(w) => PackSettings {
                group: format!("{}-device", w.name.to_lowercase().replace('_', "-")),
                selection: self.families.wheel_selection(self.report.as_ref()),
                split: false,
                per_family: false,
                output: self.default_output(&format!(
                    "{}.split",
                    name.strip_suffix(".whl").unwrap_or(&name)
                )),
                level: kpack::kpack::archive::DEFAULT_LEVEL,
                wheel: true,
                overlay: super::viewstate::overlay_guess(self.report.as_ref()),
                force: false,
                unassigned: kpack::pack::Unassigned::Error,
                copy_damaged: false,
            },
            None => PackSettings {
                group: super::app::DEFAULT_GROUP.into(),
                selection,
                split: false,
                per_family: false,
                output: self.default_output(&format!("{name}.packed")),
                level: kpack::kpack::archive::DEFAULT_LEVEL,
                wheel: false,
                overlay: String::new(),
                force: false,
                unassigned: kpack::pack::Unassigned::Error,
                copy_damaged: false,
            },
        };
        // Edits of an earlier opening are kept (the selection is today's).
        let settings = match self.packing.last.take() {
            Some(mut last) if last.wheel == settings.wheel => {
                last.selection = settings.selection;
                last
            }
            _ => settings,
        };
        let cursor = settings.group.chars().count();
        self.packing.run = Some(PackState::Confirm {
            settings,
            field: 0,
            cursor,
        });
        if !self.views.contains(&View::Pack) {
            self.views.push(View::Pack);
        }
        self.view = View::Pack;
        self.side_focus = false;
    }

    /// An open dialog takes the selection again, after a scan report changed it.
    pub(super) fn refresh_dialog_selection(&mut self) {
        let wheel = match &self.packing.run {
            Some(PackState::Confirm { settings, .. }) => settings.wheel,
            _ => return,
        };
        let selection = if wheel {
            self.families.wheel_selection(self.report.as_ref())
        } else {
            self.families.selection()
        };
        if let Some(PackState::Confirm { settings, .. }) = &mut self.packing.run {
            settings.selection = selection;
        }
    }

    /// Where a pack or split writes by default: `name` in the current directory
    /// (shown relative), or beside the tree when the current directory is inside it.
    pub fn default_output(&self, name: &str) -> String {
        let inside = match (std::env::current_dir(), std::fs::canonicalize(&self.root)) {
            (Ok(cwd), Ok(root)) => root.is_dir() && cwd.starts_with(&root),
            _ => false,
        };
        if inside {
            self.root.with_file_name(name).display().to_string()
        } else {
            name.to_string()
        }
    }

    pub(super) fn start_pack(&mut self, s: PackSettings) {
        self.requests.push(Request::Pack(s));
        self.packing.run = Some(PackState::Running(PackProgress {
            started: Some(std::time::Instant::now()),
            ..PackProgress::default()
        }));
    }

    /// Whether a pack (or split) is running.
    pub fn packing(&self) -> bool {
        matches!(self.packing.run, Some(PackState::Running(_)))
    }

    pub(super) fn pack_key(&mut self, k: KeyEvent) {
        self.packing.note = None;
        match &mut self.packing.run {
            Some(PackState::Confirm {
                settings,
                field,
                cursor,
            }) => match k.code {
                // The preselection follows the scan: a pack started now could leave
                // out targets the rest of the tree has.
                KeyCode::Enter if self.partial => {
                    self.packing.note = Some(
                        "the scan is still running and the selection can still grow: \
                         Enter once it is done"
                            .into(),
                    );
                }
                KeyCode::Enter
                    if !settings.selection.is_empty()
                        && !settings.group.is_empty()
                        && (!settings.wheel || !settings.overlay.is_empty()) =>
                {
                    let s = settings.clone();
                    self.packing.last = Some(s.clone());
                    if previous_output(&s) {
                        self.packing.run = Some(PackState::Replace(s));
                    } else {
                        self.start_pack(s);
                    }
                }
                KeyCode::Enter => {
                    // Said, not ignored.
                    self.packing.note = Some(if settings.selection.is_empty() {
                        "nothing selected: Esc back, Space on a family or target".into()
                    } else if settings.group.is_empty() {
                        "the group is empty: type its name (the first field)".into()
                    } else {
                        "the overlay root is empty: type the package directory (torch)".into()
                    });
                }
                KeyCode::Esc => {
                    self.packing.last = Some(settings.clone());
                    self.packing.run = None;
                    self.views.retain(|v| *v != View::Pack);
                    self.view = View::Families;
                }
                KeyCode::Down | KeyCode::Up => {
                    let n = settings.fields();
                    *field = if k.code == KeyCode::Down {
                        (*field + 1) % n
                    } else {
                        (*field + n - 1) % n
                    };
                    *cursor = settings.field(*field).map_or(0, |t| t.chars().count());
                }
                KeyCode::F(2) if !settings.wheel => settings.split = !settings.split,
                KeyCode::F(3) if !settings.wheel => settings.per_family = !settings.per_family,
                KeyCode::F(4) if !settings.wheel => {
                    use kpack::pack::Unassigned as U;
                    settings.unassigned = match settings.unassigned {
                        U::Error => U::Drop,
                        U::Drop => U::Error,
                    };
                }
                KeyCode::F(5) if !settings.wheel => settings.copy_damaged = !settings.copy_damaged,
                _ => match settings.field_mut(*field) {
                    Some(text) => {
                        super::textedit::edit(text, cursor, k);
                    }
                    // The level field: +/- or ←/→ step, Home/End go to the ends.
                    None => {
                        use kpack::kpack::archive::LEVEL_MAX;
                        settings.level = match k.code {
                            KeyCode::Char('+') | KeyCode::Right => settings.level + 1,
                            KeyCode::Char('-') | KeyCode::Left => settings.level - 1,
                            KeyCode::Home => 1,
                            KeyCode::End => LEVEL_MAX,
                            _ => settings.level,
                        }
                        .clamp(1, LEVEL_MAX);
                    }
                },
            },
            Some(PackState::Replace(s)) => match k.code {
                KeyCode::Char('y' | 'Y') => {
                    let mut s = s.clone();
                    s.force = true;
                    self.start_pack(s);
                }
                KeyCode::Char('n' | 'N') | KeyCode::Esc => {
                    let settings = s.clone();
                    let cursor = settings.group.chars().count();
                    self.packing.run = Some(PackState::Confirm {
                        settings,
                        field: 0,
                        cursor,
                    });
                }
                _ => {}
            },
            Some(PackState::Running(_)) => {
                if k.code == KeyCode::Esc {
                    self.packing.cancel = true;
                    self.packing.cancelling = true;
                }
            }
            // A refused pack goes back to its dialog, where the option it asks for is.
            Some(PackState::Done(r))
                if r.as_ref().as_ref().is_err_and(|e| e != "cancelled")
                    && matches!(k.code, KeyCode::Esc | KeyCode::Enter) =>
            {
                if let Some(settings) = self.packing.last.take() {
                    let cursor = settings.group.chars().count();
                    self.packing.run = Some(PackState::Confirm {
                        settings,
                        field: 0,
                        cursor,
                    });
                } else {
                    self.view = View::Families;
                }
            }
            Some(PackState::Done(_) | PackState::WheelDone(_)) | None => {
                if k.code == KeyCode::Esc {
                    self.view = View::Families;
                }
                // o: the output in a kpack-tui of its own; q there comes back here.
                if k.code == KeyCode::Char('o')
                    && let Some(out) = self.packing.last.as_ref().map(|s| s.output.clone())
                {
                    self.external =
                        std::env::current_exe()
                            .ok()
                            .map(|exe| super::external::External {
                                var: "",
                                default: super::external::shell_quote(&exe.display().to_string()),
                                what: super::external::Open::File(std::path::PathBuf::from(out)),
                            });
                }
            }
        }
    }
}
