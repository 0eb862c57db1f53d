//! Write the zstd payloads of a fat binary's compressed (CCOB) bundles, back to back,
//! to one file: the input of the `zstd -d` reference in the kernels benchmark.
//!
//! ```text
//! cargo run --release --example ccob_payloads -- BINARY OUT
//! ```

use kpack::bundle::{Compression, ccob};
use kpack::elf::{self, ElfContent};
use std::io::Write;

fn main() {
    let mut args = std::env::args().skip(1);
    let bin = args.next().expect("usage: ccob_payloads BINARY OUT");
    let out = args.next().expect("usage: ccob_payloads BINARY OUT");
    let data = std::fs::read(&bin).expect("read");
    let Ok(ElfContent::Fat(fat)) = elf::inspect(&data) else {
        panic!("{bin}: not a fat binary")
    };
    let span = fat.fatbin.expect(".hip_fatbin");
    let sec = &data[span.offset as usize..(span.offset + span.size) as usize];
    let mut w = std::io::BufWriter::new(std::fs::File::create(&out).expect("create"));
    let (mut n, mut bytes) = (0, 0);
    for b in fat
        .bundles
        .iter()
        .filter(|b| b.compression == Compression::Zstd)
    {
        let raw = &sec[b.offset as usize..(b.offset + b.stored_size) as usize];
        let h = ccob::parse_header(raw).expect("CCOB header");
        let stored = h.stored_size(raw) as usize;
        w.write_all(&raw[h.header_len..stored]).expect("write");
        n += 1;
        bytes += stored - h.header_len;
    }
    w.flush().expect("flush");
    println!("{n} {bytes}");
}
