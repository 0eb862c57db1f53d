//! What the app remembers of a path between runs, taken from and put back into its
//! views (the file and its format are [`super::state`]).

use super::app::{App, View};
use super::state::Remembered;
use super::tree::Sort;

impl App {
    /// The state to remember of this run (only once a tree was shown).
    pub fn remembered(&self) -> Option<Remembered> {
        let tree = self.tree.as_ref()?;
        let mut expanded: Vec<String> = self
            .explorer
            .expanded
            .iter()
            .map(|&n| tree.path(n))
            .collect();
        expanded.sort();
        Some(Remembered {
            view: self.view.title().to_string(),
            sort: self.explorer.sort.label().to_string(),
            reverse: self.explorer.reverse,
            filter: self.explorer.filter.clone(),
            expanded,
            selected: self
                .rows()
                .get(self.explorer.selected)
                .map(|r| tree.path(r.node)),
            used: 0,
        })
    }

    /// Put back what was remembered, as far as the tree still has it.
    pub fn restore(&mut self, r: &Remembered) {
        let Some(tree) = &self.tree else { return };
        self.explorer.sort = [Sort::Size, Sort::Name, Sort::DeviceShare]
            .into_iter()
            .find(|s| s.label() == r.sort)
            .unwrap_or(self.explorer.sort);
        self.explorer.reverse = r.reverse;
        self.explorer.expanded = r.expanded.iter().filter_map(|p| tree.find(p)).collect();
        self.explorer.filter = r.filter.clone();
        if let Some(p) = &r.selected {
            self.reveal(p);
        }
        // Views that exist in any run of a tree (not a drill-down's).
        if let Some(v) = [View::Explorer, View::Families, View::Kernels]
            .into_iter()
            .find(|v| v.title() == r.view && self.views.contains(v))
        {
            self.switch_view(v);
        }
    }
}
