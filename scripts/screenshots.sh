#!/usr/bin/env bash
# Regenerate screenshots/*.png from real runs: the release binary runs inside tmux,
# keys are sent, the pane is captured with its colours (tmux capture-pane -e), turned
# into HTML (aha) and photographed by headless chromium.
#
#   scripts/screenshots.sh            (apt-get install tmux aha chromium)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/screenshots
for t in tmux aha chromium cargo; do
  command -v "$t" >/dev/null || { echo "screenshots: missing $t (apt-get install tmux aha chromium)" >&2; exit 3; }
done
cd "$root"
cargo build --release --quiet --bins --examples
kp=$root/target/release/kpack-tui
# Fresh runs: nothing remembered from an earlier run changes the screens.
export KPACK_TUI_STATE=off
work=$(mktemp -d)
sock=kpack-shots-$$
trap 'tmux -L "$sock" kill-server 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p "$out"
cols=120 rows=34

start() { # start CMD...: a fresh session running the command
  tmux -L "$sock" kill-server 2>/dev/null || true
  sleep 0.5
  tmux -L "$sock" new-session -d -s s -x "$cols" -y "$rows" "TERM=xterm-256color $*; sleep 30"
}
keys() { for k in "$@"; do tmux -L "$sock" send-keys -t s "$k"; sleep 0.15; done; }
wait_for() { # wait_for TEXT
  for _ in $(seq 1 200); do
    tmux -L "$sock" capture-pane -t s -p | grep -qF -- "$1" && return 0
    sleep 0.1
  done
  echo "screenshots: timed out waiting for '$1'" >&2
  tmux -L "$sock" capture-pane -t s -p >&2
  exit 1
}
shot() { # shot NAME: capture the pane with colours and photograph it
  local name=$1
  tmux -L "$sock" capture-pane -t s -e -p > "$work/$name.ansi"
  aha --black --title "kpack-tui $name" < "$work/$name.ansi" |
    sed 's|<pre>|<pre style="font-family: DejaVu Sans Mono, monospace; font-size: 14px; line-height: 1.2; margin: 8px;">|' \
    > "$work/$name.html"
  chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --window-size=$((cols * 85 / 10 + 16)),$((rows * 17 + 16)) \
    --screenshot="$out/$name.png" "file://$work/$name.html" >/dev/null 2>&1
  echo "screenshots: $out/$name.png"
}

# Explorer and binary detail on the bundled demo tree.
cp -a assets/demo "$work/demo"
start "cd $work &&" "$kp" demo
wait_for "entries"
keys Down Down Down Down
wait_for "librdc.so"
wait_for "segments ("
shot explorer
# Architectures and families, with the core's plan.
keys 2
wait_for "gfx90X"
keys e
sleep 1
shot families
# Rewrite preview of a fat binary.
keys 1 / v a d d _ a p p Enter Down Enter
wait_for "wrapper"
shot preview

# The kernels inside the fixtures' code objects, sorted by spills.
cp -a tests/fixtures/bin "$work/fixtures"
start "cd $work &&" "$kp" fixtures
wait_for "entries"
keys 4
wait_for "spill_heavy"
keys s s s s s
wait_for "by spills"
shot kernels

# A fat wheel open in the explorer (built from the fixtures by Python's zipfile).
F=tests/fixtures/bin
python3 scripts/make-test-wheel.py "$work/torch-2.10.0+rocm7.1-cp311-cp311-linux_x86_64.whl" \
  --name torch --version 2.10.0+rocm7.1 --tag cp311-cp311-linux_x86_64 "torch/__init__.py=text:import os" \
  "torch/lib/libkernels.so@755=$F/libkernels.so" "torch/lib/libkernels_z.so@755=$F/libkernels_z.so" \
  "torch/lib/libplain.so@755=$F/libplain.so" "torch/lib/librdc.so@755=$F/librdc.so"
start "cd $work &&" "$kp" torch-2.10.0+rocm7.1-cp311-cp311-linux_x86_64.whl
wait_for "entries"
keys Right Down Right Down Down
wait_for "wrappers"
shot wheel

# Two builds compared: a renamed version, a library rebuilt for other targets, one
# removed (the trees of the diff view's test).
mkdir -p "$work/old/lib" "$work/new/lib"
cp tests/fixtures/bin/libvadd.so "$work/old/lib/libvadd.so.1.0"
cp tests/fixtures/bin/libvadd.so "$work/new/lib/libvadd.so.1.1"
cp tests/fixtures/bin/libkernels.so "$work/old/lib/libk.so"
cp tests/fixtures/bin/libkernels_z.so "$work/new/lib/libk.so"
cp tests/fixtures/bin/libzkern.so "$work/old/lib/libgone.so"
start "cd $work &&" "$kp" diff old new
wait_for "device code"
keys Tab Tab
wait_for "spill_heavy"
shot diff

# Pack in progress: a generated tree large enough to watch, one worker.
"$root/target/release/examples/gen_tree" "$work/big" --size-mb 400 --seed 3 >/dev/null
start "cd $work &&" "$kp" -j 1 big
wait_for "entries"
keys 2
wait_for "gfx90X"
keys P
wait_for "Pack this tree"
keys Enter
wait_for "ETA"
sleep 1.5
shot pack
wait_for "pack done"
keys q

# Archive inspector on an archive from that pack.
archive=$(find "$work/big.packed/.kpack" -type f -name '*.kpack' | sort | head -1)
start "cd $(dirname "$archive") &&" "$kp" "$(basename "$archive")"
wait_for "code objects"
keys Down Down Down
shot inspector

# Timeline of a real make -j2 build through phc, mid-replay.
start "cd $root/tests/fixtures/traces &&" "$kp" phc-make-j2.trace
wait_for "Summary"
keys Tab Space
sleep 0.3
keys Space
shot timeline
echo "screenshots: done"
