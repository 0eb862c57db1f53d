//! Generate a realistic install tree of a chosen size for benchmarks.
//!
//! ```text
//! cargo run --release --example gen_tree -- OUT --size-mb 1024 [--seed 1] [--fixtures tests/fixtures/bin]
//! cp -al OUT NEXT && cargo run --release --example gen_tree -- NEXT --size-mb 1024 [--seed 1] --rebuild 5
//! cargo run --release --example gen_tree -- --single lib/libbig.so --tus 1 --size-mb 72 [--archs 1]
//! ```
//!
//! `--rebuild N` turns a copy of a generated tree (same size and seed) into its next
//! build: N shared libraries are rebuilt with the device code of one translation unit
//! changed (new bytes, 5% larger); everything else stays byte for byte.
//!
//! The device code is made from the real code objects of the fixture binaries
//! (compiled here by hipcc/clang-19): each generated code object starts with a real
//! code-object header of its arch and continues with chunks of real machine code,
//! lightly mutated, so that every object differs and compresses like code does
//! (about 3-4x with zstd -3), rather than one file copied N times. Fat binaries are
//! linked for real by `cc` (shared libraries and PIE executables) from a `.incbin` of
//! their bundles (by `$KPACK_GEN_CC` when set: a cross compiler gives the same
//! binaries for another host CPU), one bundle and one `.hipFatBinSegment` wrapper per translation
//! unit, some bundles compressed (CCOB v2 zstd) and most not. Around them: `.so`
//! version symlinks, rocBLAS-style kernel databases, many small text files and a
//! few large data files.

#[path = "common/synth.rs"]
mod synth;

use kpack::bundle::{self, Compression, ccob};
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use synth::{ARCHES, Pool, Rng, code_object, load_pool, text_file};

struct BinarySpec {
    rel: String,
    exe: bool,
    tus: Vec<(Compression, Vec<(String, usize)>)>,
    host_size: usize,
    seed: u64,
    /// The translation unit whose device code differs from the first build.
    changed_tu: Option<usize>,
}

/// The C compiler that links the binaries: `cc`, or `$KPACK_GEN_CC` (a cross
/// compiler such as `aarch64-linux-gnu-gcc`: the same binaries for another host CPU).
fn linker() -> String {
    std::env::var("KPACK_GEN_CC").unwrap_or_else(|_| "cc".into())
}

