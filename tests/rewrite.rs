//! The host-only rewrite on real binaries, judged by the real tools: readelf,
//! eu-elflint, the dynamic loader, and programs that inspect their own wrappers.

mod common;

use common::*;
use kpack::elf::rewrite::{self, RewriteError};
use kpack::kpack::Marker;
use std::path::{Path, PathBuf};
use std::process::Command;

fn marker(name: &str) -> Marker {
    Marker {
        kpack_search_paths: vec![
            "../.kpack/demo_gfx90X.kpack".into(),
            ".kpack/demo_@GFXARCH@.kpack".into(),
        ],
        kernel_name: name.into(),
    }
}

const FAT: &[&str] = &[
    "libvadd.so",
    "app_pie",
    "app_nopie",
    "librdc.so",
    "libzkern.so",
];

fn rewrite_to(src: &Path, dir: &Path) -> (PathBuf, rewrite::RewritePlan) {
    let out = dir.join(src.file_name().unwrap());
    let plan = rewrite::apply_rewrite(
        src,
        &out,
        &marker(&format!(
            "lib/{}",
            src.file_name().unwrap().to_str().unwrap()
        )),
    )
    .unwrap();
    (out, plan)
}

/// Lines of a tool's output that report a problem.
fn problems(tool: &str, args: &[&str], file: &Path) -> Vec<String> {
    let o = Command::new(tool).args(args).arg(file).output().unwrap();
    let text = format!("{}{}", stdout(&o), stderr(&o));
    let mut v: Vec<String> = text
        .lines()
        .filter(|l| {
            let l = l.to_lowercase();
            tool == "eu-elflint"
                || [
                    "warning",
                    "error",
                    "corrupt",
                    "invalid",
                    "truncated",
                    "out of range",
                    "overlap",
                ]
                .iter()
                .any(|w| l.contains(w))
        })
        .map(|l| l.replace(file.to_str().unwrap(), "FILE"))
        // Section numbers differ: the sections moved beside the marker are numbered
        // last (crates/kpack/src/elf/rewrite/room.rs).
        .map(|l| section_number().replace_all(&l, "[N]").into_owned())
        .collect();
    v.sort();
    v
}

fn section_number() -> regex::Regex {
    regex::Regex::new(r"\[\s*\d+\]").unwrap()
}

#[test]
fn real_binaries_rewrite_cleanly_for_readelf_and_elflint() {
    let tmp = tempfile::tempdir().unwrap();
    for name in FAT {
        let src = fixtures().join(name);
        let before = std::fs::read(&src).unwrap();
        let (out, plan) = rewrite_to(&src, tmp.path());
        assert_eq!(std::fs::read(&src).unwrap(), before, "input untouched");
        assert!(plan.bytes_removed >= 4096, "{name}: {}", plan.bytes_removed);
        // Mode preserved.
        let mode = |p: &Path| {
            std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(p).unwrap().permissions())
        };
        assert_eq!(mode(&out), mode(&src), "{name}");
        for (checker, args) in [
            ("readelf", &["-lSW"][..]),
            ("eu-elflint", &["--gnu-ld"][..]),
        ] {
            if tool(checker).is_none() {
                continue;
            }
            let old = problems(checker, args, &src);
            let new: Vec<String> = problems(checker, args, &out)
                .into_iter()
                .filter(|l| !old.contains(l))
                .collect();
            assert!(
                new.is_empty(),
                "{name}: {checker} reports new problems: {new:?}"
            );
        }
        // Our scan sees a host-only binary with the marker, and no device bytes.
        let r =
            kpack::scan::inspect_file(&out, name, std::fs::metadata(&out).unwrap().len(), 0o755);
        assert_eq!(r.kind, kpack::scan::FileKind::HostOnlyBinary, "{name}");
        assert_eq!(
            r.marker.as_ref().unwrap().kernel_name,
            format!("lib/{name}")
        );
        assert!(r.problems.is_empty(), "{name}: {:?}", r.problems);
        let co: Vec<u64> = r
            .wrappers
            .iter()
            .map(|w| w.reserved & 0xffff_ffff)
            .collect();
        let expect: Vec<u64> = if *name == "librdc.so" {
            vec![0, 0]
        } else {
            (0..plan.bundles as u64).collect()
        };
        assert_eq!(
            co, expect,
            "{name}: co_index = the bundle each wrapper pointed to"
        );
        // Executables whose table moved: the kernel's AT_PHDR (load address +
        // e_phoff) is where the table is mapped, as EL8 kernels need
        // (workflows.md §5): p_vaddr - p_offset of its segment is the first
        // segment's, 0 for PIE.
        let data = std::fs::read(&out).unwrap();
        let lay = kpack::elf::rewrite::parse_layout(&data).unwrap();
        let interp = lay.segments.iter().any(|p| p.p_type == 3);
        if interp && plan.phdr_relocated {
            let first = lay.segments.iter().find(|p| p.p_type == 1).unwrap();
            let bias = first.p_vaddr - first.p_offset;
            let c = lay
                .segments
                .iter()
                .find(|p| p.p_type == 1 && p.p_offset == lay.e_phoff)
                .unwrap_or_else(|| panic!("{name}: the table has a segment of its own"));
            assert_eq!(c.p_vaddr - c.p_offset, bias, "{name}");
            let phdr = lay.segments.iter().find(|p| p.p_type == 6).unwrap();
            assert_eq!(
                (phdr.p_offset, phdr.p_vaddr),
                (c.p_offset, c.p_vaddr),
                "{name}"
            );
        }
    }
}

