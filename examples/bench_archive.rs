//! Archive benchmarks (issue: .kpack write/read), printed as JSON lines for
//! bench/run.sh:
//!
//! * write: N kernels (≥ 1000, ≥ 300 MB raw) into a zstd-per-kernel archive with the
//!   library's parallel writer, against `zstd -3 -T2` over the same bytes, same run,
//!   interleaved, median of `--runs`.
//! * random access: open a ≥ 1 GB archive with a cold page cache (`dd iflag=nocache`)
//!   and fetch one random kernel; time and bytes read from storage (/proc/self/io).
//!
//! ```text
//! cargo run --release --example bench_archive -- WORKDIR [--kernels 1200] [--raw-mb 320]
//!     [--big-gb 1.2] [--big-kernel-kb 2048] [--runs 5] [--skip-write]
//! ```

#[path = "common/synth.rs"]
mod synth;

use kpack::kpack::archive::{Archive, ArchiveMeta, ArchiveWriter, Scheme};
use rayon::prelude::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;
use synth::{ARCHES, Rng, code_object, load_pool};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn read_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("read_bytes: ")
                    .and_then(|v| v.trim().parse().ok())
            })
        })
        .unwrap_or(0)
}

fn drop_cache(p: &Path) {
    let _ = Command::new("dd")
        .arg(format!("if={}", p.display()))
        .args(["iflag=nocache", "count=0", "status=none"])
        .status();
}

fn meta() -> ArchiveMeta {
    ArchiveMeta {
        group_name: "bench".into(),
        gfx_arch_family: "all".into(),
        gfx_arches: ARCHES.iter().map(|(a, _)| a.to_string()).collect(),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let work = PathBuf::from(args.first().expect("usage: bench_archive WORKDIR [...]"));
    let opt = |name: &str, default: f64| -> f64 {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let n = opt("--kernels", 1200.0) as usize;
    let raw_mb = opt("--raw-mb", 320.0);
    let big_gb = opt("--big-gb", 1.2);
    let big_kernel_kb = opt("--big-kernel-kb", 2048.0) as usize;
    let runs = opt("--runs", 5.0) as usize;
    std::fs::create_dir_all(&work).unwrap();
    let pool = load_pool(Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/bin"
    )));

    // Kernels: sizes log-uniform, scaled to the raw total.
    let mut rng = Rng(7);
    if args.iter().any(|a| a == "--skip-write") {
        return random_access(&work, &pool, big_gb, big_kernel_kb, runs);
    }
    let raw: Vec<f64> = (0..n)
        .map(|_| rng.log_range(32 << 10, 1 << 20) as f64)
        .collect();
    let scale = raw_mb * (1u64 << 20) as f64 / raw.iter().sum::<f64>();
    let kernels: Vec<(String, String, Vec<u8>)> = raw
        .par_iter()
        .enumerate()
        .map(|(i, &s)| {
            let mut r = Rng(1000 + i as u64);
            let (arch, mach) = ARCHES[i % ARCHES.len()];
            (
                format!("lib/libbench{:04}.so#{}", i / ARCHES.len(), i % 3),
                arch.to_string(),
                code_object(&pool, mach, (s * scale) as usize, &mut r),
            )
        })
        .collect();
    let total: u64 = kernels.iter().map(|k| k.2.len() as u64).sum();
    let all = work.join("kernels.bin");
    std::fs::write(
        &all,
        kernels
            .iter()
            .flat_map(|k| k.2.iter().copied())
            .collect::<Vec<u8>>(),
    )
    .unwrap();

    let ours_path = work.join("bench.kpack");
    let zst_path = work.join("kernels.bin.zst");
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    let mut ours_size = 0;
    for _ in 0..runs {
        let t = Instant::now();
        let w = ArchiveWriter::create(&ours_path, meta(), Scheme::ZstdPerKernel, 3).unwrap();
        kernels.par_iter().for_each(|(k, a, d)| {
            w.add(k, a, d).unwrap();
        });
        ours_size = w.finish().unwrap().file_size;
        ours.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let st = Command::new("zstd")
            .args(["-3", "-T2", "-q", "-f"])
            .arg(&all)
            .arg("-o")
            .arg(&zst_path)
            .status()
            .unwrap();
        assert!(st.success());
        theirs.push(t.elapsed().as_secs_f64());
    }
    let zst_size = std::fs::metadata(&zst_path).unwrap().len();
    println!(
        "{{\"bench\":\"archive_write\",\"kernels\":{n},\"raw_bytes\":{total},\"runs\":{runs},\"ours_s\":{:.3},\"zstd_s\":{:.3},\"ratio\":{:.3},\"ours_bytes\":{ours_size},\"zstd_bytes\":{zst_size}}}",
        median(ours.clone()),
        median(theirs.clone()),
        median(ours) / median(theirs)
    );
    let _ = std::fs::remove_file(&all);
    let _ = std::fs::remove_file(&zst_path);
    let _ = std::fs::remove_file(&ours_path);

    random_access(&work, &pool, big_gb, big_kernel_kb, runs);
}

fn random_access(work: &Path, pool: &synth::Pool, big_gb: f64, big_kernel_kb: usize, runs: usize) {
    // A ≥ 1 GB archive (file size), kernels generated on the fly and streamed.
    let big = work.join("big.kpack");
    let per = big_kernel_kb << 10;
    let count = ((big_gb * (1u64 << 30) as f64) / (per as f64 / 3.2)) as usize;
    let t = Instant::now();
    let w = ArchiveWriter::create(&big, meta(), Scheme::ZstdPerKernel, 1).unwrap();
    (0..count).into_par_iter().for_each(|i| {
        let mut r = Rng(50_000 + i as u64);
        let (arch, mach) = ARCHES[i % ARCHES.len()];
        w.add(
            &format!("lib/libbig{:05}.so#0", i / ARCHES.len()),
            arch,
            &code_object(pool, mach, per, &mut r),
        )
        .unwrap();
    });
    let s = w.finish().unwrap();
    let build_s = t.elapsed().as_secs_f64();
    let mut rng = Rng(99);
    let mut measure = |cold: bool| {
        let (mut open_ms, mut fetch_ms, mut reads) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..runs.max(5) {
            if cold {
                drop_cache(&big);
            }
            let before = read_bytes();
            let t = Instant::now();
            let a = Archive::open(&big).unwrap();
            open_ms.push(t.elapsed().as_secs_f64() * 1000.0);
            let e = &a.index.kernels[rng.below(a.index.kernels.len() as u64) as usize];
            let t = Instant::now();
            let k = a.kernel(e).unwrap();
            fetch_ms.push(t.elapsed().as_secs_f64() * 1000.0);
            assert_eq!(k.len(), per);
            reads.push((read_bytes() - before) as f64);
        }
        (median(open_ms), median(fetch_ms), median(reads) as u64)
    };
    let (cold_open, cold_fetch, cold_read) = measure(true);
    let (warm_open, warm_fetch, _) = measure(false);
    println!(
        "{{\"bench\":\"archive_random_access\",\"kernel_kb\":{big_kernel_kb},\"archive_bytes\":{},\"kernels\":{},\"build_s\":{build_s:.2},\"cold_open_ms\":{cold_open:.3},\"cold_fetch_ms\":{cold_fetch:.3},\"cold_bytes_read\":{cold_read},\"warm_open_ms\":{warm_open:.3},\"warm_fetch_ms\":{warm_fetch:.3}}}",
        s.file_size, s.code_objects,
    );
    if std::env::var_os("KEEP_BIG").is_none() {
        let _ = std::fs::remove_file(&big);
    }
}
