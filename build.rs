//! Embeds the demo tree (`assets/demo`) into the binary, so that `kpack-tui` with no
//! argument opens it from any directory: files (with their modes), symlinks and
//! directories, listed in `$OUT_DIR/demo.rs`. Also records the git revision the
//! binaries are built from (`KPACK_GIT_REV`, shown by `--version`).

use std::fmt::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

fn walk(root: &Path, dir: &Path, out: &mut String) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for p in entries {
        let rel = p
            .strip_prefix(root)
            .expect("under root")
            .to_string_lossy()
            .replace('\\', "/");
        let meta = std::fs::symlink_metadata(&p).expect("stat");
        if meta.file_type().is_symlink() {
            let t = std::fs::read_link(&p).expect("readlink");
            writeln!(
                out,
                "    ({rel:?}, DemoEntry::Symlink({:?})),",
                t.to_string_lossy()
            )
            .expect("write");
        } else if meta.is_dir() {
            writeln!(out, "    ({rel:?}, DemoEntry::Dir),").expect("write");
            walk(root, &p, out);
        } else if meta.is_file() {
            let mode = meta.permissions().mode() & 0o777;
            writeln!(
                out,
                "    ({rel:?}, DemoEntry::File(include_bytes!({:?}), {mode:#o})),",
                p.display().to_string()
            )
            .expect("write");
        }
    }
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo");
    println!("cargo:rerun-if-changed=assets/demo");
    let mut out = String::from(
        "/// The demo tree: (relative path, entry), parents before children.\npub static DEMO: &[(&str, DemoEntry)] = &[\n",
    );
    walk(&root, &root, &mut out);
    out.push_str("];\n");
    let dest = Path::new(&std::env::var("OUT_DIR").expect("OUT_DIR")).join("demo.rs");
    std::fs::write(dest, out).expect("write demo.rs");
    git_revision();
}

/// `KPACK_GIT_REV`: the commit checked out (`git rev-parse --short=12 HEAD`), or
/// "unknown" outside a git checkout (a source archive); `KPACK_GIT_REV` in the
/// environment (a packager's build) wins.
fn git_revision() {
    println!("cargo:rerun-if-env-changed=KPACK_GIT_REV");
    let rev = std::env::var("KPACK_GIT_REV").ok().or_else(|| {
        let git = |args: &[&str]| {
            std::process::Command::new("git")
                .args(args)
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        };
        // Rebuild when HEAD moves or the branch it names gets a new commit.
        for path in ["HEAD", "packed-refs"] {
            if let Some(p) = git(&["rev-parse", "--git-path", path]) {
                println!("cargo:rerun-if-changed={p}");
            }
        }
        if let Some(r) =
            git(&["symbolic-ref", "-q", "HEAD"]).and_then(|r| git(&["rev-parse", "--git-path", &r]))
        {
            println!("cargo:rerun-if-changed={r}");
        }
        git(&["rev-parse", "--short=12", "HEAD"])
    });
    println!(
        "cargo:rustc-env=KPACK_GIT_REV={}",
        rev.unwrap_or_else(|| "unknown".into())
    );
}
