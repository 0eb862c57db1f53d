//! Moving around the Explorer by name: `z` jumps to the path that best matches a
//! few typed letters (in order, not necessarily together, as yazi's and fzf's
//! jumps), and `[`/`]` walk back and forth through the places jumped from.

use super::app::App;

/// How well `pattern` (lower case) matches `path`: `None` when its letters are not
/// all in the path in order; else higher is better (letters together, at the start
/// of a name, in the file name, a shorter path).
pub fn score(path: &str, pattern: &str) -> Option<i64> {
    if pattern.is_empty() {
        return None;
    }
    let hay: Vec<char> = path.to_lowercase().chars().collect();
    let name_at = hay.iter().rposition(|c| *c == '/').map_or(0, |i| i + 1);
    let mut score = 0i64;
    let mut at = 0usize;
    let mut last: Option<usize> = None;
    for p in pattern.chars() {
        let i = (at..hay.len()).find(|&i| hay[i] == p)?;
        if last.is_some_and(|l| l + 1 == i) {
            score += 8; // together
        }
        if i == 0 || matches!(hay[i - 1], '/' | '_' | '-' | '.') {
            score += 6; // the start of a name or a word
        }
        if i >= name_at {
            score += 3; // in the file name
        }
        last = Some(i);
        at = i + 1;
    }
    Some(score * 100 - hay.len() as i64)
}

/// The best match of `pattern` among `paths` (ties: the first).
pub fn best<'a>(paths: impl Iterator<Item = &'a str>, pattern: &str) -> Option<&'a str> {
    let pattern = pattern.to_lowercase();
    let mut best: Option<(i64, &str)> = None;
    for p in paths {
        if let Some(s) = score(p, &pattern)
            && best.is_none_or(|(b, _)| s > b)
        {
            best = Some((s, p));
        }
    }
    best.map(|b| b.1)
}

impl App {
    /// The path the `z` prompt would jump to now.
    pub fn jump_target(&self) -> Option<String> {
        let pattern = self.jumps.prompt.as_ref()?;
        let report = self.report.as_ref()?;
        best(report.files.iter().map(|f| f.path.as_str()), pattern).map(str::to_string)
    }

    /// The Explorer's selected path, if any.
    fn selected_path(&self) -> Option<String> {
        let tree = self.tree.as_ref()?;
        self.rows()
            .get(self.explorer.selected)
            .map(|r| tree.path(r.node))
    }

    /// Select `rel`, remembering where the selection was (for `[`).
    pub(super) fn jump_to(&mut self, rel: &str) -> bool {
        let from = self.selected_path();
        if !self.reveal(rel) {
            return false;
        }
        if let Some(f) = from.filter(|f| f != rel) {
            self.jumps.back.push(f);
            self.jumps.forward.clear();
        }
        true
    }

    /// `[` (back) or `]` (forward) through the places jumped from.
    pub(super) fn walk_jumps(&mut self, back: bool) {
        let here = self.selected_path();
        let from = if back {
            &mut self.jumps.back
        } else {
            &mut self.jumps.forward
        };
        let Some(target) = from.pop() else {
            self.flash = Some(if back {
                "no earlier place (z, n and Enter on a kernel jump)".into()
            } else {
                "no later place".into()
            });
            return;
        };
        let to = if back {
            &mut self.jumps.forward
        } else {
            &mut self.jumps.back
        };
        to.extend(here);
        self.reveal(&target);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn letters_in_order_and_together_win() {
        let paths = [
            "lib/rocblas/library/Kernels.so-000-gfx900.hsaco",
            "lib/librdc.so",
            "share/doc/demo/README.txt",
            "bin/vadd_app",
        ];
        assert_eq!(best(paths.iter().copied(), "rdc"), Some("lib/librdc.so"));
        assert_eq!(best(paths.iter().copied(), "va"), Some("bin/vadd_app"));
        assert_eq!(
            best(paths.iter().copied(), "k900"),
            Some("lib/rocblas/library/Kernels.so-000-gfx900.hsaco")
        );
        assert_eq!(
            best(paths.iter().copied(), "readme"),
            Some("share/doc/demo/README.txt")
        );
        assert_eq!(best(paths.iter().copied(), "zzz"), None);
        assert!(score("lib/librdc.so", "cdr").is_none(), "order matters");
    }
}
