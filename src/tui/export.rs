//! What `y`, `Y`, `E` and `J` take out of the UI: the selected item's text, and the
//! current view's table (as TSV for the clipboard, as CSV or JSON for a file).

use super::app::{App, View};
use crate::text::csv_field;
use std::collections::BTreeMap;

/// A view's table: its columns and every row it lists (not only those on screen).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    /// A short name for the file it is exported to (`kernels`).
    pub name: &'static str,
    /// The columns.
    pub header: Vec<String>,
    /// The rows, as many fields as columns.
    pub rows: Vec<Vec<String>>,
}

/// `kpack-tui.table/1`: a view's table as exported (`E`, JSON).
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct TableJson {
    /// The view's name for it.
    pub table: String,
    /// Column names, in the view's order (made unique: `name_2`).
    pub columns: Vec<String>,
    /// One object per row, column name → the text shown.
    pub rows: Vec<BTreeMap<String, String>>,
}

impl Table {
    /// Tab-separated, a header line first (tabs and line breaks in fields become
    /// spaces, so every row stays one line).
    pub fn tsv(&self) -> String {
        let clean = |s: &String| s.replace(['\t', '\n', '\r'], " ");
        let mut out = String::new();
        for r in std::iter::once(&self.header).chain(&self.rows) {
            out.push_str(&r.iter().map(clean).collect::<Vec<_>>().join("\t"));
            out.push('\n');
        }
        out
    }

    /// A `kpack-tui.table/1` JSON document: the table's name, its columns, and each
    /// row as an object of column → value (the text shown), in the view's order.
    pub fn json(&self) -> String {
        // Keys are the column names, made unique (`name_2`) should two be alike.
        let mut columns: Vec<String> = Vec::with_capacity(self.header.len());
        for h in &self.header {
            let mut c = h.clone();
            let mut n = 1;
            while columns.contains(&c) {
                n += 1;
                c = format!("{h}_{n}");
            }
            columns.push(c);
        }
        let rows: Vec<BTreeMap<String, String>> = self
            .rows
            .iter()
            .map(|r| columns.iter().cloned().zip(r.iter().cloned()).collect())
            .collect();
        let doc = crate::batch::Versioned {
            schema: "kpack-tui.table/1",
            value: &TableJson {
                table: self.name.to_string(),
                columns,
                rows,
            },
        };
        let mut s = serde_json::to_string_pretty(&doc).unwrap_or_default();
        s.push('\n');
        s
    }

    /// RFC 4180 CSV, a header line first.
    pub fn csv(&self) -> String {
        let mut out = String::new();
        for r in std::iter::once(&self.header).chain(&self.rows) {
            out.push_str(&r.iter().map(|f| csv_field(f)).collect::<Vec<_>>().join(","));
            out.push('\n');
        }
        out
    }
}

