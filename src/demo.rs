//! The demo tree compiled into the binary, unpacked on demand to a temporary
//! directory that lives as long as the returned handle.

use anyhow::{Context, Result};
use std::os::unix::fs::PermissionsExt;

/// One entry of the embedded tree.
pub enum DemoEntry {
    /// A directory.
    Dir,
    /// A file: its bytes and permission bits.
    File(&'static [u8], u32),
    /// A symlink and its target text.
    Symlink(&'static str),
}

include!(concat!(env!("OUT_DIR"), "/demo.rs"));

/// Unpack the demo tree; the directory is `handle.path().join("demo")`.
pub fn unpack() -> Result<tempfile::TempDir> {
    let tmp = tempfile::Builder::new()
        .prefix("kpack-tui-demo-")
        .tempdir()
        .context("cannot create a temporary directory for the demo")?;
    let root = tmp.path().join("demo");
    std::fs::create_dir(&root)?;
    for (rel, entry) in DEMO {
        let p = root.join(rel);
        match entry {
            DemoEntry::Dir => std::fs::create_dir_all(&p)?,
            DemoEntry::File(bytes, mode) => {
                std::fs::write(&p, bytes)?;
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(*mode))?;
            }
            DemoEntry::Symlink(t) => std::os::unix::fs::symlink(t, &p)?,
        }
    }
    Ok(tmp)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_embedded_demo_scans_like_the_checkout() {
        let tmp = super::unpack().unwrap();
        let opts = kpack::scan::ScanOptions {
            threads: 1,
            ..Default::default()
        };
        let a =
            kpack::scan::scan(&tmp.path().join("demo"), &opts, &kpack::event::NoEvents).unwrap();
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo");
        let b = kpack::scan::scan(&dir, &opts, &kpack::event::NoEvents).unwrap();
        let shape = |r: &kpack::scan::TreeReport| {
            r.files
                .iter()
                .map(|f| (f.path.clone(), f.kind, f.size, f.mode, f.target.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(shape(&a), shape(&b));
        assert_eq!(a.archs, b.archs);
    }
}
