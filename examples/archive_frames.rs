//! Write the stored zstd frame of every kernel of every `.kpack` archive under a
//! tree, back to back, to one file (each frame once, TOC aliases skipped): the input
//! of the `zstd -d` reference in the verify benchmark. Prints the frame count and
//! their decoded bytes.
//!
//! ```text
//! cargo run --release --example archive_frames -- TREE OUT
//! ```

use kpack::kpack::archive::{Archive, Scheme};
use std::io::Write;
use std::path::PathBuf;

fn main() {
    let mut args = std::env::args().skip(1);
    let tree = PathBuf::from(args.next().expect("usage: archive_frames TREE OUT"));
    let out = PathBuf::from(args.next().expect("usage: archive_frames TREE OUT"));
    let mut w = std::io::BufWriter::new(std::fs::File::create(&out).expect("create"));
    let (mut frames, mut bytes) = (0u64, 0u64);
    let mut paths: Vec<PathBuf> = walk(&tree);
    paths.sort();
    for p in paths {
        let a = Archive::open(&p).expect("archive");
        assert_eq!(
            a.index.compression_scheme,
            Scheme::ZstdPerKernel,
            "{}",
            p.display()
        );
        for e in a.index.kernels.iter().filter(|e| !e.is_alias()) {
            w.write_all(a.stored(e)).expect("write");
            frames += 1;
            bytes += e.size;
        }
    }
    w.flush().expect("flush");
    println!("{frames} {bytes}");
}

fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let p = e.path();
        let ft = e.file_type().expect("file type");
        if ft.is_dir() {
            out.extend(walk(&p));
        } else if ft.is_file() && p.extension().is_some_and(|x| x == "kpack") {
            out.push(p);
        }
    }
    out
}
