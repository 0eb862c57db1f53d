//! Every example in the README and in `docs/` is checked against the real program
//! (#31 item 5):
//!
//! - ```` ```console ```` blocks are run: each `$ command` line (continued by a
//!   trailing `\`) runs with `sh -c` in a scratch directory per page (commands of a
//!   page share it, in order), where `assets`, `tests`, `scripts` and `data` of the
//!   checkout are linked and `kpack-tui` and `phc` are the binaries under test. The
//!   lines after it are its expected stdout: `...` on a line of its own stands for
//!   any number of lines, `[..]` inside a line for any text. The command must exit 0,
//!   or the status a trailing `# exit N` names.
//! - In ```` ```sh ```` blocks, every line that starts with `kpack-tui ` is parsed by
//!   the real command line (with `--help` appended, so nothing runs): an option that
//!   does not exist, or is misspelled, fails the test.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The README and every Markdown page under docs/.
fn pages() -> Vec<PathBuf> {
    let mut v = vec![root().join("README.md")];
    for e in walkdir::WalkDir::new(root().join("docs")).sort_by_file_name() {
        let e = e.unwrap();
        if e.path().extension().is_some_and(|x| x == "md") {
            v.push(e.path().to_path_buf());
        }
    }
    v
}

/// A fenced block: its info string, its first line number, its lines.
struct Block {
    info: String,
    line: usize,
    lines: Vec<String>,
}

fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut cur: Option<Block> = None;
    for (n, l) in text.lines().enumerate() {
        match (&mut cur, l.strip_prefix("```")) {
            (None, Some(info)) => {
                cur = Some(Block {
                    info: info.trim().to_string(),
                    line: n + 1,
                    lines: Vec::new(),
                })
            }
            (Some(_), Some(_)) => out.push(cur.take().unwrap()),
            (Some(b), None) => b.lines.push(l.to_string()),
            (None, None) => {}
        }
    }
    out
}

/// `$ command` steps of a console block: (command, expected lines, exit status).
fn steps(b: &Block) -> Vec<(String, Vec<String>, i32)> {
    let mut out: Vec<(String, Vec<String>, i32)> = Vec::new();
    let mut lines = b.lines.iter().peekable();
    while let Some(l) = lines.next() {
        if let Some(cmd) = l.strip_prefix("$ ") {
            let mut cmd = cmd.to_string();
            while cmd.ends_with('\\') {
                cmd.pop();
                cmd.push(' ');
                cmd.push_str(lines.next().map(|s| s.trim()).unwrap_or(""));
            }
            let status = cmd
                .rsplit_once("# exit ")
                .and_then(|(_, n)| n.trim().parse().ok())
                .unwrap_or(0);
            out.push((cmd, Vec::new(), status));
        } else if let Some(last) = out.last_mut() {
            last.1.push(l.to_string());
        }
    }
    // A blank line between two commands separates them; it is not output.
    for step in &mut out {
        while step.1.last().is_some_and(|l| l.trim().is_empty()) {
            step.1.pop();
        }
    }
    out
}

/// Does `got` match the expected lines (`...` any lines, `[..]` any text)?
fn matches(want: &[String], got: &[&str]) -> bool {
    match want.first() {
        None => got.is_empty(),
        Some(w) if w.trim() == "..." => {
            (0..=got.len()).any(|skip| matches(&want[1..], &got[skip..]))
        }
        Some(w) => !got.is_empty() && line_matches(w, got[0]) && matches(&want[1..], &got[1..]),
    }
}

fn line_matches(want: &str, got: &str) -> bool {
    let parts: Vec<&str> = want.split("[..]").collect();
    if parts.len() == 1 {
        return want == got;
    }
    let mut rest = match got.strip_prefix(parts[0]) {
        Some(r) => r,
        None => return false,
    };
    for (i, p) in parts.iter().enumerate().skip(1) {
        if i == parts.len() - 1 {
            return rest.ends_with(p);
        }
        match rest.find(p) {
            Some(at) => rest = &rest[at + p.len()..],
            None => return false,
        }
    }
    true
}

/// A scratch directory with the checkout's inputs linked and the binaries on PATH.
fn scratch() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    for d in ["assets", "tests", "scripts", "data"] {
        std::os::unix::fs::symlink(root().join(d), t.path().join(d)).unwrap();
    }
    t
}

fn bin_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_kpack-tui"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn run_console(page: &Path, b: &Block, dir: &Path, failures: &mut Vec<String>) {
    let path = format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for (cmd, want, status) in steps(b) {
        let o = Command::new("sh")
            .args(["-c", &cmd])
            .current_dir(dir)
            .env("PATH", &path)
            .env("KPACK_NO_TUI", "1")
            .env("NO_COLOR", "1")
            .env_remove("KPACK_JOBS")
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        let mut got: Vec<&str> = out.lines().collect();
        while got.last().is_some_and(|l| l.trim().is_empty()) {
            got.pop();
        }
        let where_ = format!("{}:{}: `{cmd}`", page.display(), b.line);
        if o.status.code() != Some(status) {
            failures.push(format!(
                "{where_}: exit {:?}, expected {status}\n{}",
                o.status.code(),
                String::from_utf8_lossy(&o.stderr)
            ));
        } else if !matches(&want, &got) {
            failures.push(format!(
                "{where_}: output differs\n--- expected\n{}\n--- got\n{out}",
                want.join("\n")
            ));
        }
    }
}

