#!/usr/bin/env bash
# Build two install trees that differ in known ways, for the diff tests and demos:
#   OLD/lib/libvadd.so.1.0   vadd.hip, gfx900 gfx906        NEW/lib/libvadd.so.1.1  the same (a renamed version)
#   OLD/lib/libk.so          kernels.hip, gfx900 gfx906     NEW/lib/libk.so         kernels_v2.hip, + gfx1030:
#                                                            one kernel more, spill_heavy unrolled further
#   OLD/lib/libgone.so       saxpy.hip, gfx900              (removed)
#   OLD/share/doc/README     text                           NEW/share/doc/README    the same
#
#   scripts/make-diff-pair.sh OUT        -> OUT/old, OUT/new
#
# Needs hipcc (apt-get install hipcc). No GPU is needed.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
[ $# -eq 1 ] || { echo "usage: make-diff-pair.sh OUT" >&2; exit 2; }
out=$1
mkdir -p "$out/old/lib" "$out/new/lib" "$out/old/share/doc" "$out/new/share/doc"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
cp "$here"/tests/fixtures/src/{vadd.hip,saxpy.hip,kernels.hip,kernels_v2.hip} .
quiet() { "$@" >log 2>&1 || { cat log >&2; return 1; }; }
lib() { # lib OUT SRC ARCH...
  local o=$1 s=$2; shift 2
  local a=(); for t in "$@"; do a+=("--offload-arch=$t"); done
  quiet hipcc -O2 -g0 -fPIC -c "${a[@]}" "$s" -o "$s.o"
  quiet hipcc -O2 -g0 -fPIC -Wl,--build-id=none -shared "$s.o" -o "$o"
}
lib "$out/old/lib/libvadd.so.1.0" vadd.hip gfx900 gfx906
cp "$out/old/lib/libvadd.so.1.0" "$out/new/lib/libvadd.so.1.1"
lib "$out/old/lib/libk.so" kernels.hip gfx900 gfx906
lib "$out/new/lib/libk.so" kernels_v2.hip gfx900 gfx906 gfx1030
lib "$out/old/lib/libgone.so" saxpy.hip gfx900
printf 'docs\n' > "$out/old/share/doc/README"
cp "$out/old/share/doc/README" "$out/new/share/doc/README"
echo "make-diff-pair: $out/old $out/new"
