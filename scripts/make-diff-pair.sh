#!/usr/bin/env bash
# Build two install trees that differ in known ways, for the diff tests and demos:
#   OLD/lib/libvadd.so.1.0   vadd.hip, gfx900 gfx906        NEW/lib/libvadd.so.1.1  the same (a renamed version)
#   OLD/lib/libk.so          kernels.hip, gfx900 gfx906     NEW/lib/libk.so         kernels_v2.hip, + gfx1030:
#                                                            one kernel more, spill_heavy unrolled further
#   OLD/lib/libgone.so       saxpy.hip, gfx900              (removed)
#   OLD/lib/libmulti.so      multi_a.hip + multi_b.hip,     NEW/lib/libmulti.so     TU a the same bytes,
#                            clang-19 --offload-compress,                            TU b also launches
#                            gfx900 gfx1030                                          scale_n<1> (TU a has it)
#   OUT/parts/*.hipfb        the .hip_fatbin of each libmulti TU (multi_a, multi_b_old, multi_b_new)
#   OLD/share/doc/README     text                           NEW/share/doc/README    the same
#
#   scripts/make-diff-pair.sh OUT        -> OUT/old, OUT/new
#
# Needs hipcc, clang-19 and lld-19 (apt-get install hipcc clang-19 lld-19). No GPU is needed.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
[ $# -eq 1 ] || { echo "usage: make-diff-pair.sh OUT" >&2; exit 2; }
out=$1
mkdir -p "$out/old/lib" "$out/new/lib" "$out/old/share/doc" "$out/new/share/doc" "$out/parts"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
cp "$here"/tests/fixtures/src/{vadd.hip,saxpy.hip,kernels.hip,kernels_v2.hip,multi.h,multi_a.hip,multi_b.hip} .
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
# Two TUs, compressed bundles: a rebuild that changed TU b only.
z=(clang++-19 -x hip --rocm-path=/usr --rocm-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode
  -O2 -g0 -fPIC --offload-compress --offload-arch=gfx900 --offload-arch=gfx1030)
zlink() { quiet clang++-19 -fuse-ld=lld-19 -shared -Wl,--build-id=none "$@" -L/usr/lib/x86_64-linux-gnu -lamdhip64; }
quiet "${z[@]}" -c multi_a.hip -o multi_a.o
quiet "${z[@]}" -c multi_b.hip -o multi_b_old.o
quiet "${z[@]}" -DNEXT -c multi_b.hip -o multi_b_new.o
zlink multi_a.o multi_b_old.o -o "$out/old/lib/libmulti.so"
zlink multi_a.o multi_b_new.o -o "$out/new/lib/libmulti.so"
for o in multi_a multi_b_old multi_b_new; do
  objcopy -O binary --only-section=.hip_fatbin "$o.o" "$out/parts/$o.hipfb"
done
printf 'docs\n' > "$out/old/share/doc/README"
cp "$out/old/share/doc/README" "$out/new/share/doc/README"
echo "make-diff-pair: $out/old $out/new"