#[test]
fn rewritten_executables_run_and_libraries_load() {
    let tmp = tempfile::tempdir().unwrap();
    for name in ["app_pie", "app_nopie"] {
        let (out, _) = rewrite_to(&fixtures().join(name), tmp.path());
        let o = Command::new(&out).output().unwrap();
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        assert_eq!(stdout(&o), "kpack fixture app: ok\n");
    }
    let dl = tmp.path().join("dl");
    let src = tmp.path().join("dl.c");
    std::fs::write(
        &src,
        "#include <dlfcn.h>\n#include <stdio.h>\nint main(int c, char **v) { for (int i = 1; i < c; i++) if (!dlopen(v[i], RTLD_NOW)) { printf(\"%s\\n\", dlerror()); return 1; } return 0; }\n",
    )
    .unwrap();
    assert!(
        Command::new("cc")
            .arg(&src)
            .arg("-o")
            .arg(&dl)
            .arg("-ldl")
            .status()
            .unwrap()
            .success()
    );
    let libs: Vec<PathBuf> = ["libvadd.so", "librdc.so", "libzkern.so"]
        .iter()
        .map(|n| rewrite_to(&fixtures().join(n), tmp.path()).0)
        .collect();
    let o = Command::new(&dl).args(&libs).output().unwrap();
    assert!(o.status.success(), "dlopen: {}", stdout(&o));
}

