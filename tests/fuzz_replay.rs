//! Replays the fuzz corpus (`fuzz/seeds/<target>`, `fuzz/regressions/<target>`) and a
//! deterministic set of mutations of it through every parser's fuzz entry point, so
//! `cargo test` exercises what the cargo-fuzz targets do, on stable Rust. A crash
//! writes the input to `target/fuzz-replay-crash-*` and names the mutation.

use std::path::{Path, PathBuf};

/// xorshift64*: small, deterministic, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

const BOUNDARY: [u64; 9] = [
    0,
    1,
    0x7f,
    0xff,
    0x1000,
    0x7fff_ffff,
    0xffff_ffff,
    u64::MAX,
    1 << 40,
];

fn mutate(rng: &mut Rng, input: &[u8]) -> Vec<u8> {
    let mut d = input.to_vec();
    for _ in 0..1 + rng.below(3) {
        match rng.below(7) {
            0 if !d.is_empty() => {
                let i = rng.below(d.len());
                d[i] ^= 1 << rng.below(8);
            }
            1 if !d.is_empty() => {
                let i = rng.below(d.len());
                d[i] = [0, 0xff, 0x7f, 0x80][rng.below(4)];
            }
            2 if d.len() >= 8 => {
                // A lying size or offset: boundary value in an aligned word.
                let i = rng.below(d.len() / 8) * 8;
                let v = BOUNDARY[rng.below(BOUNDARY.len())];
                let bytes = if rng.below(2) == 0 {
                    v.to_le_bytes().to_vec()
                } else {
                    (v as u32).to_le_bytes().to_vec()
                };
                let n = bytes.len().min(d.len() - i);
                d[i..i + n].copy_from_slice(&bytes[..n]);
            }
            3 => {
                let n = rng.below(d.len() + 1);
                d.truncate(n);
            }
            4 if !d.is_empty() => {
                let i = rng.below(d.len());
                let n = rng.below(64);
                let junk: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                d.splice(i..i, junk);
            }
            5 if d.len() > 16 => {
                let a = rng.below(d.len() - 8);
                let b = rng.below(d.len() - 8);
                let chunk = d[a..a + 8].to_vec();
                d[b..b + 8].copy_from_slice(&chunk);
            }
            _ => {
                let i = rng.below(d.len() + 1);
                d.truncate(i);
                d.extend((0..rng.below(32)).map(|_| rng.next() as u8));
            }
        }
    }
    d
}

fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut out = Vec::new();
    for sub in ["seeds", "regressions"] {
        let Ok(rd) = std::fs::read_dir(root.join(sub).join(target)) else {
            continue;
        };
        let mut files: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
        files.sort();
        for f in files {
            out.push((f.clone(), std::fs::read(&f).unwrap()));
        }
    }
    assert!(!out.is_empty(), "no seeds for fuzz target {target}");
    out
}

fn replay(target: &str, iterations: usize, f: fn(&[u8])) {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ target.len() as u64);
    for (path, seed) in corpus(target) {
        let run = |what: String, input: Vec<u8>| {
            if std::panic::catch_unwind(|| f(&input)).is_err() {
                let out = Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join(format!("target/fuzz-replay-crash-{target}"));
                std::fs::write(&out, &input).unwrap();
                panic!(
                    "fuzz target {target} panicked on {what}; input saved to {}",
                    out.display()
                );
            }
        };
        run(format!("{}", path.display()), seed.clone());
        for i in 0..iterations {
            let m = mutate(&mut rng, &seed);
            run(format!("mutation {i} of {}", path.display()), m);
        }
    }
}

#[test]
fn bundle_parser() {
    replay("bundle", 3000, kpack::fuzzing::bundle_walk);
}

#[test]
fn elf_reader() {
    replay("elf", 1500, kpack::fuzzing::elf_inspect);
}

#[test]
fn file_classification() {
    replay("classify", 1000, kpack::fuzzing::classify);
}

#[test]
fn kpack_reader() {
    replay("kpack", 3000, kpack::fuzzing::kpack_reader);
}

#[test]
fn zip_and_wheel_reader() {
    replay("wheel", 3000, kpack::fuzzing::wheel);
}

#[test]
fn record_csv() {
    replay("record", 3000, kpack::fuzzing::record);
}

#[test]
fn pe_rewrite() {
    replay("pe_rewrite", 1500, kpack::fuzzing::pe_rewrite);
}

#[test]
fn marker() {
    replay("marker", 3000, kpack::fuzzing::marker);
}

#[test]
fn code_object_reader() {
    replay("codeobj", 1500, kpack::fuzzing::codeobj);
}

#[test]
fn embedded_code_finder() {
    replay("embedded", 1500, kpack::fuzzing::embedded);
}

#[test]
fn artifact_texts() {
    replay("artifacts", 3000, kpack::fuzzing::artifact_texts);
}

#[test]
fn normalize_repair() {
    replay("normalize", 600, kpack::fuzzing::normalize);
}

#[test]
fn ledger_reader() {
    replay("ledger", 3000, kpack::fuzzing::ledger);
}

#[test]
fn rewrite_plan_apply_verify() {
    replay("rewrite", 600, kpack::fuzzing::rewrite);
}

#[test]
fn ninja_log_parser() {
    replay("ninja_log", 3000, kpack::fuzzing::ninja_log);
}

#[test]
fn phc_readers() {
    replay("phc", 3000, kpack::fuzzing::phc);
}