fn build_binary(pool: &Pool, out: &Path, spec: &BinarySpec, work: &Path) {
    let mut rng = Rng(spec.seed);
    let dir = work.join(format!("b{}", spec.seed));
    std::fs::create_dir_all(&dir).unwrap();
    let mut asm = String::from(
        ".section .note.GNU-stack,\"\",@progbits\n.section .hip_fatbin,\"a\",@progbits\n",
    );
    for (i, (comp, targets)) in spec.tus.iter().enumerate() {
        let objects_of = |rng: &mut Rng, grow: f64| -> Vec<(String, Vec<u8>)> {
            targets
                .iter()
                .map(|(arch, size)| {
                    let mach = ARCHES
                        .iter()
                        .find(|(a, _)| a == arch)
                        .map_or(0x02c, |(_, m)| *m);
                    (
                        format!("hipv4-amdgcn-amd-amdhsa--{arch}"),
                        code_object(pool, mach, (*size as f64 * grow) as usize, rng),
                    )
                })
                .collect()
        };
        // The first build's objects always draw from `rng`, so that a rebuilt
        // translation unit leaves every other one (and the host blob) unchanged.
        let mut objects = objects_of(&mut rng, 1.0);
        if spec.changed_tu == Some(i) {
            objects = objects_of(&mut Rng(spec.seed ^ 0x0005_EED0_F2EB_011D), 1.05);
        }
        let mut entries: Vec<(&str, &[u8])> = vec![("host-x86_64-unknown-linux-gnu-", &[])];
        entries.extend(objects.iter().map(|(id, b)| (id.as_str(), b.as_slice())));
        let plain = bundle::write_plain(&entries, 4096);
        let bytes = if *comp == Compression::Zstd {
            ccob::encode(&plain, 2, Compression::Zstd)
        } else {
            plain
        };
        std::fs::write(dir.join(format!("tu{i}.bin")), bytes).unwrap();
        asm += &format!(".p2align 12\n__kpack_gen_fatbin_{i}:\n.incbin \"tu{i}.bin\"\n");
    }
    asm += ".section .hipFatBinSegment,\"aw\",@progbits\n.p2align 3\n";
    for i in 0..spec.tus.len() {
        asm += &format!(".long 0x48495046, 1\n.quad __kpack_gen_fatbin_{i}\n.quad 0\n");
    }
    std::fs::write(
        dir.join("host.bin"),
        code_object(pool, 0, spec.host_size, &mut rng),
    )
    .unwrap();
    asm += ".section .rodata\n.p2align 4\n.globl kpack_gen_host_blob\nkpack_gen_host_blob:\n.incbin \"host.bin\"\n";
    std::fs::write(dir.join("fatbin.S"), asm).unwrap();
    let c = if spec.exe {
        "extern const char kpack_gen_host_blob[];\nint main(void) { return kpack_gen_host_blob[0] == 0x7e; }\n"
    } else {
        "extern const char kpack_gen_host_blob[];\nint kpack_gen_entry(int i) { return kpack_gen_host_blob[i]; }\n"
    };
    std::fs::write(dir.join("host.c"), c).unwrap();
    let dest = out.join(&spec.rel);
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    let cc = linker();
    let mut cmd = Command::new(&cc);
    cmd.current_dir(&dir)
        .args([
            "-O1",
            "-fPIC",
            "-Wl,--build-id=none",
            "host.c",
            "fatbin.S",
            "-o",
        ])
        .arg(&dest);
    if spec.exe {
        cmd.arg("-pie");
    } else {
        cmd.arg("-shared");
    }
    let st = cmd.status().expect("run the C compiler");
    assert!(st.success(), "{cc} failed for {}", spec.rel);
    std::fs::remove_dir_all(&dir).unwrap();
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut out = None;
    let mut size_mb = 1024u64;
    let mut seed = 1u64;
    let mut single_tus: Option<usize> = None;
    let mut single_archs: Option<usize> = None;
    let mut rebuild: Option<usize> = None;
    let mut fixtures = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/bin"));
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--size-mb" => size_mb = it.next().and_then(|v| v.parse().ok()).expect("--size-mb N"),
            "--seed" => seed = it.next().and_then(|v| v.parse().ok()).expect("--seed N"),
            "--fixtures" => fixtures = PathBuf::from(it.next().expect("--fixtures DIR")),
            "--single" => out = Some(PathBuf::from(it.next().expect("--single FILE"))),
            "--rebuild" => {
                rebuild = Some(it.next().and_then(|v| v.parse().ok()).expect("--rebuild N"))
            }
            "--tus" => single_tus = Some(it.next().and_then(|v| v.parse().ok()).expect("--tus N")),
            "--archs" => {
                single_archs = Some(it.next().and_then(|v| v.parse().ok()).expect("--archs N"))
            }
            s if !s.starts_with('-') && out.is_none() => out = Some(PathBuf::from(s)),
            s => panic!(
                "unknown argument {s}; usage: gen_tree OUT --size-mb N [--seed S] [--fixtures DIR]"
            ),
        }
    }
    let out = out.expect(
        "usage: gen_tree OUT --size-mb N [--seed S] | gen_tree --single FILE --tus N --size-mb M",
    );
    let out = std::path::absolute(&out).expect("absolute output path");
    if let Some(n_tus) = single_tus {
        // One shared library of about `size_mb`, `n_tus` bundles over every arch (or
        // the first `--archs N`: one arch and one TU make one code object of 90% of
        // the file).
        let pool = load_pool(&fixtures);
        let arches = &ARCHES[..single_archs.unwrap_or(ARCHES.len()).clamp(1, ARCHES.len())];
        let per = ((size_mb << 20) as usize * 9 / 10) / (n_tus * arches.len());
        let tus = (0..n_tus)
            .map(|i| {
                let comp = if i % 3 == 2 {
                    Compression::Zstd
                } else {
                    Compression::None
                };
                (
                    comp,
                    arches.iter().map(|(a, _)| (a.to_string(), per)).collect(),
                )
            })
            .collect();
        let spec = BinarySpec {
            rel: out.file_name().unwrap().to_string_lossy().into_owned(),
            exe: false,
            tus,
            host_size: (size_mb << 20) as usize / 10,
            seed,
            changed_tu: None,
        };
        let dir = out.parent().unwrap_or(Path::new("."));
        let work = dir.join(".gen-work");
        build_binary(&pool, dir, &spec, &work);
        let _ = std::fs::remove_dir_all(&work);
        return;
    }
    assert!(
        rebuild.is_some() || !out.exists() || std::fs::read_dir(&out).unwrap().next().is_none(),
        "{} exists and is not empty",
        out.display()
    );
    std::fs::create_dir_all(&out).unwrap();
    let work = out.with_extension("gen-work");
    std::fs::create_dir_all(&work).unwrap();
    let pool = load_pool(&fixtures);
    let target = size_mb << 20;
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);

    // ~75% fat binaries, ~12% kernel databases, ~8% large data files, the rest small files.
    let mut specs = Vec::new();
    let mut planned = 0u64;
    let mut n = 0u64;
    while planned < target * 75 / 100 {
        let exe = rng.below(5) == 0;
        let n_tus = [1, 1, 1, 2, 2, 3, 4, 6][rng.below(8) as usize];
        let n_arch = rng.range(4, ARCHES.len() as u64) as usize;
        let mut archs: Vec<&str> = ARCHES.iter().map(|(a, _)| *a).collect();
        for i in (1..archs.len()).rev() {
            archs.swap(i, rng.below(i as u64 + 1) as usize);
        }
        archs.truncate(n_arch);
        archs.sort();
        let per_object = rng.log_range(16 << 10, 3 << 20);
        let tus: Vec<(Compression, Vec<(String, usize)>)> = (0..n_tus)
            .map(|_| {
                let comp = if rng.below(10) < 3 {
                    Compression::Zstd
                } else {
                    Compression::None
                };
                let t = archs
                    .iter()
                    .map(|a| {
                        (
                            a.to_string(),
                            (per_object as f64 * (0.6 + rng.below(80) as f64 / 100.0)) as usize,
                        )
                    })
                    .collect();
                (comp, t)
            })
            .collect();
        let device: usize = tus
            .iter()
            .flat_map(|(_, t)| t.iter().map(|(_, s)| *s))
            .sum();
        let host_size = rng.log_range(64 << 10, (device as u64 / 2).max(128 << 10)) as usize;
        planned += (device + host_size) as u64;
        let rel = if exe {
            format!("bin/app{n:03}")
        } else {
            format!("lib/libgen{n:03}.so.1.{}", rng.below(9))
        };
        specs.push(BinarySpec {
            rel,
            exe,
            tus,
            host_size,
            seed: seed.wrapping_mul(1000).wrapping_add(n),
            changed_tu: None,
        });
        n += 1;
    }
    if let Some(n) = rebuild {
        // The next build: N libraries spread over the tree, one TU each.
        let libs: Vec<usize> = (0..specs.len()).filter(|&i| !specs[i].exe).collect();
        assert!(
            n <= libs.len(),
            "--rebuild {n}: only {} libraries",
            libs.len()
        );
        let picked: Vec<usize> = (0..n).map(|k| libs[k * libs.len() / n]).collect();
        for &i in &picked {
            let s = &mut specs[i];
            s.changed_tu = Some(i % s.tus.len());
            // A hard-linked copy: replace the file, never write through the link.
            let dest = out.join(&s.rel);
            assert!(
                dest.is_file(),
                "{} is not a generated tree (no {})",
                out.display(),
                s.rel
            );
            std::fs::remove_file(&dest).unwrap();
        }
        picked
            .par_iter()
            .for_each(|&i| build_binary(&pool, &out, &specs[i], &work));
        let _ = std::fs::remove_dir_all(&work);
        for &i in &picked {
            let s = &specs[i];
            println!(
                "gen_tree: rebuilt {} (translation unit {} of {})",
                s.rel,
                s.changed_tu.unwrap(),
                s.tus.len()
            );
        }
        return;
    }
    specs
        .par_iter()
        .for_each(|s| build_binary(&pool, &out, s, &work));
    for s in specs.iter().filter(|s| !s.exe) {
        // libgenNNN.so.1.X <- libgenNNN.so.1 <- libgenNNN.so
        let file = Path::new(&s.rel)
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        let base = file.rsplitn(3, '.').nth(2).unwrap().to_string();
        std::os::unix::fs::symlink(&file, out.join("lib").join(format!("{base}.1"))).unwrap();
        std::os::unix::fs::symlink(format!("{base}.1"), out.join("lib").join(base)).unwrap();
    }
    // Kernel databases: per-arch code objects and text data.
    let db = out.join("lib/rocblas/library");
    std::fs::create_dir_all(&db).unwrap();
    let mut db_bytes = 0u64;
    let mut i = 0;
    while db_bytes < target * 12 / 100 {
        let (arch, mach) = ARCHES[i % ARCHES.len()];
        let arch = arch.split(':').next().unwrap();
        let size = rng.log_range(256 << 10, 4 << 20) as usize;
        std::fs::write(
            db.join(format!("Kernels.so-{:03}-{arch}.hsaco", i / ARCHES.len())),
            code_object(&pool, mach, size, &mut rng),
        )
        .unwrap();
        let dat = text_file(&mut rng, size / 8);
        std::fs::write(
            db.join(format!("TensileLibrary_{:03}_{arch}.dat", i / ARCHES.len())),
            &dat,
        )
        .unwrap();
        db_bytes += (size + dat.len()) as u64;
        i += 1;
    }
    // Large data files.
    let data = out.join("share/data");
    std::fs::create_dir_all(&data).unwrap();
    let mut data_bytes = 0u64;
    let mut j = 0;
    while data_bytes < target * 8 / 100 {
        let size = rng.log_range(4 << 20, 32 << 20) as usize;
        // Model weights: code-like bytes behind a non-ELF header.
        let mut blob = b"KPGENDATA\n".to_vec();
        blob.extend(code_object(&pool, 0, size, &mut rng).into_iter().skip(4096));
        std::fs::write(data.join(format!("model{j:02}.bin")), blob).unwrap();
        data_bytes += size as u64;
        j += 1;
    }
    // Many small files: headers and docs.
    let mut small = 0u64;
    let mut k = 0;
    let mut dirs: BTreeMap<u64, PathBuf> = BTreeMap::new();
    while small < target * 5 / 100 && k < 200_000 {
        let d = dirs
            .entry(k / 200)
            .or_insert_with(|| {
                let p = out.join(format!("include/gen{:03}/detail", k / 200));
                std::fs::create_dir_all(&p).unwrap();
                p
            })
            .clone();
        let size = rng.log_range(200, 64 << 10) as usize;
        std::fs::write(
            d.join(format!("header{k:05}.hpp")),
            text_file(&mut rng, size),
        )
        .unwrap();
        small += size as u64;
        k += 1;
    }
    std::fs::create_dir_all(out.join("share/empty")).unwrap();
    let _ = std::fs::remove_dir_all(&work);
    println!(
        "gen_tree: {} binaries, {} kernel DB files, {} data files, {} small files in {}",
        specs.len(),
        2 * i,
        j,
        k,
        out.display()
    );
}
