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

impl Budget {
    /// The message when `old` → `new` shrinks past this budget, `None` when within it.
    pub fn check_shrink(&self, old: u64, new: u64) -> Option<String> {
        let lost = old.saturating_sub(new);
        let over = match self.limit {
            Limit::Percent(p) => old > 0 && lost as f64 * 100.0 / old as f64 > p,
            Limit::Bytes(b) => lost > b,
        };
        over.then(|| {
            let what = self.target.as_deref().unwrap_or("device code");
            let limit = match self.limit {
                Limit::Percent(p) => format!("{p}%"),
                Limit::Bytes(b) => format!("{b} bytes"),
            };
            let pct = if old == 0 {
                String::new()
            } else {
                format!(" (-{:.1}%)", lost as f64 * 100.0 / old as f64)
            };
            format!("{what} shrank {lost} bytes{pct}: {old} -> {new}, more than {limit}")
        })
    }
}

/// What `--fail-if-removed` watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    /// A target with device code in OLD and none in NEW.
    Targets,
    /// A shared library (`*.so`, `*.so.N`, `*.dll`) in OLD and not in NEW.
    Libraries,
    /// A kernel-database file (Tensile, MIOpen, hipBLASLt…) in OLD and not in NEW.
    Databases,
    /// A kernel in OLD and not in NEW.
    Kernels,
    /// Any file in OLD and not in NEW.
    Files,
}

/// Every removal of the kinds in `what`, one line each (empty: nothing was lost).
pub fn removals(report: &DiffReport, what: &[Removal]) -> Vec<String> {
    let mut out = Vec::new();
    let removed = || {
        report
            .files
            .iter()
            .filter(|f| f.change == super::Change::Removed)
    };
    for w in what {
        match w {
            Removal::Targets => out.extend(
                report
                    .targets
                    .iter()
                    .filter(|t| t.old_bytes > 0 && t.new_bytes == 0)
                    .map(|t| {
                        format!(
                            "target {} removed ({} bytes of device code)",
                            t.target, t.old_bytes
                        )
                    }),
            ),
            Removal::Libraries => out.extend(
                removed()
                    .filter(|f| {
                        let name = f.path.rsplit('/').next().unwrap_or(&f.path);
                        name.ends_with(".so") || name.contains(".so.") || name.ends_with(".dll")
                    })
                    .map(|f| format!("library {} removed", f.path)),
            ),
            Removal::Databases => out.extend(
                removed()
                    .filter(|f| crate::kerneldb::classify(&f.path).is_some())
                    .map(|f| format!("kernel-database file {} removed", f.path)),
            ),
            Removal::Kernels => out.extend(
                report
                    .kernels
                    .iter()
                    .filter(|k| k.old_size.is_some() && k.new_size.is_none())
                    .map(|k| {
                        format!(
                            "kernel {} ({}) of {} removed",
                            k.demangled.as_deref().unwrap_or(&k.name),
                            k.target,
                            k.binary
                        )
                    }),
            ),
            Removal::Files => out.extend(removed().map(|f| format!("file {} removed", f.path))),
        }
    }
    out
}

/// Every shrink budget the report breaks.
pub fn shrink_gate(report: &DiffReport, budgets: &[Budget]) -> Vec<String> {
    budgets
        .iter()
        .filter_map(|b| {
            let (old, new) = sides(report, b);
            b.check_shrink(old, new)
        })
        .collect()
}

fn sides(report: &DiffReport, b: &Budget) -> (u64, u64) {
    match &b.target {
        None => (report.old_device_raw, report.new_device_raw),
        Some(t) => report
            .targets
            .iter()
            .filter(|d| {
                d.target == *t
                    || (!t.contains(':') && crate::bundle::target::base_processor(&d.target) == t)
            })
            .fold((0, 0), |(o, n), d| (o + d.old_bytes, n + d.new_bytes)),
    }
}

/// Every budget the report breaks.
pub fn gate(report: &DiffReport, budgets: &[Budget]) -> Vec<String> {
    budgets
        .iter()
        .filter_map(|b| {
            let (old, new) = sides(report, b);
            b.check(old, new)
        })
        .collect()
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
