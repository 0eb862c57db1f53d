//! Finding jobs on the timeline: search by name (`/`, then `n`/`N`) and a filter to
//! one target (`t` cycles through the build's targets). Jobs that do not match are
//! drawn dimmed, so lanes keep their places.

use kpack::trace::{Build, Job, JobKind};

/// The search and the target filter.
#[derive(Debug, Clone, Default)]
pub struct Find {
    /// Text searched in job names (case-insensitive); empty: none.
    pub search: String,
    /// Typing the search.
    pub typing: bool,
    /// Only this target's device compiles.
    pub target: Option<String>,
}

impl Find {
    /// Whether anything narrows the view.
    pub fn active(&self) -> bool {
        !self.search.is_empty() || self.target.is_some()
    }

    /// Whether job `j` of `b` matches.
    pub fn matches(&self, b: &Build, j: &Job) -> bool {
        if let Some(t) = &self.target
            && (j.kind != JobKind::Device || b.arch(j) != Some(t.as_str()))
        {
            return false;
        }
        if self.search.is_empty() {
            return true;
        }
        let s = self.search.to_lowercase();
        b.label(j).to_lowercase().contains(&s)
            || b.object(j).is_some_and(|o| o.to_lowercase().contains(&s))
    }

    /// The next target filter: none → each target of the build in order → none.
    pub fn next_target(&mut self, b: &Build) {
        let mut targets: Vec<&str> = b.jobs.iter().filter_map(|j| b.arch(j)).collect();
        targets.sort_by(|a, b| kpack::natural::target_cmp(a, b));
        targets.dedup();
        self.target = match &self.target {
            None => targets.first().map(|t| t.to_string()),
            Some(cur) => targets
                .iter()
                .position(|t| t == cur)
                .and_then(|i| targets.get(i + 1))
                .map(|t| t.to_string()),
        };
    }

    /// The next (or previous) matching job after `from` in start order.
    pub fn step(&self, b: &Build, from: Option<usize>, forward: bool) -> Option<usize> {
        let mut order: Vec<usize> = (0..b.jobs.len()).collect();
        order.sort_by_key(|&i| (b.jobs[i].start, i));
        let at = from.and_then(|f| order.iter().position(|&i| i == f));
        let n = order.len();
        (1..=n)
            .map(|k| match (at, forward) {
                (None, true) => order[(k - 1) % n],
                (None, false) => order[n - k],
                (Some(a), true) => order[(a + k) % n],
                (Some(a), false) => order[(a + n - k % n) % n],
            })
            .find(|&i| self.matches(b, &b.jobs[i]))
    }

    /// How many jobs match.
    pub fn count(&self, b: &Build) -> usize {
        b.jobs.iter().filter(|j| self.matches(b, j)).count()
    }
}
