"""Render bench/work/results.jsonl as bench/RESULTS.md (called by bench/run.sh)."""
import json, os, platform, subprocess, sys


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"


def size(n):
    for unit in ["B", "KiB", "MiB", "GiB"]:
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024


rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
cpu = sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2").strip()
print("# Benchmark results\n")
print("Regenerate with `bench/run.sh` (see the header of that script). Every figure is")
print("a median of at least 5 runs next to a reference measured in the same run.\n")
mem = sh("free -g | awk '/Mem:/{print $2}'")
rustc = sh("rustc --version")
print(f"Machine: {os.cpu_count()} cores ({cpu}), {mem} GiB RAM, Linux {platform.release()}, {rustc}.")
print()
print("| benchmark | what | ours | reference | ratio (ours/ref) | goal | peak RSS |")
print("|---|---|---|---|---|---|---|")
for r in rows:
    b = r["bench"]
    if b == "scan":
        ratio = r["ref_s"] / r["ours_s"]
        print(f"| scan | {size(r['tree_bytes'])} tree, {r['files']} files, {r['fat_binaries']} fat binaries "
              f"| {r['ours_s']*1000:.0f} ms (-j1: {float(r['ours_j1_s'])*1000:.0f} ms) "
              f"| {r['ref_s']*1000:.0f} ms (objcopy + clang-offload-bundler -list per fat binary) "
              f"| 1/{ratio:.0f} ({ratio:.0f}× faster) | ≥ 20× faster | {size(int(r['peak_rss_kb'])*1024)} |")
    elif b == "scan:deep":
        print(f"| scan --deep | the same tree, every byte of every file searched for embedded device code "
              f"| {r['ours_s']*1000:.0f} ms | {r['ref_s']*1000:.0f} ms (cat of every file) "
              f"| {r['ours_s']/r['ref_s']:.2f} | ≤ 1.2 | {size(int(r['peak_rss_kb'])*1024)} |")
    elif b == "rewrite":
        print(f"| rewrite | {size(r['input_bytes'])} shared library, {r['bundles']} bundles → {size(r['output_bytes'])} host-only "
              f"| {r['ours_s']*1000:.0f} ms | {r['ref_s']*1000:.0f} ms (cp of the same file) | {r['ours_s']/r['ref_s']:.2f} | one read, one write | {size(int(r['peak_rss_kb'])*1024)} |")
    elif b == "rewrite:aarch64":
        print(f"| rewrite (aarch64) | the same {size(r['input_bytes'])} library linked for aarch64 (64 KiB pages), {r['bundles']} bundles → {size(r['output_bytes'])} host-only "
              f"| {r['ours_s']*1000:.0f} ms | {r['ref_s']*1000:.0f} ms (cp of the same file) | {r['ours_s']/r['ref_s']:.2f} | as on x86-64 | {size(int(r['peak_rss_kb'])*1024)} |")
    elif b == "pack":
        print(f"| pack | {size(r['tree_bytes'])} tree, {size(r['device_bytes'])} of code objects → {size(r['out_bytes'])} "
              f"| {r['ours_s']:.2f} s | {r['ref_s']:.2f} s (cp -a of the tree + zstd -3 -T2 over the device bytes) "
              f"| {r['ours_s']/r['ref_s']:.2f} | ≤ 1.2; RSS ≤ 300 MB, flat when the tree doubles "
              f"| {size(int(r['peak_rss_kb'])*1024)} ({size(int(r['big_peak_rss_kb'])*1024)} on a {size(r['big_tree_bytes'])} tree) |")
    elif b == "verify":
        print(f"| verify | a packed {size(r['tree_bytes'])} tree ({r['frames']} frames, {size(r['frame_bytes'])} of code objects), every loader generation on every device ISA that accepts each packed target "
              f"| {r['ours_s']:.2f} s | {r['ref_s']:.2f} s (zstd -d of the same frames, once) "
              f"| {r['ours_s']/r['ref_s']:.2f} | ≤ 1.5 | {size(int(r['peak_rss_kb'])*1024)} |")
    elif b == "split":
        print(f"| split | {size(r['tree_bytes'])} artifact (one prefix), {size(r['device_bytes'])} of code objects → {size(r['out_bytes'])} "
              f"| {r['ours_s']:.2f} s | {r['ref_s']:.2f} s (cp -a of the tree + zstd -3 -T2 over the device bytes) "
              f"| {r['ours_s']/r['ref_s']:.2f} | ≤ 1.2; RSS ≤ 300 MB, flat when the tree doubles "
              f"| {size(int(r['peak_rss_kb'])*1024)} ({size(int(r['big_peak_rss_kb'])*1024)} on a {size(r['big_tree_bytes'])} tree) |")
    elif b == "wheel":
        print(f"| wheel split | {size(r['wheel_bytes'])} wheel (Python zipfile, deflate 6) of a generated tree, {size(r['device_bytes'])} of code objects → {r['wheels']} wheels, {size(r['out_bytes'])} "
              f"| {r['ours_s']:.2f} s | {r['ref_s']:.2f} s (unzip -q to tmpfs + zstd -3 -T2 over the device bytes + zip -q -1 of the unpacked tree) "
              f"| {r['ours_s']/r['ref_s']:.2f} | ≤ 1.2; RSS ≤ 300 MB, flat when the wheel doubles "
              f"| {size(int(r['peak_rss_kb'])*1024)} ({size(int(r['big_peak_rss_kb'])*1024)} on a {size(r['big_wheel_bytes'])} wheel) |")
    elif b == "combine":
        print(f"| combine | two shards of the split above, {size(r['in_bytes'])} in all (every generic file compared) "
              f"| {r['ours_s']:.2f} s | {r['ref_s']:.2f} s (cp -a of the shards) "
              f"| {r['ours_s']/r['ref_s']:.2f} | ≤ 1.2 | {size(int(r['peak_rss_kb'])*1024)} |")
    elif b == "kernels":
        ref = r['zstd_s'] + r['cat_s']
        print(f"| kernels | {size(r['lib_bytes'])} library, {r['code_objects']} code objects ({r['ccob_bundles']} of 12 bundles CCOB, {size(r['ccob_bytes'])} compressed), {r['kernels']} kernels, `--json` "
              f"| {r['ours_s']*1000:.0f} ms | {r['zstd_s']*1000:.0f} ms zstd -d of the CCOB payloads + {r['cat_s']*1000:.0f} ms cat of the file "
              f"| {r['ours_s']/ref:.2f} | ≤ 1.5 | {size(int(r['peak_rss_kb'])*1024)} |")
    elif b == "find_kernel":
        print(f"| find-kernel | one name over a {size(r['tree_bytes'])} generated tree ({r['hits']} hits) "
              f"| {r['ours_s']:.2f} s | {r['ref_s']:.2f} s (grep -rlF of the name over every byte) "
              f"| {r['ours_s']/r['ref_s']:.2f} | ≤ 2 s | |")
    elif b == "diff":
        print(f"| diff | a {size(r['a_bytes'])} generated tree against its next build (5 libraries rebuilt, one translation unit each), every table "
              f"| {r['ours_s']:.2f} s | {r['ref_s']:.2f} s (scan --json of both, one after the other) "
              f"| {r['ours_s']/r['ref_s']:.2f} | ≤ 1.3; RSS flat in tree size | {size(int(r['peak_rss_kb'])*1024)}"
              + (f" ({size(int(r['peak_rss_double_kb'])*1024)} on a {size(r['double_bytes'])} tree)" if 'peak_rss_double_kb' in r else "") + " |")
        if 'ours_by_target_s' in r:
            print(f"| diff --by target | the same, without the kernel table (no code object decompressed) "
                  f"| {r['ours_by_target_s']:.2f} s | {r['ref_s']:.2f} s (as above) "
                  f"| {r['ours_by_target_s']/r['ref_s']:.2f} | ≤ 1.3 | |")
        if 'ours_replaced_s' in r:
            print(f"| diff, next build (worst case) | the same tree, 5 libraries whose device code changed entirely (every code object of theirs decompressed) "
                  f"| {r['ours_replaced_s']:.2f} s | {r['ref_replaced_s']:.2f} s (scan --json of both) "
                  f"| {r['ours_replaced_s']/r['ref_replaced_s']:.2f} | | |")
        if 'ours_unrelated_s' in r:
            print(f"| diff, unrelated trees | the same tree against another of {size(r['b_bytes'])} (every binary differs: every kernel read) "
                  f"| {r['ours_unrelated_s']:.2f} s | {r['ref_unrelated_s']:.2f} s (scan --json of both) "
                  f"| {r['ours_unrelated_s']/r['ref_unrelated_s']:.2f} | (≤ 1.3 is for builds of one tree) | {size(int(r['peak_rss_unrelated_kb'])*1024)} |")
    elif b == "trace":
        print(f"| trace parse + analysis | {r['lines']:,} lines (phc format), one core "
              f"| {r['ours_s']*1000:.0f} ms" + (f" (lines in completion order: {r['ours_end_order_s']*1000:.0f} ms)" if 'ours_end_order_s' in r else "")
              + f" | {r['ref_s']*1000:.0f} ms (awk summing the durations) | {r['ours_s']/r['ref_s']:.2f} | < 1 s | {size(int(r['peak_rss_kb'])*1024)} |")
    elif b == "archive_write":
        print(f"| archive write | {r['kernels']} kernels, {size(r['raw_bytes'])} raw, zstd-per-kernel level 3 "
              f"| {r['ours_s']:.2f} s → {size(r['ours_bytes'])} | {r['zstd_s']:.2f} s → {size(r['zstd_bytes'])} (zstd -3 -T2, one stream) "
              f"| {r['ratio']:.2f} | ≤ 1.3 | |")
    elif b == "archive_random_access":
        print(f"| archive random access | {size(r['archive_bytes'])} archive, {r['kernels']} frames of {r['kernel_kb']} KiB raw "
              f"| open {r['warm_open_ms']:.1f} ms + fetch {r['warm_fetch_ms']:.1f} ms warm; cold: open {r['cold_open_ms']:.0f} ms + fetch {r['cold_fetch_ms']:.1f} ms, "
              f"{size(r['cold_bytes_read'])} read from storage | | | < 5 ms, without reading the rest | |")
    elif b == "phc":
        print(f"| phc | make -j2 of {r['files']} HIP files of uneven size for {r['archs']} archs (hipcc, clang 15) "
              f"| {r['ours_s']:.1f} s through phc | {r['ref_s']:.1f} s plain hipcc | {r['ours_s']/r['ref_s']:.2f} "
              f"| < 1 (objects identical: {'yes' if r['identical'] else 'NO'}; peak {r['peak']} jobs) | |")
    elif b == "phc1":
        print(f"| phc, one file | the largest file alone for {r['archs']} archs (no make, no jobserver) "
              f"| {r['ours_s']:.1f} s through phc | {r['ref_s']:.1f} s plain hipcc | {r['ours_s']/r['ref_s']:.2f} "
              f"| < 1 (2 cores: at best 0.5 of the device part) | |")
        if 'ours_rdc_s' in r:
            print(f"| phc, one file, -fgpu-rdc | the same file as relocatable device code "
                  f"| {r['ours_rdc_s']:.1f} s through phc | {r['ref_rdc_s']:.1f} s plain hipcc | {r['ours_rdc_s']/r['ref_rdc_s']:.2f} "
                  f"| < 1 | |")
    elif b == "cancel":
        print(f"| cancel | Ctrl-C during `pack --level max` of a {size(r['tree_bytes'])} generated tree, 2 s into packing "
              f"| {r['median_s']:.2f} s to exit (worst {r['max_s']:.2f} s of {r['runs']}) | | "
              f"| < 1 s; exit 130, nothing left: {'yes' if r['clean'] else 'NO'} | |")
    elif b == "tui_cancel":
        print(f"| TUI cancel | Esc during a TUI pack at level max of a {size(r['tree_bytes'])} generated tree, 2 s into the compression (tmux, polled every 10 ms) "
              f"| {r['median_s']:.2f} s until the pane says cancelled (worst {r['max_s']:.2f} s of {r['runs']}) | | | < 1 s; nothing left: {'yes' if r['clean'] else 'NO'} | |")
    elif b == "tui_startup":
        print(f"| TUI startup | explorer on a {r['files']:,}-file tree, warm cache (tmux, polled every 10 ms) "
              f"| tree shown after {r['first_ms']:.0f} ms, complete after {r['full_ms']:.0f} ms | | | usable < 100 ms | |")
    elif b == "tui":
        unit = "job" if r['view'].startswith('timeline') else "file"
        print(f"| TUI frame | {r['view']} at {r['size']} on a {r['files']:,}-{unit} model "
              f"| {r['ours_ms']:.2f} ms | | | < 10 ms | |")

