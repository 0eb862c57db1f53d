//! The app's input: keys per view, the mouse, scrolling.

use super::app::*;
use kpack::family::PRESETS;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseEventKind};
use std::path::PathBuf;

impl App {
    /// The mouse: the wheel scrolls the pane under the pointer, a click on a tab
    /// switches view, a click on a list selects the row under the pointer.
    pub(super) fn mouse(&mut self, m: ratatui::crossterm::event::MouseEvent) {
        let inside = |r: ratatui::layout::Rect| {
            m.column >= r.x && m.column < r.x + r.width && m.row >= r.y && m.row < r.y + r.height
        };
        let side = self.drawn.side.get();
        match m.kind {
            MouseEventKind::ScrollDown | MouseEventKind::ScrollUp => {
                let d = if m.kind == MouseEventKind::ScrollDown {
                    3
                } else {
                    -3
                };
                if inside(side) || self.view == View::Preview {
                    self.scroll_side(d);
                } else {
                    // Over the list the list moves, wherever the keyboard focus is.
                    self.move_list(d);
                }
            }
            MouseEventKind::Down(_) if m.row == 0 => {
                let hit = self
                    .drawn
                    .tabs
                    .borrow()
                    .iter()
                    .find(|(a, b, _)| m.column >= *a && m.column < *b)
                    .map(|t| t.2);
                if let Some(v) = hit {
                    self.switch_view(v);
                }
            }
            MouseEventKind::Down(_) if inside(side) => self.side_focus = true,
            MouseEventKind::Down(_) if inside(self.drawn.list.get()) => {
                self.side_focus = false;
                let i = self.drawn.list_first.get() + (m.row - self.drawn.list.get().y) as usize;
                match self.view {
                    View::Explorer if i < self.rows().len() => {
                        self.explorer.selected = i;
                        self.side_scroll = 0;
                    }
                    // The presets, a "single targets" label, then the targets.
                    View::Families if i < PRESETS.len() => self.families.cursor = i,
                    View::Families
                        if i > PRESETS.len()
                            && i <= PRESETS.len() + self.families.singles.len() =>
                    {
                        self.families.cursor = i - 1;
                    }
                    View::Kernels if i < self.kernels.rows().len() => self.kernels.cursor = i,
                    View::Inspector
                        if i < self.inspector.index.as_ref().map_or(0, |a| a.kernels.len()) =>
                    {
                        self.inspector.cursor = i;
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }

    /// Scroll the side pane by `d` lines, within what the last frame showed.
    pub(super) fn scroll_side(&mut self, d: isize) {
        let max = self.drawn.side_max.get() as isize;
        self.side_scroll = (self.side_scroll as isize + d).clamp(0, max.max(0)) as u16;
    }

    /// Move by `d`: the focused side pane scrolls, otherwise the view's list moves.
    pub(super) fn move_by(&mut self, d: isize) {
        if self.side_focus && matches!(self.view, View::Explorer | View::Families) {
            self.scroll_side(d);
            return;
        }
        self.move_list(d);
    }

    /// Move the view's list (or scroll the views that are one pane) by `d`.
    pub(super) fn move_list(&mut self, d: isize) {
        match self.view {
            View::Explorer => {
                let n = self.rows().len();
                if n > 0 {
                    self.explorer.selected =
                        (self.explorer.selected as isize + d).clamp(0, n as isize - 1) as usize;
                    self.side_scroll = 0;
                }
            }
            View::Families => {
                let n = PRESETS.len() + self.families.singles.len();
                self.families.cursor =
                    (self.families.cursor as isize + d).clamp(0, n as isize - 1) as usize;
            }
            View::Inspector => {
                let n = self.inspector.index.as_ref().map_or(0, |a| a.kernels.len());
                if n > 0 {
                    self.inspector.cursor =
                        (self.inspector.cursor as isize + d).clamp(0, n as isize - 1) as usize;
                }
            }
            View::Preview => self.scroll_side(d),
            View::Kernels => {
                let n = self.kernels.rows().len();
                if n > 0 {
                    self.kernels.cursor =
                        (self.kernels.cursor as isize + d).clamp(0, n as isize - 1) as usize;
                }
            }
            // A result screen (a wheel split's list of wheels) scrolls.
            View::Pack => self.scroll_side(d),
        }
    }

    pub(super) fn key(&mut self, k: KeyEvent) {
        if k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('c') {
            self.quit = true;
            return;
        }
        if self.log.open {
            match k.code {
                KeyCode::Char('y') => self.copy_selected(),
                KeyCode::Char('V') => self.open_pager(),
                KeyCode::Esc | KeyCode::Char('!' | 'q') | KeyCode::Backspace => self.log.toggle(),
                KeyCode::Down | KeyCode::Char('j') => self.log.scroll_by(1),
                KeyCode::Up | KeyCode::Char('k') => self.log.scroll_by(-1),
                KeyCode::PageDown | KeyCode::Char(' ') => self.log.scroll_by(10),
                KeyCode::PageUp => self.log.scroll_by(-10),
                KeyCode::Home | KeyCode::Char('g') => self.log.scroll_by(-(1 << 20)),
                KeyCode::End | KeyCode::Char('G') => self.log.scroll_by(1 << 20),
                _ => {}
            }
            return;
        }
        if self.kernels.extract.is_some() {
            self.kernel_extract_key(k);
            return;
        }
        if let Some((which, dest, cursor)) = &mut self.inspector.extract {
            match k.code {
                KeyCode::Enter if !dest.is_empty() => {
                    if let Some(at) = &self.inspector.at {
                        self.requests.push(Request::Extract(
                            at.clone(),
                            which.clone(),
                            PathBuf::from(dest.as_str()),
                        ));
                        self.inspector.status = Some("extracting…".into());
                    }
                    self.inspector.extract = None;
                }
                KeyCode::Esc => self.inspector.extract = None,
                _ => {
                    super::textedit::edit(dest, cursor, k);
                }
            }
            return;
        }
        if let Some(pattern) = &mut self.jumps.prompt {
            match k.code {
                KeyCode::Enter => {
                    let target = self.jump_target();
                    self.jumps.prompt = None;
                    match target {
                        Some(t) => {
                            self.jump_to(&t);
                        }
                        None => self.flash = Some("no path matches".into()),
                    }
                }
                KeyCode::Esc => self.jumps.prompt = None,
                KeyCode::Backspace => {
                    pattern.pop();
                }
                KeyCode::Char(c) => pattern.push(c),
                _ => {}
            }
            return;
        }
        if self.explorer.filtering {
            let filter = if self.view == View::Kernels {
                &mut self.kernels.filter
            } else {
                &mut self.explorer.filter
            };
            match k.code {
                KeyCode::Enter => self.explorer.filtering = false,
                KeyCode::Esc => {
                    self.explorer.filtering = false;
                    if self.view == View::Kernels {
                        filter.clear();
                    } else {
                        self.clear_filter();
                        return;
                    }
                }
                KeyCode::Backspace => {
                    filter.pop();
                }
                KeyCode::Char(c) => filter.push(c),
                _ => {}
            }
            self.explorer.selected = 0;
            self.explorer.scroll = 0;
            self.kernels.cursor = 0;
            return;
        }
        if self.help {
            // Any key closes it, as it says, and does nothing else.
            self.help = false;
            return;
        }
        self.explorer.note = None;
        self.flash = None;
        // In the Pack view Esc belongs to the view (cancel, back); in the dialog every
        // key but Tab is typing.
        let in_dialog = matches!(
            self.packing.run,
            Some(PackState::Confirm { .. } | PackState::Replace(_))
        );
        if self.view == View::Pack
            && (k.code == KeyCode::Esc
                || (in_dialog && !matches!(k.code, KeyCode::Tab | KeyCode::BackTab)))
        {
            self.pack_key(k);
            return;
        }
        let i = self.views.iter().position(|v| *v == self.view).unwrap_or(0);
        // q while a pack runs asks first; the next q (or y) cancels it and quits.
        if self.quit_asked {
            self.quit_asked = false;
            if matches!(k.code, KeyCode::Char('q' | 'y' | 'Y')) {
                self.quit = true;
            }
            return;
        }
        match k.code {
            KeyCode::Char('q') if self.packing() => self.quit_asked = true,
            KeyCode::Char('q') => self.quit = true,
            KeyCode::Char('?') => self.help = true,
            KeyCode::Char('!') => self.log.toggle(),
            KeyCode::Char('y') => self.copy_selected(),
            KeyCode::Char('Y') => match self.table() {
                Some(t) => {
                    self.flash = Some(format!(
                        "copied the {} table ({}) as TSV to the clipboard",
                        t.name,
                        crate::text::count(t.rows.len() as u64, "row", "rows")
                    ));
                    self.copy = Some(t.tsv());
                }
                None => self.flash = Some("no table in this view to copy".into()),
            },
            KeyCode::Char('V') => self.open_pager(),
            KeyCode::Char(c @ ('E' | 'J')) => match self.table() {
                Some(t) => {
                    self.flash = Some(format!("exporting the {} table…", t.name));
                    let (ext, text) = if c == 'J' {
                        ("json", t.json())
                    } else {
                        ("csv", t.csv())
                    };
                    self.requests.push(Request::Export {
                        name: t.name,
                        ext,
                        text,
                    });
                }
                None => self.flash = Some("no table in this view to export".into()),
            },
            // Tab always switches view; the side pane's focus has its own keys (w,
            // or l/→ on a file; w, h/← or Esc back), so Tab never means two things.
            KeyCode::Tab => self.switch_view(self.views[(i + 1) % self.views.len()]),
            KeyCode::BackTab => {
                self.switch_view(self.views[(i + self.views.len() - 1) % self.views.len()]);
            }
            KeyCode::Char('w') if self.has_side_pane() => self.side_focus = !self.side_focus,
            KeyCode::Esc | KeyCode::Left | KeyCode::Char('h') if self.side_focus => {
                self.side_focus = false;
            }
            KeyCode::Char(c @ '1'..='9') => {
                if let Some(v) = self.views.get(c as usize - '1' as usize) {
                    self.switch_view(*v);
                }
            }
            KeyCode::Char('K') if self.view == View::Inspector => {
                let Some(a) = &self.inspector.index else {
                    return;
                };
                self.kernels.entry = a
                    .kernels
                    .get(self.inspector.cursor)
                    .map(|k| (k.key.to_string(), k.arch.to_string()));
                self.kernels.cursor = 0;
                self.want_kernels(String::new(), false);
                if !self.views.contains(&View::Kernels) {
                    self.views.push(View::Kernels);
                }
                self.drill_into(View::Kernels);
            }
            KeyCode::Char(c @ ('x' | 'X')) if self.view == View::Inspector => {
                let (Some(a), Some(at)) = (&self.inspector.index, &self.inspector.at) else {
                    return;
                };
                // x: the marked rows, else the selected one; X: everything.
                let entry = |i: &usize| {
                    a.kernels
                        .get(*i)
                        .map(|k| (k.key.to_string(), k.arch.to_string()))
                };
                let which = if c == 'X' {
                    None
                } else if self.inspector.marks.is_empty() {
                    let Some(e) = entry(&self.inspector.cursor) else {
                        return;
                    };
                    Some(vec![e])
                } else {
                    Some(self.inspector.marks.iter().filter_map(entry).collect())
                };
                // Ask where: by default beside the current directory, not inside the
                // install tree the archive came from.
                let dest = self.default_output(&format!("{}.extracted", at.file_name()));
                let cursor = dest.chars().count();
                self.inspector.extract = Some((which, dest, cursor));
            }
            // Space marks the row (and moves on), as in yazi; u clears the marks.
            KeyCode::Char(' ') if self.view == View::Inspector => {
                let n = self.inspector.index.as_ref().map_or(0, |a| a.kernels.len());
                if self.inspector.cursor < n {
                    if !self.inspector.marks.remove(&self.inspector.cursor) {
                        self.inspector.marks.insert(self.inspector.cursor);
                    }
                    self.move_list(1);
                }
            }
            KeyCode::Char('u') if self.view == View::Inspector => self.inspector.marks.clear(),
            KeyCode::Char('v') if self.view == View::Inspector => {
                if let Some(at) = &self.inspector.at {
                    self.inspector.status = Some("verifying…".into());
                    self.requests.push(Request::VerifyArchive(at.clone()));
                }
            }
            // Shift with the arrows or pages scrolls the side pane (the detail, the
            // plan); in the preview every move scrolls it.
            KeyCode::Down | KeyCode::Up | KeyCode::PageDown | KeyCode::PageUp
                if k.modifiers.contains(KeyModifiers::SHIFT) =>
            {
                let page = self.drawn.side.get().height.saturating_sub(2).max(1) as isize;
                self.scroll_side(match k.code {
                    KeyCode::Down => 1,
                    KeyCode::Up => -1,
                    KeyCode::PageDown => page,
                    _ => -page,
                });
            }
            KeyCode::Down | KeyCode::Char('j') => self.move_by(1),
            KeyCode::Up | KeyCode::Char('k') => self.move_by(-1),
            KeyCode::PageDown => self.move_by(self.explorer.page as isize),
            KeyCode::PageUp => self.move_by(-(self.explorer.page as isize)),
            KeyCode::Home | KeyCode::Char('g') => self.move_by(-(1 << 30)),
            KeyCode::End | KeyCode::Char('G') => self.move_by(1 << 30),
            // Esc: a filter first (the Kernels view's own in that view), then back to
            // where a drill-down came from; Backspace goes back too.
            KeyCode::Esc if self.view == View::Kernels && !self.kernels.filter.is_empty() => {
                self.kernels.filter.clear();
                self.kernels.cursor = 0;
            }
            KeyCode::Esc if self.view != View::Kernels && !self.explorer.filter.is_empty() => {
                self.clear_filter();
            }
            KeyCode::Esc | KeyCode::Backspace => {
                if let Some(v) = self.back.pop() {
                    self.view = v;
                    self.side_scroll = 0;
                    self.side_focus = false;
                }
            }
            _ => self.view_key(k),
        }
    }

    /// `V`: what the view shows, to `$PAGER` (run by the loop).
    pub(super) fn open_pager(&mut self) {
        match self.page() {
            Some(what) => {
                self.external = Some(super::external::External {
                    var: "PAGER",
                    default: "less".into(),
                    what,
                });
            }
            None => self.flash = Some("nothing here to page".into()),
        }
    }

    /// `y`: the selected item's text to the clipboard, and the footer says what.
    pub(super) fn copy_selected(&mut self) {
        match self.selected_text() {
            Some((text, what)) => {
                let shown = super::widgets::middle_cut(text.lines().next().unwrap_or(""), 60);
                self.flash = Some(format!("copied {what} to the clipboard: {shown}"));
                self.copy = Some(text);
            }
            None => self.flash = Some("nothing selected to copy".into()),
        }
    }

    /// Select the entry at `rel` in the Explorer (its folders opened, the filter
    /// cleared when it hides it); false when the tree has no such entry.
    pub(super) fn reveal(&mut self, rel: &str) -> bool {
        let Some(tree) = &self.tree else { return false };
        let Some(node) = tree.find(rel).filter(|&n| n != 0) else {
            return false;
        };
        let mut up = tree.nodes[node].parent;
        while let Some(p) = up {
            self.explorer.expanded.insert(p);
            up = tree.nodes[p].parent;
        }
        if !self.rows().iter().any(|r| r.node == node) {
            self.explorer.filter.clear();
        }
        if let Some(i) = self.rows().iter().position(|r| r.node == node) {
            self.explorer.selected = i;
            self.side_scroll = 0;
        }
        true
    }

    /// Enter on a kernel: its file in the Explorer (the binary an archive entry
    /// belongs to, when the tree has it); Esc comes back.
    fn jump_to_kernel_file(&mut self) {
        let Some(k) = self.kernels.rows().get(self.kernels.cursor).copied() else {
            return;
        };
        let binary = k
            .key
            .as_deref()
            .map(|key| key.rsplit_once('#').map_or(key, |p| p.0));
        let (path, binary) = (k.path.clone(), binary.map(str::to_string));
        let found = binary.as_deref().is_some_and(|b| self.jump_to(b)) || self.jump_to(&path);
        if found {
            self.drill_into(View::Explorer);
        } else {
            self.flash = Some(format!("{path} is not in the tree opened"));
        }
    }

    /// Clear the Explorer's filter, staying on the entry selected (its folders open
    /// so that it shows), not on the first row (trial 30).
    pub(super) fn clear_filter(&mut self) {
        let node = self.rows().get(self.explorer.selected).map(|r| r.node);
        self.explorer.filter.clear();
        self.explorer.selected = 0;
        self.explorer.scroll = 0;
        let (Some(node), Some(tree)) = (node, &self.tree) else {
            return;
        };
        let mut up = tree.nodes[node].parent;
        while let Some(p) = up {
            self.explorer.expanded.insert(p);
            up = tree.nodes[p].parent;
        }
        if let Some(i) = self.rows().iter().position(|r| r.node == node) {
            self.explorer.selected = i;
        }
    }

    /// Whether the view has a side pane the focus can move into.
    pub(super) fn has_side_pane(&self) -> bool {
        matches!(self.view, View::Explorer | View::Families)
    }

    /// Drill down into view `v` (K, Enter): Esc or Backspace comes back here.
    pub(super) fn drill_into(&mut self, v: View) {
        if self.view != v {
            self.back.push(self.view);
        }
        self.view = v;
        self.side_scroll = 0;
        self.side_focus = false;
    }

    /// Go to view `v` by Tab, Shift-Tab, its digit or a click: a fresh start there
    /// (no focus or scroll carried over from the view left, no way back).
    pub(super) fn switch_view(&mut self, v: View) {
        self.view = v;
        self.side_scroll = 0;
        self.side_focus = false;
        self.back.clear();
        self.entered_view();
    }

    /// A view reached by Tab, Shift-Tab, its digit or a click behaves the same: the
    /// Kernels view keeps the list it shows (K's scope), or lists the whole tree.
    pub(super) fn entered_view(&mut self) {
        if self.view == View::Kernels {
            self.want_kernels(String::new(), false);
        }
    }

    pub(super) fn view_key(&mut self, k: KeyEvent) {
        match self.view {
            View::Explorer => self.explorer_key(k),
            View::Families => match k.code {
                KeyCode::Char(' ') | KeyCode::Enter => {
                    let c = self.families.cursor;
                    self.families.note = None;
                    if c < PRESETS.len() {
                        self.families.presets[c] = !self.families.presets[c];
                    } else if let Some(t) = self
                        .families
                        .singles
                        .get(c - PRESETS.len())
                        .map(|s| s.0.clone())
                    {
                        // A target inside a selected preset is packed with it: no hidden
                        // choice, say so.
                        if let Some(preset) = self.families.covered_by(&t) {
                            self.families.note = Some(format!(
                                "{t} is packed with {preset}; deselect {preset} to choose it on its own"
                            ));
                        } else if let Some((_, on)) =
                            self.families.singles.get_mut(c - PRESETS.len())
                        {
                            *on = !*on;
                        }
                    }
                }
                KeyCode::Char('P') => self.open_pack_dialog(),
                KeyCode::Char('e') => {
                    let sel = self.families.selection();
                    if !sel.is_empty() && !self.families.planning {
                        self.families.planning = true;
                        self.requests.push(Request::Plan(sel));
                    }
                }
                _ => {}
            },
            View::Pack => self.pack_key(k),
            View::Kernels => {
                self.kernels_mark_key(k);
                if k.code == KeyCode::Char('/') {
                    self.explorer.filtering = true;
                }
                if matches!(k.code, KeyCode::Enter | KeyCode::Char('o')) && self.tree.is_some() {
                    self.jump_to_kernel_file();
                }
                if k.code == KeyCode::Char('a') && self.kernels.entry.is_some() {
                    // The whole archive again, not only the inspector's entry.
                    self.kernels.entry = None;
                    self.kernels.cursor = 0;
                }
                if k.code == KeyCode::Char('s') {
                    use kpack::kernels::SortBy::*;
                    self.kernels.sort = match self.kernels.sort {
                        Size => Vgpr,
                        Vgpr => Sgpr,
                        Sgpr => Lds,
                        Lds => Scratch,
                        Scratch => Spills,
                        Spills => Name,
                        Name => Target,
                        Target => Size,
                    };
                    self.resort_kernels();
                }
                if k.code == KeyCode::Char('S') {
                    self.kernels.reverse = !self.kernels.reverse;
                    self.resort_kernels();
                }
            }
            View::Preview | View::Inspector => {}
        }
    }

    pub(super) fn explorer_key(&mut self, k: KeyEvent) {
        let rows = self.rows();
        let Some(tree) = &self.tree else { return };
        let Some(row) = rows.get(self.explorer.selected).copied() else {
            return;
        };
        let node = &tree.nodes[row.node];
        match k.code {
            KeyCode::Char('/') => {
                self.explorer.filtering = true;
            }
            KeyCode::Char('z') => self.jumps.prompt = Some(String::new()),
            KeyCode::Char('[') => self.walk_jumps(true),
            KeyCode::Char(']') => self.walk_jumps(false),
            // $EDITOR on a text file of the tree (the user's choice to change it).
            KeyCode::Char('e') => {
                let rel = tree.path(row.node);
                let file = node
                    .file
                    .and_then(|f| self.report.as_ref().map(|r| &r.files[f]));
                match file.and_then(|f| self.editable(f)) {
                    Some(p) => {
                        self.external = Some(super::external::External {
                            var: "EDITOR",
                            default: "vi".into(),
                            what: super::external::Open::File(p),
                        });
                    }
                    None => self.flash = Some(format!("{rel}: not a text file to edit")),
                }
            }
            KeyCode::Char('s') => self.explorer.sort = self.explorer.sort.next(),
            KeyCode::Char('S') => self.explorer.reverse = !self.explorer.reverse,
            // Every folder open, or all closed (staying on the selected entry's
            // top folder).
            KeyCode::Char('+') => {
                let folders: Vec<usize> = (0..tree.nodes.len())
                    .filter(|&n| tree.nodes[n].file.is_none())
                    .collect();
                self.explorer.expanded.extend(folders);
                if let Some(i) = self.rows().iter().position(|r| r.node == row.node) {
                    self.explorer.selected = i;
                }
            }
            KeyCode::Char('-') => {
                let mut top = row.node;
                while let Some(p) = tree.nodes[top].parent.filter(|&p| p != 0) {
                    top = p;
                }
                self.explorer.expanded.retain(|&n| n == 0);
                self.explorer.selected =
                    self.rows().iter().position(|r| r.node == top).unwrap_or(0);
            }
            // The next (previous) damaged file, its folders opened.
            KeyCode::Char(c @ ('n' | 'N')) => {
                let Some(report) = &self.report else { return };
                let mut damaged: Vec<String> = report
                    .files
                    .iter()
                    .filter(|f| f.is_damaged())
                    .map(|f| f.path.clone())
                    .collect();
                if damaged.is_empty() {
                    self.flash = Some("no damaged file in this tree".into());
                    return;
                }
                damaged.sort_by(|a, b| kpack::natural::natural_cmp(a, b));
                let here = tree.path(row.node);
                let next = if c == 'n' {
                    damaged
                        .iter()
                        .find(|p| kpack::natural::natural_cmp(p, &here).is_gt())
                        .or(damaged.first())
                } else {
                    damaged
                        .iter()
                        .rev()
                        .find(|p| kpack::natural::natural_cmp(p, &here).is_lt())
                        .or(damaged.last())
                };
                if let Some(p) = next.cloned() {
                    self.jump_to(&p);
                }
            }
            KeyCode::Char('K') => {
                let path = tree.path(row.node);
                self.kernels.entry = None;
                self.want_kernels(path, true);
                self.drill_into(View::Kernels);
            }
            // Enter toggles a folder; → and l only open it.
            KeyCode::Enter if node.file.is_none() && !self.explorer.expanded.insert(row.node) => {
                self.explorer.expanded.remove(&row.node);
            }
            KeyCode::Enter | KeyCode::Right | KeyCode::Char('l') if node.file.is_none() => {
                self.explorer.expanded.insert(row.node);
            }
            // On a file, → and l go into its detail (as yazi's and gitui's panes do).
            KeyCode::Right | KeyCode::Char('l') => self.side_focus = true,
            KeyCode::Left | KeyCode::Char('h') => {
                if node.file.is_none() && self.explorer.expanded.remove(&row.node) {
                    return;
                }
                // To the parent first; the next press there collapses it (as file
                // managers do).
                if let Some(p) = node.parent.filter(|&p| p != 0)
                    && let Some(pos) = self.rows().iter().position(|r| r.node == p)
                {
                    self.explorer.selected = pos;
                }
            }
            KeyCode::Enter
                if node
                    .file
                    .and_then(|f| self.report.as_ref().map(|r| r.files[f].kind))
                    == Some(kpack::scan::FileKind::Kpack) =>
            {
                self.requests
                    .push(Request::OpenArchive(tree.path(row.node)));
            }
            KeyCode::Enter | KeyCode::Char('p') if node.file.is_some() => {
                let path = tree.path(row.node);
                let file = node
                    .file
                    .and_then(|f| self.report.as_ref().map(|r| &r.files[f]));
                match file.map(no_preview) {
                    Some(Some(why)) => self.explorer.note = Some(format!("{path}: {why}")),
                    Some(None) => {
                        if self.preview.as_ref().is_none_or(|(p, _)| p != &path) {
                            self.preview = None;
                            let group = match &self.packing.run {
                                Some(
                                    PackState::Confirm { settings, .. }
                                    | PackState::Replace(settings),
                                ) if !settings.group.is_empty() => settings.group.clone(),
                                _ => super::app::DEFAULT_GROUP.to_string(),
                            };
                            self.requests.push(Request::Preview { path, group });
                        }
                        self.drill_into(View::Preview);
                    }
                    None => {}
                }
            }
            _ => {}
        }
    }
}

/// Why a file has no rewrite preview (`None`: it has one), said instead of a key that
/// does nothing.
fn no_preview(f: &kpack::scan::FileReport) -> Option<String> {
    use kpack::scan::FileKind as K;
    Some(match f.kind {
        K::FatBinary if f.container == Some(kpack::scan::Container::Ar) => {
            "a static archive: pack copies it unchanged (its members keep their device \
             code); K lists its kernels"
                .into()
        }
        K::FatBinary if f.packable() => return None,
        K::FatBinary => {
            "a fat binary pack cannot rewrite (see its detail); K lists its kernels".into()
        }
        K::HostOnlyBinary => {
            "host-only already: its code is in the archives its marker names; K lists its \
             kernels"
                .into()
        }
        K::Symlink => format!(
            "a symlink to {}: pack keeps it as it is",
            f.target.as_deref().unwrap_or("?")
        ),
        K::Wheel => "a wheel: open it on its own (kpack-tui FILE.whl) to split it".into(),
        K::Bundle | K::CodeObject | K::EmbeddedCode => {
            "device code pack does not rewrite; K lists its kernels".into()
        }
        K::KernelDatabase => "a kernel-database file: pack moves it whole with its target".into(),
        K::Kpack => return None,
        K::Opaque | K::Other => "no device code: pack copies it unchanged".into(),
    })
}
