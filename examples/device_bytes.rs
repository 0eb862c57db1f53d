//! Write every code object of a tree's fat binaries, back to back, to one file: the
//! input of the `zstd -3 -T2` reference in the pack benchmark.
//!
//! ```text
//! cargo run --release --example device_stored -- TREE OUT
//! ```

use kpack::elf::{self, ElfContent};
use kpack::event::NoEvents;
use kpack::fsutil;
use kpack::scan::{self, FileKind, ScanOptions};
use std::io::Write;
use std::path::PathBuf;

fn main() {
    let mut args = std::env::args().skip(1);
    let tree = PathBuf::from(args.next().expect("usage: device_stored TREE OUT"));
    let out = PathBuf::from(args.next().expect("usage: device_stored TREE OUT"));
    let report = scan::scan(&tree, &ScanOptions::default(), &NoEvents).expect("scan");
    let mut w = std::io::BufWriter::new(std::fs::File::create(&out).expect("create"));
    let mut total = 0u64;
    for f in report.files.iter().filter(|f| {
        f.kind == FileKind::FatBinary && f.hard_link_of.is_none() && f.container.is_none()
    }) {
        let Ok(Some(map)) = fsutil::map_file(&tree.join(&f.path)) else {
            continue;
        };
        let Ok(ElfContent::Fat(fat)) = elf::inspect(&map) else {
            continue;
        };
        let Some(span) = fat.fatbin else { continue };
        let sec = &map[span.offset as usize..(span.offset + span.size) as usize];
        for b in &fat.bundles {
            let Ok(un) = b.uncompressed(sec, 1 << 34) else {
                continue;
            };
            for (_, bytes) in b.code_objects(&un).unwrap_or_default() {
                w.write_all(bytes).expect("write");
                total += bytes.len() as u64;
            }
        }
    }
    w.flush().expect("flush");
    println!("{total}");
}
