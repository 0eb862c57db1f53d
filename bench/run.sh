#!/usr/bin/env bash
# Regenerate bench/RESULTS.md: every figure next to a reference measured in the same
# run (medians of >= 5 runs, peak RSS, machine description).
#
#   bench/run.sh                 all sections
#   bench/run.sh scan archive    only these sections
#
# Needs: the README's setup, hyperfine, zstd, clang-offload-bundler-19, objcopy, and
# for the tuistart and phc sections tmux, hipcc and make
# (apt-get install hyperfine zstd clang-19 binutils tmux hipcc make).
# Sections: scan rewrite pack verify split kernels diff trace archive tui tuistart phc phc1 cancel,
# and scale (not in the default set: 1 GiB and 8 GiB trees, ~20 GB of disk, ~30 min).
# Rows of sections not rerun are kept from bench/work/results.jsonl, and a partial run
# replaces only its own rows of the committed RESULTS.md (bench/merge.py), so a fresh
# checkout can rerun one section. Work files go to bench/work/
# (generated trees are kept and reused; delete the folder to regenerate).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$root/bench/work
mkdir -p "$work"
results=$work/results.jsonl
sections=("$@")
[ ${#sections[@]} -gt 0 ] || sections=(scan rewrite pack verify split wheel kernels diff trace archive tui tuistart phc phc1 cancel)
want() { local s; for s in "${sections[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }
for t in hyperfine zstd clang-offload-bundler-19 objcopy python3 /usr/bin/time; do
  command -v "$t" >/dev/null || { echo "bench: missing $t" >&2; exit 1; }
done
RUNS=${RUNS:-5}
SCAN_MB=${SCAN_MB:-600}

echo "bench: building (release)"
cargo build --release --quiet --bins --examples
kp=$root/target/release/kpack-tui

# A measurement that printed nothing failed: the run stops rather than report a gap.
record() { [ -n "$1" ] || { echo "bench: a measurement printed nothing" >&2; exit 1; }; echo "$1" >> "$results.new"; }
: > "$results.new"
# Keep earlier results of sections not rerun.
if [ -f "$results" ]; then
  python3 - "$results" "${sections[@]}" >> "$results.new" <<'PY'
import json, sys
keep = {"scan": "scan", "rewrite": "rewrite", "pack": "pack", "verify": "verify", "split": "split", "combine": "split", "kernels": "kernels", "find_kernel": "kernels", "diff": "diff", "trace": "trace", "archive_write": "archive", "archive_random_access": "archive", "tui": "tui", "phc": "phc", "phc1": "phc1", "tui_startup": "tuistart", "cancel": "cancel", "tui_cancel": "cancel", "scale": "scale", "scale_cancel": "scale"}
rerun = set(sys.argv[2:])
for line in open(sys.argv[1]):
    b = json.loads(line)
    if keep.get(b["bench"].split(":")[0], b["bench"]) not in rerun:
        print(line, end="")
PY
fi

# Median seconds of a hyperfine JSON export.
median() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"]; print(" ".join(str(x["median"]) for x in r))' "$1"; }
peak_rss_kb() { /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -1; }

tree=$work/tree-$SCAN_MB
if want scan || want pack; then
  if [ ! -d "$tree" ]; then
    echo "bench: generating a ${SCAN_MB} MB tree in $tree"
    "$root/target/release/examples/gen_tree" "$tree" --size-mb "$SCAN_MB" --seed 1
  fi
fi

if want scan; then
  echo "bench: scan vs objcopy + clang-offload-bundler -list loop"
  "$kp" scan "$tree" --no-tui --json > "$work/scan.json"
  python3 -c '
import json,sys
r=json.load(open(sys.argv[1]))
fat=[f["path"] for f in r["files"] if f["kind"]=="fat_binary" and not f.get("hard_link_of") and f.get("container") is None]
open(sys.argv[2],"w").write("\n".join(fat)+"\n")
print(len(fat), r["totals"]["bytes"], len(r["files"]))' "$work/scan.json" "$work/fat.txt" > "$work/scan.counts"
  read -r nfat tree_bytes nfiles < "$work/scan.counts"
  cat > "$work/ref-list.sh" <<REF
#!/usr/bin/env bash
# The reference tools' way to list a binary's bundles: dump .hip_fatbin, run the bundler.
tmp=\$(mktemp); trap 'rm -f \$tmp' EXIT
while read -r f; do
  objcopy --dump-section .hip_fatbin=\$tmp "$tree/\$f" /dev/null 2>/dev/null || true
  clang-offload-bundler-19 -list -type=o -input=\$tmp >/dev/null 2>&1 || true
done < "$work/fat.txt"
REF
  chmod +x "$work/ref-list.sh"
  hyperfine -N --warmup 1 --runs "$RUNS" --export-json "$work/hf-scan.json" \
    "$kp scan $tree --no-tui --json" "$work/ref-list.sh" > "$work/hf-scan.log"
  read -r ours ref <<< "$(median "$work/hf-scan.json")"
  rss=$(peak_rss_kb "$kp" scan "$tree" --no-tui --json)
  t1=$( { /usr/bin/time -f %e "$kp" scan "$tree" --no-tui --json -j 1 >/dev/null; } 2>&1 | tail -1)
  record "{\"bench\":\"scan\",\"tree_bytes\":$tree_bytes,\"files\":$nfiles,\"fat_binaries\":$nfat,\"ours_s\":$ours,\"ref_s\":$ref,\"ours_j1_s\":$t1,\"peak_rss_kb\":$rss}"
  # --deep reads every byte of every file: against cat of the same files.
  echo "bench: scan --deep vs cat of every file"
  find "$tree" -type f > "$work/files.txt"
  printf '#!/bin/sh\nxargs -a %s -d "\\n" cat > /dev/null\n' "$work/files.txt" > "$work/cat-all.sh"
  chmod +x "$work/cat-all.sh"
  hyperfine -N --warmup 1 --runs "$RUNS" --export-json "$work/hf-deep.json" \
    "$kp scan $tree --no-tui --json --deep" "$work/cat-all.sh" > "$work/hf-deep.log"
  read -r ours ref <<< "$(median "$work/hf-deep.json")"
  rss=$(peak_rss_kb "$kp" scan "$tree" --no-tui --json --deep)
  record "{\"bench\":\"scan:deep\",\"tree_bytes\":$tree_bytes,\"files\":$nfiles,\"ours_s\":$ours,\"ref_s\":$ref,\"peak_rss_kb\":$rss}"
fi

if want rewrite; then
  echo "bench: rewrite of an ~80 MB binary with 14 bundles vs cp"
  big=$work/big80.so
  [ -f "$big" ] || "$root/target/release/examples/gen_tree" --single "$big" --tus 14 --size-mb 100
  hyperfine -N --warmup 1 --runs "$RUNS" --export-json "$work/hf-rewrite.json" \
    "$kp rewrite $big -o $work/big80.rw.so --search-path ../.kpack/bench_@GFXARCH@.kpack" "cp $big $work/big80.cp.so" > "$work/hf-rewrite.log"
  read -r ours ref <<< "$(median "$work/hf-rewrite.json")"
  rss=$(peak_rss_kb "$kp" rewrite "$big" -o "$work/big80.rw.so" --search-path x)
  record "{\"bench\":\"rewrite\",\"input_bytes\":$(stat -c %s "$big"),\"output_bytes\":$(stat -c %s "$work/big80.rw.so"),\"bundles\":14,\"ours_s\":$ours,\"ref_s\":$ref,\"peak_rss_kb\":$rss}"
  rm -f "$work/big80.rw.so" "$work/big80.cp.so"
  # The same library linked for aarch64 (64 KiB pages): the same one read, one write.
  if command -v aarch64-linux-gnu-gcc >/dev/null; then
    echo "bench: rewrite of the same binary linked for aarch64 vs cp"
    arm=$work/big80-aarch64.so
    [ -f "$arm" ] || KPACK_GEN_CC=aarch64-linux-gnu-gcc \
      "$root/target/release/examples/gen_tree" --single "$arm" --tus 14 --size-mb 100
    hyperfine -N --warmup 1 --runs "$RUNS" --export-json "$work/hf-rewrite-arm.json" \
      "$kp rewrite $arm -o $work/arm.rw.so --search-path ../.kpack/bench_@GFXARCH@.kpack" "cp $arm $work/arm.cp.so" > "$work/hf-rewrite-arm.log"
    read -r ours ref <<< "$(median "$work/hf-rewrite-arm.json")"
    rss=$(peak_rss_kb "$kp" rewrite "$arm" -o "$work/arm.rw.so" --search-path x)
    record "{\"bench\":\"rewrite:aarch64\",\"input_bytes\":$(stat -c %s "$arm"),\"output_bytes\":$(stat -c %s "$work/arm.rw.so"),\"bundles\":14,\"ours_s\":$ours,\"ref_s\":$ref,\"peak_rss_kb\":$rss}"
    rm -f "$work/arm.rw.so" "$work/arm.cp.so"
  fi
fi

if want pack; then
  PACK_MB=${PACK_MB:-1100}
  ptree=$work/tree-$PACK_MB
  [ -d "$ptree" ] || "$root/target/release/examples/gen_tree" "$ptree" --size-mb "$PACK_MB" --seed 2
  big=$work/tree-$((PACK_MB * 2))
  [ -d "$big" ] || "$root/target/release/examples/gen_tree" "$big" --size-mb $((PACK_MB * 2)) --seed 3
  fams=(--family gfx90X --family gfx94X --family gfx103X --family gfx110X --family gfx120X)
  echo "bench: pack vs cp -a + zstd -3 -T2 over the device bytes"
  dev_bytes=$("$root/target/release/examples/device_bytes" "$ptree" "$work/device.bin")
  tree_bytes=$(du -sb "$ptree" | cut -f1)
  hyperfine --warmup 1 --runs "$RUNS" --export-json "$work/hf-pack.json" \
    --prepare "rm -rf $work/packed $work/cpa $work/device.zst" \
    "$kp pack $ptree -o $work/packed --group bench ${fams[*]} --force" \
    "cp -a $ptree $work/cpa && zstd -3 -T2 -q -f $work/device.bin -o $work/device.zst" > "$work/hf-pack.log"
  read -r ours ref <<< "$(median "$work/hf-pack.json")"
  rm -rf "$work/cpa" "$work/device.zst"
  rss1=$(peak_rss_kb "$kp" pack "$ptree" -o "$work/packed" --group bench "${fams[@]}" --force)
  out_bytes=$(du -sb "$work/packed" | cut -f1)
  rss2=$(peak_rss_kb "$kp" pack "$big" -o "$work/packed2" --group bench "${fams[@]}" --force)
  big_bytes=$(du -sb "$big" | cut -f1)
  rm -rf "$work/packed" "$work/packed2" "$work/device.bin"
  record "{\"bench\":\"pack\",\"tree_bytes\":$tree_bytes,\"device_bytes\":$dev_bytes,\"out_bytes\":$out_bytes,\"ours_s\":$ours,\"ref_s\":$ref,\"peak_rss_kb\":$rss1,\"big_tree_bytes\":$big_bytes,\"big_peak_rss_kb\":$rss2}"
fi

if want cancel; then
  # Ctrl-C while the highest level compresses a tree's kernels (#32): how long until
  # the process is gone, and that it left nothing.
  ctree=$work/tree-${PACK_MB:-1100}
  [ -d "$ctree" ] || "$root/target/release/examples/gen_tree" "$ctree" --size-mb "${PACK_MB:-1100}" --seed 2
  echo "bench: Ctrl-C during pack --level max"
  record "$(python3 "$root/bench/cancel.py" "$kp" "$ctree" "$work" "$RUNS")"
  if command -v tmux >/dev/null; then
    echo "bench: Esc during a TUI pack at level max"
    record "$(python3 "$root/bench/tui_cancel.py" "$kp" "$ctree" "$work" "$RUNS")"
  fi
fi

if want verify; then
  # verify of a packed 1 GB tree, every loader generation on every device ISA that
  # accepts each packed target, vs decompressing every frame once (zstd -d over the
  # same frames, concatenated).
  PACK_MB=${PACK_MB:-1100}
  ptree=$work/tree-$PACK_MB
  [ -d "$ptree" ] || "$root/target/release/examples/gen_tree" "$ptree" --size-mb "$PACK_MB" --seed 2
  vpacked=$work/vpacked
  [ -d "$vpacked" ] || "$kp" pack "$ptree" -o "$vpacked" --group bench --all --no-verify > /dev/null
  read -r nframes fbytes <<< "$("$root/target/release/examples/archive_frames" "$vpacked" "$work/frames.zst")"
  echo "bench: verify (--loader all) vs zstd -d of its $nframes frames"
  hyperfine -N --warmup 1 --runs "$RUNS" --export-json "$work/hf-verify.json" \
    "$kp verify $vpacked --no-tui" "zstd -d -q -c $work/frames.zst" > "$work/hf-verify.log"
  read -r ours ref <<< "$(median "$work/hf-verify.json")"
  rss=$(peak_rss_kb "$kp" verify "$vpacked" --no-tui)
  rm -f "$work/frames.zst"
  record "{\"bench\":\"verify\",\"tree_bytes\":$(du -sb "$vpacked" | cut -f1),\"frames\":$nframes,\"frame_bytes\":$fbytes,\"ours_s\":$ours,\"ref_s\":$ref,\"peak_rss_kb\":$rss}"
fi

if want split; then
  SPLIT_MB=${SPLIT_MB:-1100}
  stree=$work/tree-$SPLIT_MB
  [ -d "$stree" ] || "$root/target/release/examples/gen_tree" "$stree" --size-mb "$SPLIT_MB" --seed 2
  big=$work/tree-$((SPLIT_MB * 2))
  [ -d "$big" ] || "$root/target/release/examples/gen_tree" "$big" --size-mb $((SPLIT_MB * 2)) --seed 3
  # Artifact directories (one stage prefix) made of hard links to the trees.
  for t in "$stree" "$big"; do
    a=$t.art
    [ -d "$a" ] || { mkdir -p "$a/stage" && cp -al "$t/." "$a/stage/" && echo stage > "$a/artifact_manifest.txt"; }
  done
  echo "bench: split vs cp -a + zstd -3 -T2 over the device bytes"
  dev_bytes=$("$root/target/release/examples/device_bytes" "$stree" "$work/device.bin")
  tree_bytes=$(du -sb "$stree" | cut -f1)
  sp=(--artifact-prefix bench --split-databases all --force)
  hyperfine --warmup 1 --runs "$RUNS" --export-json "$work/hf-split.json" \
    --prepare "rm -rf $work/cpa $work/device.zst" \
    "$kp split $stree.art -o $work/split ${sp[*]}" \
    "cp -a $stree $work/cpa && zstd -3 -T2 -q -f $work/device.bin -o $work/device.zst" > "$work/hf-split.log"
  read -r ours ref <<< "$(median "$work/hf-split.json")"
  rm -rf "$work/cpa" "$work/device.zst" "$work/device.bin"
  rss1=$(peak_rss_kb "$kp" split "$stree.art" -o "$work/split" "${sp[@]}")
  out_bytes=$(du -sb "$work/split" | cut -f1)
  rss2=$(peak_rss_kb "$kp" split "$big.art" -o "$work/split2" "${sp[@]}")
  big_bytes=$(du -sb "$big" | cut -f1)
  rm -rf "$work/split" "$work/split2"
  record "{\"bench\":\"split\",\"tree_bytes\":$tree_bytes,\"device_bytes\":$dev_bytes,\"out_bytes\":$out_bytes,\"ours_s\":$ours,\"ref_s\":$ref,\"peak_rss_kb\":$rss1,\"big_tree_bytes\":$big_bytes,\"big_peak_rss_kb\":$rss2}"

  echo "bench: combine of two shards vs cp -a of the shards"
  "$kp" scan "$stree" --no-tui --json > "$work/split-scan.json"
  read -r half1 half2 <<< "$(python3 -c '
import json,sys
a=sorted({t.split(":")[0] for t in json.load(open(sys.argv[1]))["archs"]})
print(",".join(a[0::2]), ",".join(a[1::2]))' "$work/split-scan.json")"
  rm -rf "$work/shards"
  "$kp" split "$stree.art" -o "$work/shards/a" "${sp[@]}" --gpu-targets "$half1" > /dev/null
  "$kp" split "$stree.art" -o "$work/shards/b" "${sp[@]}" --gpu-targets "$half2" > /dev/null
  in_bytes=$(du -sb "$work/shards" | cut -f1)
  hyperfine --warmup 1 --runs "$RUNS" --export-json "$work/hf-combine.json" \
    --prepare "rm -rf $work/combined $work/cpa" \
    "$kp combine $work/shards/a $work/shards/b -o $work/combined" \
    "cp -a $work/shards $work/cpa" > "$work/hf-combine.log"
  read -r ours ref <<< "$(median "$work/hf-combine.json")"
  rss=$(peak_rss_kb "$kp" combine "$work/shards/a" "$work/shards/b" -o "$work/combined" --force)
  rm -rf "$work/combined" "$work/cpa" "$work/shards"
  record "{\"bench\":\"combine\",\"in_bytes\":$in_bytes,\"ours_s\":$ours,\"ref_s\":$ref,\"peak_rss_kb\":$rss}"
fi

if want wheel; then
  # A generated install tree packed into a wheel by Python's zipfile (deflate 6, as
  # pip-built wheels are), then split; the limit is unzip to tmpfs + zstd -3 -T2 over
  # the device bytes + zip -1 of the unpacked tree. RSS for the wheel and one twice
  # as large.
  WHEEL_MB=${WHEEL_MB:-800}
  tag=cp311-cp311-linux_x86_64
  for mb in "$WHEEL_MB" $((WHEEL_MB * 2)); do
    wt=$work/wtree-$mb
    [ -d "$wt" ] || "$root/target/release/examples/gen_tree" "$wt" --size-mb "$mb" --seed $((mb % 97))
    [ -f "$work/wheel-$mb/pkg-1.0-$tag.whl" ] || { mkdir -p "$work/wheel-$mb" && python3 "$root/scripts/make-test-wheel.py" \
      "$work/wheel-$mb/pkg-1.0-$tag.whl" --name pkg --version 1.0 --tag "$tag" --tree "$wt=pkg"; }
  done
  whl=$work/wheel-$WHEEL_MB/pkg-1.0-$tag.whl
  big=$work/wheel-$((WHEEL_MB * 2))/pkg-1.0-$tag.whl
  echo "bench: wheel split vs unzip + zstd -3 -T2 over the device bytes + zip -1"
  dev_bytes=$("$root/target/release/examples/device_bytes" "$work/wtree-$WHEEL_MB" "$work/wdevice.bin")
  ws=(--device-package-prefix pkg-device --overlay-root pkg --force)
  shm=/dev/shm/kpack-wheel-bench
  hyperfine --warmup 1 --runs "$RUNS" --export-json "$work/hf-wheel.json" \
    --prepare "rm -rf $work/wsplit $shm $shm.zip $work/wdevice.zst" \
    "$kp wheel split $whl -o $work/wsplit ${ws[*]}" \
    "unzip -q $whl -d $shm && zstd -3 -T2 -q -f $work/wdevice.bin -o $work/wdevice.zst && cd $shm && zip -q -1 -r $shm.zip ." > "$work/hf-wheel.log"
  read -r ours ref <<< "$(median "$work/hf-wheel.json")"
  rm -rf "$shm" "$shm.zip" "$work/wdevice.zst" "$work/wdevice.bin"
  rss1=$(peak_rss_kb "$kp" wheel split "$whl" -o "$work/wsplit" "${ws[@]}")
  out_bytes=$(du -sb "$work/wsplit" | cut -f1)
  nwheels=$(ls "$work/wsplit" | wc -l)
  rss2=$(peak_rss_kb "$kp" wheel split "$big" -o "$work/wsplit2" "${ws[@]}")
  rm -rf "$work/wsplit" "$work/wsplit2"
  record "{\"bench\":\"wheel\",\"wheel_bytes\":$(stat -c %s "$whl"),\"device_bytes\":$dev_bytes,\"out_bytes\":$out_bytes,\"wheels\":$nwheels,\"ours_s\":$ours,\"ref_s\":$ref,\"peak_rss_kb\":$rss1,\"big_wheel_bytes\":$(stat -c %s "$big"),\"big_peak_rss_kb\":$rss2}"
fi

if want kernels; then
  echo "bench: kernels of a 60 MB library vs zstd -d of its compressed bundles and cat"
  klib=$work/klib-60.so
  [ -f "$klib" ] || "$root/target/release/examples/gen_tree" --single "$klib" --tus 12 --size-mb 60 --seed 5
  read -r nz zbytes <<< "$("$root/target/release/examples/ccob_payloads" "$klib" "$work/klib.zst")"
  hyperfine -N --warmup 2 --runs "$RUNS" --export-json "$work/hf-kernels.json" \
    "$kp kernels $klib --json" "zstd -d -q -c $work/klib.zst" "cat $klib" > "$work/hf-kernels.log"
  read -r ours zstd_s cat_s <<< "$(median "$work/hf-kernels.json")"
  nk=$("$kp" kernels "$klib" --json | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["code_objects"], len(r["kernels"]))')
  read -r ncos nkern <<< "$nk"
  rss=$(peak_rss_kb "$kp" kernels "$klib" --json)
  record "{\"bench\":\"kernels\",\"lib_bytes\":$(stat -c %s "$klib"),\"code_objects\":$ncos,\"kernels\":$nkern,\"ccob_bundles\":$nz,\"ccob_bytes\":$zbytes,\"ours_s\":$ours,\"zstd_s\":$zstd_s,\"cat_s\":$cat_s,\"peak_rss_kb\":$rss}"

  echo "bench: find-kernel over a 1 GiB tree vs grep -rl"
  ktree=$work/ktree-1100
  [ -d "$ktree" ] || "$root/target/release/examples/gen_tree" "$ktree" --size-mb 1100 --seed 4
  hyperfine -N -i --warmup 1 --runs "$RUNS" --export-json "$work/hf-find.json" \
    "$kp find-kernel spill_heavy $ktree" "grep -rlF spill_heavy $ktree" > "$work/hf-find.log"
  read -r ours ref <<< "$(median "$work/hf-find.json")"
  hits=$("$kp" find-kernel spill_heavy "$ktree" --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["kernels"]))')
  record "{\"bench\":\"find_kernel\",\"tree_bytes\":$(du -sb "$ktree" | cut -f1),\"hits\":$hits,\"ours_s\":$ours,\"ref_s\":$ref}"
fi

# A generated tree and its next build: a copy (hard links) in which 5 shared libraries
# were rebuilt with the device code of one translation unit changed.
#   tree_and_next DIR SIZE_MB SEED   -> DIR and DIR-rebuilt
tree_and_next() {
  [ -d "$1" ] || "$root/target/release/examples/gen_tree" "$1" --size-mb "$2" --seed "$3"
  if [ ! -d "$1-rebuilt" ]; then
    cp -al "$1" "$1-rebuilt"
    "$root/target/release/examples/gen_tree" "$1-rebuilt" --size-mb "$2" --seed "$3" --rebuild 5
  fi
}

if want diff; then
  echo "bench: diff of two generated trees vs scanning both"
  da=$work/ktree-1100
  dn=$da-rebuilt
  tree_and_next "$da" 1100 4
  db=$work/ktree2-600
  [ -d "$db" ] || "$root/target/release/examples/gen_tree" "$db" --size-mb 600 --seed 6
  # The worst case of a next build: 5 libraries whose device code differs entirely
  # (replaced by libraries of B under A's names).
  dw=$work/ktree-1100-replaced
  if [ ! -d "$dw" ]; then
    cp -al "$da" "$dw"
    i=0
    for f in $(cd "$dw" && find lib -maxdepth 1 -type f -name 'libgen*.so.*' | sort | head -5); do
      src=$(find "$db/lib" -maxdepth 1 -type f -name 'libgen*.so.*' | sort | sed -n "$((i + 1))p")
      rm "$dw/$f" && cp "$src" "$dw/$f"
      i=$((i + 1))
    done
  fi
  hyperfine --warmup 1 --runs "$RUNS" --export-json "$work/hf-diff.json" \
    "$kp diff $da $dn --json > /dev/null" "$kp diff $da $dn --by target > /dev/null" \
    "$kp scan $da --json > /dev/null; $kp scan $dn --json > /dev/null" \
    "$kp diff $da $dw --json > /dev/null" \
    "$kp scan $da --json > /dev/null; $kp scan $dw --json > /dev/null" \
    "$kp diff $da $db --json > /dev/null" \
    "$kp scan $da --json > /dev/null; $kp scan $db --json > /dev/null" > "$work/hf-diff.log"
  read -r ours ours_t ref ours_w ref_w ours_u ref_u <<< "$(median "$work/hf-diff.json")"
  rss=$(peak_rss_kb "$kp" diff "$da" "$dn" --json)
  # Peak memory when the tree doubles: a 2.2 GB tree against its next build.
  d2=$work/tree-2200
  tree_and_next "$d2" 2200 3
  rss_d=$(peak_rss_kb "$kp" diff "$d2" "$d2-rebuilt" --json)
  rss_u=$(peak_rss_kb "$kp" diff "$da" "$db" --json)
  record "{\"bench\":\"diff\",\"a_bytes\":$(du -sb "$da" | cut -f1),\"b_bytes\":$(du -sb "$db" | cut -f1),\"ours_s\":$ours,\"ours_by_target_s\":$ours_t,\"ref_s\":$ref,\"ours_replaced_s\":$ours_w,\"ref_replaced_s\":$ref_w,\"ours_unrelated_s\":$ours_u,\"ref_unrelated_s\":$ref_u,\"peak_rss_kb\":$rss,\"double_bytes\":$(du -sb "$d2" | cut -f1),\"peak_rss_double_kb\":$rss_d,\"peak_rss_unrelated_kb\":$rss_u}"
fi

if want trace; then
  echo "bench: parse + analyse 1,000,000 trace lines on one core vs awk"
  big_trace=$work/million.trace
  [ -f "$big_trace" ] || awk 'BEGIN { srand(7); t = 1700000000000;
      for (i = 0; i < 1000000; i++) { o = int(i / 6); s = t + int(i / 2) * 37; d = 200 + int(rand() * 4000);
        step = i % 6; n = (step < 4) ? sprintf("obj%06d.o::gfx9%02d", o, step) : (step == 4 ? sprintf("obj%06d.o::bundle", o) : sprintf("obj%06d.o", o));
        printf "%.0f\t%.0f\t%.0f\t%s\t%016x\n", s, s + d, s + d, n, i } }' > "$big_trace"
  # The same lines in completion order, as phc and ninja append them (the generator
  # writes them in start order).
  end_trace=$work/million-end-order.trace
  [ -f "$end_trace" ] || sort -t"$(printf '\t')" -k2,2n -s "$big_trace" > "$end_trace"
  hyperfine -N --warmup 1 --runs "$RUNS" --export-json "$work/hf-trace.json" \
    "taskset -c 0 $kp trace $big_trace --json" \
    "taskset -c 0 awk -F'\t' '{ s += \$2 - \$1 } END { print s }' $big_trace" \
    "taskset -c 0 $kp trace $end_trace --json" > "$work/hf-trace.log"
  read -r ours ref ours_end <<< "$(median "$work/hf-trace.json")"
  rss=$(peak_rss_kb taskset -c 0 "$kp" trace "$big_trace" --json)
  record "{\"bench\":\"trace\",\"lines\":1000000,\"ours_s\":$ours,\"ref_s\":$ref,\"ours_end_order_s\":$ours_end,\"peak_rss_kb\":$rss}"
fi

if want archive; then
  echo "bench: archive write vs zstd -3 -T2; random access in a >1 GB archive"
  "$root/target/release/examples/bench_archive" "$work/archive" --runs "$RUNS" --big-kernel-kb 1024 >> "$results.new"
  "$root/target/release/examples/bench_archive" "$work/archive" --runs "$RUNS" --skip-write --big-kernel-kb 256 >> "$results.new"
fi

if want tui; then
  echo "bench: frame time per view at 160x48 on 100k-file and 100k-job models"
  "$kp" bench-frames --files 100000 --jobs 100000 --frames 50 >> "$results.new"
fi

if want tuistart; then
  echo "bench: time until the explorer shows a 100,000-file tree (tmux, warm cache)"
  command -v tmux >/dev/null || { echo "bench: tuistart needs tmux" >&2; exit 1; }
  t100k=$work/tree-100k-files
  [ -d "$t100k" ] || python3 - "$t100k" "$root/tests/fixtures/bin/libvadd.so" <<'PY'
import os, sys
root, fat = sys.argv[1], open(sys.argv[2], "rb").read()
for i in range(100000):
    d = f"{root}/lib/d{i % 500:03d}/s{(i // 500) % 10}"
    os.makedirs(d, exist_ok=True)
    open(f"{d}/f{i:06d}" + (".so" if i % 100 == 0 else ".txt"), "wb").write(fat if i % 100 == 0 else b"x" * 64)
PY
  KPACK_TUI_STATE=off python3 "$root/bench/tui_startup.py" "$kp" "$t100k" "$RUNS" >> "$results.new"
fi

if want phc; then
  echo "bench: make -j2 of a 4-arch HIP project, plain hipcc vs through phc"
  command -v hipcc >/dev/null && command -v make >/dev/null || { echo "bench: phc needs hipcc and make" >&2; exit 1; }
  proj=$work/phc-project
  rm -rf "$proj"; python3 "$root/bench/phc_project.py" "$proj"
  phc=$root/target/release/phc
  hyperfine -N --runs "$RUNS" --prepare "make -s -C $proj clean" --export-json "$work/hf-phc.json" \
    "make -s -j2 -C $proj PHC=$phc" "make -s -j2 -C $proj PHC=" > "$work/hf-phc.log"
  read -r ours ref <<< "$(median "$work/hf-phc.json")"
  # The objects are the same both ways, and one traced build shows where time goes.
  make -s -C "$proj" clean; make -s -j2 -C "$proj" PHC=; mkdir -p "$proj/plain"; cp "$proj"/*.o "$proj/plain/"
  make -s -C "$proj" clean; rm -f "$work/phc.trace"
  PHC_NINJA_TRACE=$work/phc.trace make -s -j2 -C "$proj" PHC="$phc"
  same=1; for o in "$proj"/plain/*.o; do cmp -s "$o" "$proj/$(basename "$o")" || same=0; done
  "$kp" trace "$work/phc.trace" --json > "$work/phc-trace.json"
  peak=$(python3 -c 'import json,sys; b=json.load(open(sys.argv[1]))["builds"][0]; print(b["peak_parallelism"], b["wall_ms"], b["job_ms"])' "$work/phc-trace.json")
  read -r ppeak pwall psum <<< "$peak"
  record "{\"bench\":\"phc\",\"files\":4,\"archs\":4,\"ours_s\":$ours,\"ref_s\":$ref,\"identical\":$same,\"peak\":$ppeak,\"trace_wall_ms\":$pwall,\"trace_sum_ms\":$psum}"
fi

if want phc1; then
  echo "bench: one file (8 kernels, 4 archs) alone: plain hipcc vs through phc"
  proj=$work/phc-project
  [ -f "$proj/f8.hip" ] || python3 "$root/bench/phc_project.py" "$proj"
  phc=$root/target/release/phc
  a="--offload-arch=gfx900 --offload-arch=gfx906 --offload-arch=gfx908 --offload-arch=gfx90a"
  # Also with relocatable device code (-fgpu-rdc), which phc splits too.
  hyperfine -N --runs "$RUNS" --export-json "$work/hf-phc1.json" \
    "$phc hipcc -O2 -c $proj/f8.hip $a -o $proj/one.o" "hipcc -O2 -c $proj/f8.hip $a -o $proj/one.o" \
    "$phc hipcc -fgpu-rdc -O2 -c $proj/f8.hip $a -o $proj/rdc.o" "hipcc -fgpu-rdc -O2 -c $proj/f8.hip $a -o $proj/rdc.o" \
    > "$work/hf-phc1.log"
  read -r ours ref ours_rdc ref_rdc <<< "$(median "$work/hf-phc1.json")"
  record "{\"bench\":\"phc1\",\"archs\":4,\"ours_s\":$ours,\"ref_s\":$ref,\"ours_rdc_s\":$ours_rdc,\"ref_rdc_s\":$ref_rdc}"
fi

if want scale; then
  # #32: every long command on a 1 GiB and an 8 GiB generated tree (cached): seconds
  # per GiB and the process's peak RSS, next to the limit measured on the same tree
  # (cp -a of the tree + zstd -3 -T2 over its code objects), and Ctrl-C latency of
  # `pack --level max` on the 8 GiB tree. Each command runs on the two trees back to
  # back (3 runs on one, then 3 on the other), not all commands on one tree and then
  # all on the other: this machine's disk wrote 0.4 to 1.8 GB/s from one minute to
  # the next, and a ratio of two figures taken ten minutes apart measured that drift.
  SRUNS=${SCALE_RUNS:-3}
  m() { python3 "$root/bench/measure.py" "$SRUNS" "$@"; }
  # SCALE_SIZES="64 128" tries the section on small trees (the goals are for these two).
  read -r -a sizes <<< "${SCALE_SIZES:-1024 8192}"
  declare -A bytes files dev
  for i in "${!sizes[@]}"; do
    mb=${sizes[$i]}
    t=$work/scale-$mb
    [ -d "$t" ] || "$root/target/release/examples/gen_tree" "$t" --size-mb "$mb" --seed $((i + 1))
    [ -d "$t.art" ] || { mkdir -p "$t.art/stage" && cp -al "$t/." "$t.art/stage/" && echo stage > "$t.art/artifact_manifest.txt"; }
    bytes[$mb]=$(du -sb "$t" | cut -f1)
    files[$mb]=$(find "$t" -type f | wc -l)
    o=$work/scale-out-$mb
    rm -rf "$o"; mkdir -p "$o"
    dev[$mb]=$("$root/target/release/examples/device_bytes" "$t" "$o/device.bin")
    # The same tree as a wheel (Python's zipfile, deflate 6; cached).
    whl=$work/scale-$mb.whl/pkg-1.0-cp311-cp311-linux_x86_64.whl
    [ -f "$whl" ] || { mkdir -p "${whl%/*}" && python3 "$root/scripts/make-test-wheel.py" "$whl.part" \
      --name pkg --version 1.0 --tag cp311-cp311-linux_x86_64 --tree "$t=pkg" && mv "$whl.part" "$whl"; }
  done
  row() { record "{\"bench\":\"scale\",\"cmd\":\"$1\",\"tree_mb\":$mb,\"tree_bytes\":${bytes[$mb]},\"files\":${files[$mb]},\"device_bytes\":${dev[$mb]},\"run\":$2}"; }
  # Every run starts with its input read (the page cache holds the tree, not the
  # outputs besides it) and a run that writes is timed to its sync.
  sp=(--artifact-prefix bench --split-databases all)
  for cmd in limit scan pack verify kernels diff split combine "wheel split"; do
    echo "bench: scale, $cmd on the ${sizes[*]} MiB trees"
    for mb in "${sizes[@]}"; do
      t=$work/scale-$mb o=$work/scale-out-$mb
      whl=$work/scale-$mb.whl/pkg-1.0-cp311-cp311-linux_x86_64.whl
      case $cmd in
        limit) r=$(m --prepare "rm -rf $o/cpa $o/device.zst" --warm "$t" --sync -- sh -c "cp -a $t $o/cpa && zstd -3 -T2 -q -f $o/device.bin -o $o/device.zst")
               rm -rf "$o/cpa" "$o/device.zst" "$o/device.bin" ;;
        scan) r=$(m --warm "$t" -- "$kp" scan "$t" --no-tui --json) ;;
        pack) r=$(m --prepare "rm -rf $o/packed" --warm "$t" --sync -- "$kp" pack "$t" -o "$o/packed" --group bench --all) ;;
        verify) r=$(m --warm "$o/packed" -- "$kp" verify "$o/packed" --no-tui) ;;
        kernels) r=$(m --warm "$t" -- "$kp" kernels "$t" --json) ;;
        diff) r=$(m --warm "$t" --warm "$o/packed" -- "$kp" diff "$t" "$o/packed" --no-tui)
              rm -rf "$o/packed" ;;
        split) r=$(m --prepare "rm -rf $o/split" --warm "$t.art" --sync -- "$kp" split "$t.art" -o "$o/split" "${sp[@]}")
               rm -rf "$o/split"
               # Two shards (even and odd targets) for combine.
               read -r half1 half2 <<< "$("$kp" scan "$t" --no-tui --json | python3 -c '
import json,sys
a=sorted({t.split(":")[0] for t in json.load(sys.stdin)["archs"]})
print(",".join(a[0::2]), ",".join(a[1::2]))')"
               "$kp" split "$t.art" -o "$o/shards/a" "${sp[@]}" --gpu-targets "$half1" > /dev/null
               "$kp" split "$t.art" -o "$o/shards/b" "${sp[@]}" --gpu-targets "$half2" > /dev/null ;;
        combine) r=$(m --prepare "rm -rf $o/combined" --warm "$o/shards" --sync -- "$kp" combine "$o/shards/a" "$o/shards/b" -o "$o/combined")
                 rm -rf "$o/combined" "$o/shards" ;;
        "wheel split") r=$(m --prepare "rm -rf $o/wsplit" --warm "$whl" --sync -- "$kp" wheel split "$whl" -o "$o/wsplit" --device-package-prefix pkg-device --overlay-root pkg)
                       rm -rf "$o/wsplit" ;;
      esac
      row "$cmd" "$r"
    done
  done
  mb=${sizes[-1]}
  echo "bench: scale, Ctrl-C during pack --level max of the $mb MiB tree"
  record "$(python3 "$root/bench/cancel.py" "$kp" "$work/scale-$mb" "$work" "$SRUNS" | sed 's/"bench": "cancel"/"bench": "scale_cancel"/')"
  for mb in "${sizes[@]}"; do rm -rf "$work/scale-out-$mb"; done
fi

mv "$results.new" "$results"
python3 "$root/bench/report.py" "$results" > "$work/RESULTS.part.md"
# A run of some sections on a checkout whose results.jsonl lacks the others changes
# only its own rows of the committed report; the rest stay as they were.
if [ $# -gt 0 ] && [ -f "$root/bench/RESULTS.md" ]; then
  python3 "$root/bench/merge.py" "$root/bench/RESULTS.md" "$work/RESULTS.part.md" > "$work/RESULTS.merged.md"
  mv "$work/RESULTS.merged.md" "$root/bench/RESULTS.md"
else
  mv "$work/RESULTS.part.md" "$root/bench/RESULTS.md"
fi
echo "bench: wrote bench/RESULTS.md"
