#!/usr/bin/env bash
# Rebuild tests/xmix/lib/libxmix.so: one shared library of 60 translation units
# built from tests/fixtures/src/mix.hip, TUs 0-49 for plain gfx90a and TUs 50-59 for
# gfx90a:xnack- and gfx90a:xnack+ (clang-19, --offload-compress). It is the shape that
# broke ROCm 7.14 on gfx90a: packed one archive per target ID, the xnack archives
# shadow the plain one for first-match loaders (issue #26).
#
#   scripts/make-xnack-mix.sh [OUT_DIR]      (default: tests/xmix/lib)
#
# Needs: clang++-19, lld-19 (apt-get install clang-19 lld-19 hipcc). No GPU is needed.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$here/tests/xmix/lib}
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for tool in clang++-19 ld.lld-19; do
  command -v "$tool" >/dev/null || { echo "make-xnack-mix: missing $tool" >&2; exit 3; }
done
cc19=(clang++-19 -x hip --rocm-path=/usr --rocm-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode
  -O2 -g0 -fPIC --offload-compress)
objs=()
for tu in $(seq 0 59); do
  if [ "$tu" -ge 50 ]; then
    arch=(--offload-arch=gfx90a:xnack- --offload-arch=gfx90a:xnack+)
  else
    arch=(--offload-arch=gfx90a)
  fi
  "${cc19[@]}" -DTU="$tu" "${arch[@]}" -c "$here/tests/fixtures/src/mix.hip" -o "$work/tu$tu.o" &
  objs+=("$work/tu$tu.o")
  # Two compiles at a time.
  if (( tu % 2 == 1 )); then wait; fi
done
wait
clang++-19 -fuse-ld=lld-19 -shared -Wl,--build-id=none "${objs[@]}" \
  -L/usr/lib/x86_64-linux-gnu -lamdhip64 -o "$out/libxmix.so"
echo "make-xnack-mix: wrote $out/libxmix.so"