fn strings<const N: usize>(a: [&str; N]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

impl App {
    /// The selected item's text (`y`): the entry's path, the kernel's name, the
    /// archive entry's key, the pack command of the selection, or the whole log.
    pub fn selected_text(&self) -> Option<(String, &'static str)> {
        if self.log.open {
            let text: String = self
                .log
                .entries
                .iter()
                .map(|m| {
                    if m.about.is_empty() {
                        format!("{}\n", m.text)
                    } else {
                        format!("{}: {}\n", m.about, m.text)
                    }
                })
                .collect();
            return Some((text, "the messages"));
        }
        match self.view {
            View::Explorer => {
                let tree = self.tree.as_ref()?;
                let row = self.rows().get(self.explorer.selected).copied()?;
                let rel = tree.path(row.node);
                // A path to use in a shell: under the tree opened (a wheel's member
                // is named as in the wheel).
                let path = if self.root_is_file {
                    rel
                } else {
                    self.root
                        .join(kpack::relpath::to_path(&rel))
                        .display()
                        .to_string()
                };
                Some((path, "the path"))
            }
            View::Kernels => {
                let rows = self.kernels.rows();
                let k = rows.get(self.kernels.cursor)?;
                Some((k.kernel.display_name().to_string(), "the kernel's name"))
            }
            View::Inspector => {
                let a = self.inspector.index.as_ref()?;
                let k = a.kernels.get(self.inspector.cursor)?;
                Some((k.key.to_string(), "the archive key"))
            }
            View::Families => {
                let sel = self.families.selection();
                let mut cmd = format!(
                    "kpack-tui pack {} -o {}.packed --group {}",
                    shell_word(&self.root.display().to_string()),
                    shell_word(
                        &self
                            .root
                            .file_name()
                            .map_or("out".into(), |n| n.to_string_lossy().into_owned())
                    ),
                    super::app::DEFAULT_GROUP
                );
                for f in &sel.families {
                    cmd.push_str(&format!(" --family {f}"));
                }
                for t in &sel.targets {
                    cmd.push_str(&format!(" --target {t}"));
                }
                if sel.is_empty() {
                    cmd.push_str(" --all");
                }
                Some((cmd, "the pack command of this selection"))
            }
            View::Preview | View::Pack => None,
        }
    }

    /// The current view's table (`Y`, `E`), with every row it lists.
    pub fn table(&self) -> Option<Table> {
        match self.view {
            View::Explorer => {
                let (tree, report) = (self.tree.as_ref()?, self.report.as_ref()?);
                let rows = self
                    .rows()
                    .iter()
                    .map(|r| {
                        let n = &tree.nodes[r.node];
                        let class = n
                            .file
                            .map_or("folder", |f| report.files[f].kind.name())
                            .to_string();
                        vec![
                            tree.path(r.node),
                            class,
                            n.size.to_string(),
                            n.raw.to_string(),
                        ]
                    })
                    .collect();
                Some(Table {
                    name: "explorer",
                    header: strings(["path", "class", "bytes", "device_raw"]),
                    rows,
                })
            }
            View::Kernels => {
                let header = crate::text::KERNEL_CSV_COLUMNS
                    .split(',')
                    .map(str::to_string)
                    .collect();
                // The same fields as `kernels --csv`.
                let rows = self
                    .kernels
                    .rows()
                    .iter()
                    .map(|k| crate::text::kernel_fields(k))
                    .collect();
                Some(Table {
                    name: "kernels",
                    header,
                    rows,
                })
            }
            View::Inspector => {
                let a = self.inspector.index.as_ref()?;
                let rows = a
                    .kernels
                    .iter()
                    .map(|k| {
                        vec![
                            k.key.to_string(),
                            k.arch.to_string(),
                            k.size.to_string(),
                            k.compressed_size.to_string(),
                            k.alias_of.as_deref().unwrap_or_default().to_string(),
                        ]
                    })
                    .collect();
                Some(Table {
                    name: "archive",
                    header: strings(["key", "target", "raw", "stored", "alias_of"]),
                    rows,
                })
            }
            View::Families => {
                let report = self.report.as_ref()?;
                let sel = self.families.selection();
                let mut archs: Vec<_> = report.arch_totals.iter().collect();
                archs.sort_by(|a, b| kpack::natural::target_cmp(a.0, b.0));
                let rows = archs
                    .into_iter()
                    .map(|(a, t)| {
                        vec![
                            a.clone(),
                            report.archs.get(a).copied().unwrap_or(0).to_string(),
                            t.kernel_database.to_string(),
                            (t.code_objects + t.archived_code_objects).to_string(),
                            if sel.takes(a) { "yes" } else { "no" }.to_string(),
                        ]
                    })
                    .collect();
                Some(Table {
                    name: "targets",
                    header: strings([
                        "target",
                        "device_raw",
                        "kernel_database",
                        "code_objects",
                        "selected",
                    ]),
                    rows,
                })
            }
            View::Preview | View::Pack => None,
        }
    }
}

impl App {
    /// What `V` shows in `$PAGER`: the message log when open, the preview, a text
    /// file selected in the Explorer (else its detail), the view's table.
    pub fn page(&self) -> Option<super::external::Open> {
        use super::external::Open;
        if self.log.open {
            return self.selected_text().map(|(t, _)| Open::Text(t));
        }
        match self.view {
            View::Preview => Some(Open::Text(super::previewview::preview_text(&self.preview))),
            View::Explorer => {
                let (tree, report) = (self.tree.as_ref()?, self.report.as_ref()?);
                let row = self.rows().get(self.explorer.selected).copied()?;
                let f = &report.files[tree.nodes[row.node].file?];
                if let Some(p) = self.editable(f) {
                    return Some(Open::File(p));
                }
                let lines = super::detail::file_detail(f, super::widgets::Theme { color: false });
                Some(Open::Text(
                    lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
                ))
            }
            _ => self.table().map(|t| Open::Text(t.tsv())),
        }
    }

    /// Where `f` is when it is a plain file of a tree on disk with no device code (a
    /// text file a pager or an editor can open), else `None`.
    pub fn editable(&self, f: &kpack::scan::FileReport) -> Option<std::path::PathBuf> {
        let plain = matches!(
            f.kind,
            kpack::scan::FileKind::Opaque | kpack::scan::FileKind::Other
        );
        (plain && !self.root_is_file).then(|| self.root.join(kpack::relpath::to_path(&f.path)))
    }
}

/// `s` as one shell word (quoted when it holds anything but safe characters).
fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:=@".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_as_tsv_and_csv() {
        let t = Table {
            name: "t",
            header: strings(["a", "b"]),
            rows: vec![strings(["x,y", "tab\there"]), strings(["say \"hi\"", ""])],
        };
        assert_eq!(t.tsv(), "a\tb\nx,y\ttab here\nsay \"hi\"\t\n");
        assert_eq!(t.csv(), "a,b\n\"x,y\",tab\there\n\"say \"\"hi\"\"\",\n");
    }

    #[test]
    fn shell_words_quote_what_needs_it() {
        assert_eq!(shell_word("/opt/rocm-7.0"), "/opt/rocm-7.0");
        assert_eq!(shell_word("my tree"), "'my tree'");
        assert_eq!(shell_word("it's"), "'it'\\''s'");
    }
}