scale = [r for r in rows if r["bench"] == "scale"]
if scale:
    print()
    print("## Scale (#32)")
    print()
    print("`bench/run.sh scale`: each command on a 1 GiB and an 8 GiB generated tree in one run "
          + (f"(median of {scale[0]['run']['runs']} runs" if scale[0]['run']['runs'] > 1 else "(one run each, `SCALE_RUNS=1`")
          + ("; the largest peak RSS of the process over the runs)" if scale[0]['run']['runs'] > 1 else "; peak RSS of the process)")
          + ". Goals: peak RSS ≤ 200 MiB on both, "
          "8 GiB RSS ≤ 1.2 × 1 GiB, seconds per GiB at 8 GiB ≤ 1.1 × at 1 GiB.")
    print()
    trees = sorted({r["tree_mb"] for r in scale})
    head = " | ".join(f"{mb // 1024} GiB: s (s/GiB) | RSS" for mb in trees)
    print(f"| command | {head} | RSS 8/1 | s/GiB 8/1 |")
    print("|---|" + "---|---|" * len(trees) + "---|---|")
    for cmd in ["limit", "scan", "pack", "verify", "kernels", "diff", "split", "combine", "wheel split"]:
        by = {r["tree_mb"]: r for r in scale if r["cmd"] == cmd}
        if not by:
            continue
        cells, per, mem = [], {}, {}
        for mb in trees:
            r = by.get(mb)
            if not r:
                cells.append(" | ")
                continue
            if r["run"].get("exit", [0]) != [0]:
                # A failed run measured nothing: no figure, no ratio.
                why = r["run"].get("error", "").replace("|", "/")
                cells.append(f"failed (exit {r['run']['exit']}{': ' + why if why else ''}) | ")
                continue
            gib = r["tree_bytes"] / (1 << 30)
            per[mb] = r["run"]["s"] / gib
            mem[mb] = r["run"]["rss_kb"]
            cells.append(f"{r['run']['s']:.2f} ({per[mb]:.2f}) | {size(mem[mb] * 1024)}")
        lo, hi = trees[0], trees[-1]
        rr = f"{mem[hi] / mem[lo]:.2f}" if lo in mem and hi in mem and cmd != "limit" else ""
        tr = f"{per[hi] / per[lo]:.2f}" if lo in per and hi in per else ""
        name = "limit: cp -a + zstd -3 -T2" if cmd == "limit" else cmd
        print(f"| {name} | {' | '.join(cells)} | {rr} | {tr} |")
    for r in rows:
        if r["bench"] == "scale_cancel":
            print()
            print(f"Ctrl-C during `pack --level max` of the {size(r['tree_bytes'])} tree, 2 s into packing: "
                  f"{r['median_s']:.2f} s to exit (worst {r['max_s']:.2f} s of {r['runs']}); exit 130 and nothing left: "
                  f"{'yes' if r['clean'] else 'NO'}.")
print()
print("Notes:")
print("- The zstd-per-kernel layout has no frame offset table: opening an archive reads one")
print("  4-byte length per frame (cold: one page per frame). Fetching then reads only that frame.")
print("- `fetch` includes decompressing the kernel, which dominates for large kernels.")
