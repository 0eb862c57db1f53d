#!/usr/bin/env bash
# Record a compile trace from real hipcc steps, in phc's format (headerless ninja v7:
# start \t end \t end \t name \t md5-16 of name, epoch ms): for each object, one
# device compile per arch run in parallel, then the bundle, then the host compile;
# the objects themselves build two at a time, like make -j2.
#
#   scripts/record-trace.sh [OUT]     (default tests/fixtures/traces/hipcc-2obj-4arch.trace)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$here/tests/fixtures/traces/hipcc-2obj-4arch.trace}
archs=(gfx900 gfx906 gfx908 gfx1030)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$here"/tests/fixtures/src/*.hip "$work"/
cd "$work"
: > trace
now() { date +%s%3N; }
line() { printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$2" "$3" "$(printf '%s' "$3" | md5sum | cut -c1-16)" >> trace; }
object() {
  local src=$1 obj=${1%.hip}.o pids=() a
  for a in "${archs[@]}"; do
    ( s=$(now); hipcc -O2 --cuda-device-only --offload-arch="$a" -c "$src" -o "$obj.$a.co" 2>/dev/null; line "$s" "$(now)" "$obj::$a" ) &
    pids+=($!)
  done
  wait "${pids[@]}"
  local s targets=host-x86_64-unknown-linux inputs=-input=/dev/null
  s=$(now)
  for a in "${archs[@]}"; do targets+=",hipv4-amdgcn-amd-amdhsa--$a"; inputs+=" -input=$obj.$a.co"; done
  # shellcheck disable=SC2086
  clang-offload-bundler-15 -type=o -targets="$targets" $inputs -output="$obj.hipfb"
  line "$s" "$(now)" "$obj::bundle"
  s=$(now)
  hipcc -O2 --cuda-host-only -c "$src" -o "$obj" 2>/dev/null
  line "$s" "$(now)" "$obj"
}
object vadd.hip &
object saxpy.hip &
wait
s=$(now); c++ -O2 -c "$here/tests/fixtures/src/main.cpp" -o main.o; line "$s" "$(now)" "main.o"
mkdir -p "$(dirname "$out")"
cp trace "$out"
echo "record-trace: $(wc -l < "$out") steps in $out"