/// Split a synopsis line into words as sh would (quotes, no expansion); `None` for
/// lines that need a shell (pipes, substitutions) or hold placeholders.
fn words(line: &str) -> Option<Vec<String>> {
    let line = match line.find(" #") {
        Some(at) => &line[..at],
        None => line,
    };
    // A redirection ends the command's own words.
    let line = match line.find(" > ").or_else(|| line.find(" 2>")) {
        Some(at) => &line[..at],
        None => line,
    };
    if line.contains('…') || line.contains('|') || line.contains("$(") || line.contains(" ...") {
        return None;
    }
    let (mut out, mut cur, mut quote, mut any) = (Vec::new(), String::new(), None, false);
    for c in line.chars() {
        match (quote, c) {
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (Some(q), c) if c == q => quote = None,
            (None, c) if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                any = false;
            }
            (_, c) => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    Some(out)
}

fn check_synopsis(page: &Path, b: &Block, failures: &mut Vec<String>) -> usize {
    let mut checked = 0;
    let mut lines = b.lines.iter();
    while let Some(l) = lines.next() {
        let mut l = l.trim().to_string();
        while l.ends_with('\\') {
            l.pop();
            l.push_str(lines.next().map(|s| s.trim()).unwrap_or(""));
        }
        let Some(rest) = l.strip_prefix("kpack-tui ") else {
            continue;
        };
        let Some(mut args) = words(rest) else {
            continue;
        };
        args.push("--help".into());
        let o = Command::new(env!("CARGO_BIN_EXE_kpack-tui"))
            .args(&args)
            .output()
            .unwrap();
        checked += 1;
        if !o.status.success() {
            failures.push(format!(
                "{}:{}: `kpack-tui {rest}` does not parse: {}",
                page.display(),
                b.line,
                String::from_utf8_lossy(&o.stderr)
            ));
        }
    }
    checked
}

#[test]
fn every_example_in_the_readme_and_docs_is_the_real_output() {
    let mut failures = Vec::new();
    let (mut consoles, mut synopses) = (0, 0);
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let dir = scratch();
        for b in blocks(&text) {
            match b.info.as_str() {
                "console" => {
                    consoles += 1;
                    run_console(&page, &b, dir.path(), &mut failures);
                }
                "sh" => synopses += check_synopsis(&page, &b, &mut failures),
                _ => {}
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // The checks checked something: the tour and the guide have real examples.
    assert!(consoles >= 10, "{consoles} console blocks");
    assert!(synopses >= 40, "{synopses} synopsis lines");
}

#[test]
fn a_misspelled_option_in_a_synopsis_is_caught() {
    let b = Block {
        info: "sh".into(),
        line: 1,
        lines: vec![
            "kpack-tui pack ./install -o ./packed --group rocm --famly gfx90X".into(),
            "kpack-tui verify ./packed --loader first-match   # fine".into(),
        ],
    };
    let mut failures = Vec::new();
    assert_eq!(check_synopsis(Path::new("x.md"), &b, &mut failures), 2);
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(failures[0].contains("--famly"), "{failures:?}");
}

#[test]
fn expected_output_patterns() {
    let w = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert!(matches(&w(&["a", "...", "d"]), &["a", "b", "c", "d"]));
    assert!(matches(&w(&["a", "..."]), &["a"]));
    assert!(!matches(&w(&["a", "d"]), &["a", "b", "d"]));
    assert!(matches(
        &w(&["packed in [..] s ([..]/s)"]),
        &["packed in 0.03 s (8.39 MiB/s)"]
    ));
    assert!(!matches(&w(&["packed in [..] s"]), &["packed in 0.03 ms!"]));
    assert_eq!(
        words("pack 'a b' \"c\" -o x  # note").unwrap(),
        ["pack", "a b", "c", "-o", "x"]
    );
}

/// Every relative link of the README and the docs names a file that exists.
#[test]
fn every_relative_link_resolves() {
    let link = regex::Regex::new(r"\]\(([^)#\s]+)(#[^)]*)?\)").unwrap();
    let mut broken = Vec::new();
    let mut seen = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for c in link.captures_iter(&text) {
            let target = &c[1];
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            seen += 1;
            if !page.parent().unwrap().join(target).exists() {
                broken.push(format!("{}: {target}", page.display()));
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
    assert!(seen >= 30, "{seen} links");
}
