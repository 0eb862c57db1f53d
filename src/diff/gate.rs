//! The CI gate: growth budgets (`5%`, `10MiB`, `gfx942=2%`) checked on a report.

use super::DiffReport;

/// A growth budget: `5%`, `10MiB`, `gfx942=2%`.
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    /// Only this target (exact ID or processor), or the total.
    pub target: Option<String>,
    /// The limit.
    pub limit: Limit,
}

/// A relative or absolute limit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Limit {
    /// Percent of the old size.
    Percent(f64),
    /// Bytes.
    Bytes(u64),
}

impl Budget {
    /// Parse `5%`, `10MiB`, `2.5MB`, `4096`, `gfx942=2%`.
    pub fn parse(spec: &str) -> std::result::Result<Budget, String> {
        let (target, v) = match spec.split_once('=') {
            Some((t, v)) if t.starts_with("gfx") => (Some(t.to_string()), v),
            Some(_) => return Err(format!("{spec:?}: write TARGET=LIMIT (gfx942=2%)")),
            None => (None, spec),
        };
        let v = v.trim();
        let limit = if let Some(p) = v.strip_suffix('%') {
            let p: f64 = p
                .trim()
                .parse()
                .map_err(|_| format!("{spec:?}: {p:?} is not a percentage"))?;
            if !(p.is_finite() && p >= 0.0) {
                return Err(format!("{spec:?}: a percentage must be 0 or more"));
            }
            Limit::Percent(p)
        } else {
            let split = v
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(v.len());
            let (num, unit) = v.split_at(split);
            let num: f64 = num
                .parse()
                .map_err(|_| format!("{spec:?}: write a size (10MiB) or a percentage (5%)"))?;
            let mult: f64 = match unit.trim() {
                "" | "B" => 1.0,
                "KB" | "kB" => 1e3,
                "MB" => 1e6,
                "GB" => 1e9,
                "KiB" | "K" => 1024.0,
                "MiB" | "M" => 1024.0 * 1024.0,
                "GiB" | "G" => 1024.0 * 1024.0 * 1024.0,
                u => {
                    return Err(format!(
                        "{spec:?}: unknown unit {u:?} (B, KiB, MiB, GiB, KB, MB, GB)"
                    ));
                }
            };
            Limit::Bytes((num * mult) as u64)
        };
        Ok(Budget { target, limit })
    }

    /// The message when `old` → `new` breaks this budget, `None` when within it.
    pub fn check(&self, old: u64, new: u64) -> Option<String> {
        let grew = new.saturating_sub(old);
        let over = match self.limit {
            Limit::Percent(p) => {
                if old == 0 {
                    grew > 0
                } else {
                    grew as f64 * 100.0 / old as f64 > p
                }
            }
            Limit::Bytes(b) => grew > b,
        };
        over.then(|| {
            let pct = if old == 0 {
                "new".to_string()
            } else {
                format!("+{:.1}%", grew as f64 * 100.0 / old as f64)
            };
            let what = self.target.as_deref().unwrap_or("device code");
            let limit = match self.limit {
                Limit::Percent(p) => format!("{p}%"),
                Limit::Bytes(b) => format!("{b} bytes"),
            };
            format!("{what} grew {grew} bytes ({pct}: {old} -> {new}), more than {limit}")
        })
    }
}

/// Every budget the report breaks.
pub fn gate(report: &DiffReport, budgets: &[Budget]) -> Vec<String> {
    let mut out = Vec::new();
    for b in budgets {
        let (old, new) = match &b.target {
            None => (report.old_device, report.new_device),
            Some(t) => report
                .targets
                .iter()
                .filter(|d| {
                    d.target == *t
                        || (!t.contains(':')
                            && crate::bundle::target::base_processor(&d.target) == t)
                })
                .fold((0, 0), |(o, n), d| (o + d.old_bytes, n + d.new_bytes)),
        };
        out.extend(b.check(old, new));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_parse_and_check() {
        let b = Budget::parse("5%").unwrap();
        assert_eq!(b.check(100, 105), None);
        assert!(b.check(100, 106).unwrap().contains("+6.0%"));
        let b = Budget::parse("10MiB").unwrap();
        assert_eq!(b.limit, Limit::Bytes(10 << 20));
        assert_eq!(b.check(0, 10 << 20), None);
        assert!(b.check(0, (10 << 20) + 1).is_some());
        let b = Budget::parse("gfx942=2.5%").unwrap();
        assert_eq!(b.target.as_deref(), Some("gfx942"));
        assert_eq!(
            Budget::parse("1.5MB").unwrap().limit,
            Limit::Bytes(1_500_000)
        );
        for bad in ["", "x%", "-1%", "5 parsecs", "foo=2%", "10XB"] {
            assert!(Budget::parse(bad).is_err(), "{bad}");
        }
        // Shrinking never fails; growth from nothing fails a percentage.
        assert_eq!(Budget::parse("0%").unwrap().check(10, 5), None);
        assert!(Budget::parse("50%").unwrap().check(0, 1).is_some());
    }
}
