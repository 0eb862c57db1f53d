//! Synthetic device code for the benchmark programs: real code objects from the
//! fixture binaries, cut into chunks and lightly mutated, so every generated object
//! is different and compresses like machine code.
#![allow(dead_code)]

use kpack::elf::{self, ElfContent};
use std::path::Path;

/// xorshift64*: deterministic and fast.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
    /// Log-uniform in [lo, hi].
    pub fn log_range(&mut self, lo: u64, hi: u64) -> u64 {
        let (l, h) = ((lo as f64).ln(), (hi as f64).ln());
        let f = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        (l + (h - l) * f).exp() as u64
    }
}

/// Arches of generated binaries, with the processor's EF_AMDGPU_MACH and feature bits.
pub const ARCHES: &[(&str, u32)] = &[
    ("gfx900", 0x02c),
    ("gfx906", 0x02f),
    ("gfx908", 0x030),
    ("gfx90a", 0x03f),
    ("gfx90a:xnack+", 0x33f),
    ("gfx942", 0x04c),
    ("gfx1030", 0x036),
    ("gfx1100", 0x041),
    ("gfx1101", 0x046),
    ("gfx1201", 0x04e),
];

pub struct Pool {
    /// Whole real code objects (valid ELF, metadata notes and symbols), smallest first.
    pub objects: Vec<Vec<u8>>,
    pub bytes: Vec<u8>,
}

pub fn load_pool(fixtures: &Path) -> Pool {
    let mut objects = Vec::new();
    let mut bytes = Vec::new();
    for name in [
        "libvadd.so",
        "app_pie",
        "app_nopie",
        "librdc.so",
        "libzkern.so",
        "libkernels.so",
        "libkernels_z.so",
    ] {
        let data = std::fs::read(fixtures.join(name))
            .unwrap_or_else(|e| panic!("{name}: {e} (run scripts/make-fixtures.sh)"));
        let Ok(ElfContent::Fat(fat)) = elf::inspect(&data) else {
            panic!("{name} is not a fat binary")
        };
        let span = fat.fatbin.unwrap();
        let sec = &data[span.offset as usize..(span.offset + span.size) as usize];
        for b in &fat.bundles {
            let un = b.uncompressed(sec, 1 << 30).unwrap();
            for (_, co) in b.code_objects(&un).unwrap() {
                objects.push(co.to_vec());
                bytes.extend_from_slice(co);
            }
        }
    }
    objects.sort_by_key(Vec::len);
    Pool { objects, bytes }
}

/// A code object of about `size` bytes for `mach`: a whole real code object (so its
/// kernels and metadata read as real ones do), then mutated real code up to `size`
/// (past the ELF's end, where no reader looks). Never smaller than the smallest real
/// one.
pub fn code_object(pool: &Pool, mach: u32, size: usize, rng: &mut Rng) -> Vec<u8> {
    let fitting = pool.objects.partition_point(|o| o.len() <= size).max(1);
    let mut out = pool.objects[rng.below(fitting as u64) as usize].clone();
    if out.len() >= 0x34 {
        let flags = u32::from_le_bytes(out[0x30..0x34].try_into().unwrap());
        out[0x30..0x34].copy_from_slice(&((flags & !0xfff) | mach).to_le_bytes());
    }
    while out.len() < size {
        let len = rng.range(24, 400) as usize;
        let at = rng.below((pool.bytes.len() - len) as u64) as usize;
        let start = out.len();
        out.extend_from_slice(&pool.bytes[at..at + len]);
        // Mutate a few bytes so no two objects share long runs.
        for _ in 0..len / 12 {
            let i = start + rng.below(len as u64) as usize;
            out[i] = rng.next() as u8;
        }
    }
    out.truncate(size.max(pool.objects[0].len()));
    out
}

pub fn text_file(rng: &mut Rng, size: usize) -> Vec<u8> {
    const WORDS: &[&str] = &[
        "hip",
        "kernel",
        "device",
        "memory",
        "stream",
        "launch",
        "grid",
        "block",
        "rocm",
        "arch",
        "#include",
        "int",
        "float",
        "return",
        "void",
        "const",
        "struct",
        "template",
        "namespace",
        "{",
        "}",
        ";",
        "\n",
    ];
    let mut s = Vec::with_capacity(size);
    while s.len() < size {
        s.extend_from_slice(WORDS[rng.below(WORDS.len() as u64) as usize].as_bytes());
        s.push(if rng.below(9) == 0 { b'\n' } else { b' ' });
    }
    s.truncate(size);
    s
}