/// A C program with its own .hip_fatbin (real bundle layout, `pages` pages per
/// bundle) and one wrapper per bundle; it prints, at run time, each wrapper's magic,
/// reserved field and the first bytes its pointer reaches.
fn self_inspecting_program(dir: &Path, pie: bool, bundle_bytes: &[usize]) -> PathBuf {
    let mut asm = String::from(
        ".section .note.GNU-stack,\"\",@progbits\n.section .hip_fatbin,\"a\",@progbits\n",
    );
    for (i, &n) in bundle_bytes.iter().enumerate() {
        let payload = vec![0x5a ^ i as u8; n.saturating_sub(4096 + 64)];
        let b = kpack::bundle::write_plain(
            &[
                ("host-x86_64-unknown-linux-gnu-", b""),
                ("hipv4-amdgcn-amd-amdhsa--gfx900", &payload),
            ],
            4096,
        );
        let mut b = b;
        b.resize(n.max(b.len()), 0);
        std::fs::write(dir.join(format!("b{i}.bin")), &b).unwrap();
        asm += &format!(".p2align 12\n.globl fatbin{i}\nfatbin{i}:\n.incbin \"b{i}.bin\"\n");
    }
    std::fs::write(dir.join("fatbin.S"), asm).unwrap();
    let n = bundle_bytes.len();
    let decls: String = (0..n)
        .map(|i| format!("extern const char fatbin{i}[];\n"))
        .collect();
    let inits: String = (0..n)
        .map(|i| format!("{{0x48495046u, 1, fatbin{i}, 0}},"))
        .collect();
    let c = format!(
        r#"#include <stdio.h>
{decls}
struct wrapper {{ unsigned magic, version; const void *ptr; unsigned long long reserved; }};
__attribute__((section(".hipFatBinSegment"), used, aligned(8))) struct wrapper wrappers[{n}] = {{ {inits} }};
int main(void) {{
  volatile struct wrapper *w = wrappers;
  for (int i = 0; i < {n}; i++) {{
    const unsigned char *p = (const unsigned char *)w[i].ptr;
    printf("%d %08x %llu ", i, w[i].magic, w[i].reserved);
    for (int k = 0; k < 24 && p; k++) printf("%02x", p[k]);
    printf("\n");
  }}
  return 0;
}}
"#
    );
    std::fs::write(dir.join("main.c"), c).unwrap();
    let exe = dir.join(if pie { "selfpie" } else { "selfnopie" });
    let mut cmd = Command::new("cc");
    cmd.current_dir(dir)
        .args(["-O1", "main.c", "fatbin.S", "-o"])
        .arg(&exe);
    cmd.arg(if pie { "-pie" } else { "-no-pie" });
    if pie {
        cmd.arg("-fPIE");
    }
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "cc: {}", stderr(&o));
    exe
}

fn run_lines(exe: &Path) -> Vec<Vec<String>> {
    // A file just written may be briefly "busy" while a concurrently forked test
    // process still holds the writer's descriptor (until its exec closes it).
    let mut tries = 0;
    let o = loop {
        match Command::new(exe).output() {
            Err(e) if e.raw_os_error() == Some(26) && tries < 50 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            r => break r.unwrap(),
        }
    };
    assert!(o.status.success(), "{}: {}", exe.display(), stderr(&o));
    stdout(&o)
        .lines()
        .map(|l| l.split(' ').map(str::to_string).collect())
        .collect()
}

#[test]
fn wrappers_point_at_the_marker_at_run_time_pie_and_non_pie() {
    for pie in [true, false] {
        let tmp = tempfile::tempdir().unwrap();
        // Three bundles, one ending exactly on a page boundary.
        let exe = self_inspecting_program(tmp.path(), pie, &[3 * 4096 + 100, 2 * 4096, 5000]);
        let before = run_lines(&exe);
        assert_eq!(before[0][1], "48495046");
        let m = marker("bin/self");
        let out = tmp.path().join("rewritten");
        let plan = rewrite::apply_rewrite(&exe, &out, &m).unwrap();
        assert!(plan.bytes_removed >= 4096);
        let after = run_lines(&out);
        let enc: String = m.encode()[..24]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        for (i, l) in after.iter().enumerate() {
            assert_eq!(l[1], "4b504948", "pie={pie} wrapper {i}: magic HIPK");
            assert_eq!(
                l[2],
                i.to_string(),
                "pie={pie} wrapper {i}: reserved = bundle index"
            );
            assert_eq!(
                l[3], enc,
                "pie={pie} wrapper {i}: pointer dereferences to the marker"
            );
        }
        assert_eq!(
            plan.wrappers.iter().map(|w| w.via).collect::<Vec<_>>()[0],
            if pie {
                kpack::elf::rewrite::PointerVia::RelaRelative
            } else {
                kpack::elf::rewrite::PointerVia::InPlace
            }
        );
        if tool("eu-elflint").is_some() {
            let old = problems("eu-elflint", &["--gnu-ld"], &exe);
            let new: Vec<String> = problems("eu-elflint", &["--gnu-ld"], &out)
                .into_iter()
                .filter(|l| !old.contains(l))
                .collect();
            assert!(new.is_empty(), "pie={pie}: {new:?}");
        }
    }
}

#[test]
fn section_ending_on_a_page_boundary_keeps_one_page() {
    let tmp = tempfile::tempdir().unwrap();
    // One bundle of exactly two pages, starting page-aligned: ends on a boundary.
    let exe = self_inspecting_program(tmp.path(), true, &[2 * 4096]);
    let data = std::fs::read(&exe).unwrap();
    let r = rewrite::plan_rewrite(&data, &marker("x")).unwrap();
    assert_eq!(r.plan.fatbin_size, 2 * 4096);
    assert_eq!(r.plan.bytes_removed, 4096, "one of the two pages is kept");
    let out = tmp.path().join("out");
    std::fs::write(&out, &r.bytes).unwrap();
    std::fs::set_permissions(&out, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    assert_eq!(run_lines(&out)[0][1], "4b504948");
    if tool("eu-elflint").is_some() {
        let new: Vec<String> = problems("eu-elflint", &["--gnu-ld"], &out)
            .into_iter()
            .filter(|l| !problems("eu-elflint", &["--gnu-ld"], &exe).contains(l))
            .collect();
        assert!(new.is_empty(), "{new:?}");
    }
}

/// A program header that says the image reaches 184 GiB past its file (one bad
/// `p_memsz`) asks an executable's moved table for that much zero padding: the
/// rewrite refuses with the reason instead of trying to build it (it aborted on the
/// allocation, found by a mutation run).
#[test]
fn segments_reaching_far_past_the_file_are_refused_before_any_padding() {
    let mut data = std::fs::read(fixtures().join("app_nopie")).unwrap();
    let rd = |d: &[u8], o: usize, n: usize| {
        d[o..o + n]
            .iter()
            .rev()
            .fold(0u64, |v, &b| (v << 8) | u64::from(b))
    };
    let (phoff, phnum) = (rd(&data, 32, 8) as usize, rd(&data, 56, 2) as usize);
    let last_load = (0..phnum)
        .map(|i| phoff + i * 56)
        .rfind(|&h| rd(&data, h, 4) == 1)
        .unwrap();
    let memsz = rd(&data, last_load + 40, 8) + 0x2e_0000_0000;
    data[last_load + 40..last_load + 48].copy_from_slice(&memsz.to_le_bytes());
    let got = rewrite::plan_rewrite_with(&data, &marker("x"), rewrite::PhdrLayout::Reference);
    match got {
        Err(RewriteError::Refused(why)) => assert!(why.contains("zero padding"), "{why}"),
        Err(e) => panic!("refused for another reason: {e}"),
        Ok(r) => panic!("rewritten to {} bytes", r.bytes.len()),
    }
}

#[test]
fn refusals_are_clear_and_leave_nothing_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let lib = std::fs::read(fixtures().join("libvadd.so")).unwrap();
    let m = marker("lib/x");
    let check = |bytes: &[u8], want: &str| {
        let e = rewrite::plan_rewrite(bytes, &m)
            .err()
            .unwrap_or_else(|| panic!("accepted; wanted {want}"));
        assert!(e.to_string().contains(want), "{e} (wanted {want:?})");
    };
    check(b"not an elf", "not an ELF");
    check(&lib[..40], "truncated");
    check(&lib[..lib.len() / 2], "passes the end");
    let mut b = lib.clone();
    b[4] = 1;
    check(&b, "32-bit");
    let mut b = lib.clone();
    b[5] = 2;
    check(&b, "big-endian");
    // Read big-endian, the x86-64 number 0x3e is 0x3e00.
    check(&b, "big-endian ELF (machine 15872): only little-endian");
    let mut b = lib.clone();
    b[18] = 243; // RISC-V
    check(
        &b,
        "unsupported: RISC-V (machine 243) host code (only x86-64, aarch64, ppc64le",
    );
    // An x86-64 library that says aarch64: its relocations are read as aarch64's, and
    // R_X86_64_RELATIVE (8) is not one the wrapper may be set by there.
    let mut b = lib.clone();
    b[18] = 183;
    check(&b, "pointer relocated by unsupported type 8");
    check(
        &std::fs::read(fixtures().join("vadd.o")).unwrap(),
        "relocatable object",
    );
    // Wrapper section size not a multiple of 24, unknown magic, pointer without relocation.
    let lay = rewrite::parse_layout(&lib).unwrap();
    let seg_i = lay
        .sections
        .iter()
        .position(|s| s.name == ".hipFatBinSegment")
        .unwrap();
    let sh = (lay.e_shoff + seg_i as u64 * 64) as usize;
    let mut b = lib.clone();
    b[sh + 32] = 25;
    check(&b, "not a multiple of 24");
    let w = lay.sections[seg_i].sh_offset as usize;
    let mut b = lib.clone();
    b[w..w + 4].copy_from_slice(b"ABCD");
    check(&b, "unknown magic");
    let slot = (lay.sections[seg_i].sh_addr + 8).to_le_bytes();
    let mut b = lib.clone();
    let at = b.windows(8).position(|x| x == slot).unwrap();
    b[at] ^= 0x40;
    check(&b, "has no relocation");
    // Wrapper pointing inside a bundle, not at its start.
    let rela_addend = at + 16;
    let mut b = lib.clone();
    let v = u64::from_le_bytes(b[rela_addend..rela_addend + 8].try_into().unwrap()) + 16;
    b[rela_addend..rela_addend + 8].copy_from_slice(&v.to_le_bytes());
    check(&b, "not the start of a bundle");
    // Not fat, already host-only.
    let o = kpack(&[
        "rewrite",
        fixtures().join("hostonly").to_str().unwrap(),
        "-o",
        tmp.path().join("h").to_str().unwrap(),
        "--search-path",
        "x",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("already host-only"), "{}", stderr(&o));
    let (once, _) = rewrite_to(&fixtures().join("libvadd.so"), tmp.path());
    let out = tmp.path().join("twice.so");
    let o = kpack(&[
        "rewrite",
        once.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--search-path",
        "x",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("already host-only"));
    assert!(!out.exists(), "no output file on refusal");
    let plain = tmp.path().join("plain");
    assert!(
        Command::new("cc")
            .arg("-x")
            .arg("c")
            .arg("-")
            .arg("-o")
            .arg(&plain)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write;
                c.stdin
                    .take()
                    .unwrap()
                    .write_all(b"int main(void){return 0;}")?;
                c.wait()
            })
            .unwrap()
            .success()
    );
    assert!(matches!(
        rewrite::plan_rewrite(&std::fs::read(&plain).unwrap(), &m),
        Err(RewriteError::NotFatBinary)
    ));
    let o = kpack(&[
        "rewrite",
        plain.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--search-path",
        "x",
    ]);
    assert!(stderr(&o).contains("not a fat binary"), "{}", stderr(&o));
    // Nothing but the outputs we asked for.
    let names: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| !n.starts_with(".kpack-tmp")),
        "{names:?}"
    );
}

#[test]
fn preview_prints_the_plan_without_writing() {
    let src = fixtures().join("app_pie");
    let o = kpack(&["preview", src.to_str().unwrap(), "--no-tui"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let t = stdout(&o);
    for s in [
        "program headers before",
        "program headers after",
        "wrapper 1: HIPF -> HIPK",
        "co_index 1",
        ".rocm_kpack_ref",
        ".hip_fatbin",
        "NOBITS",
    ] {
        assert!(t.contains(s), "{s:?} missing:\n{t}");
    }
    let o = kpack(&["preview", src.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["bytes_removed"].as_u64().unwrap() >= 4096);
    assert_eq!(v["wrappers"].as_array().unwrap().len(), 2);
    assert_eq!(v["marker"]["kernel_name"], "app_pie");
}
