#!/usr/bin/env bash
# Lay out the bundled demo tree (assets/demo) from the fixture binaries: an
# install-like tree with fat binaries in bin/ and lib/, a .so version chain of
# symlinks, kernel-database folders (rocBLAS, MIOpen, AOTriton) and plain files.
#
#   scripts/make-demo.sh [FIXTURES_DIR] [OUT_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
fx=${1:-$here/tests/fixtures/bin}
out=${2:-$here/assets/demo}
rm -rf "$out"
mkdir -p "$out"/{bin,lib/rocblas/library,lib/aotriton.images/amd-gfx90a/flash,share/miopen/db,share/doc/demo,include}

cp "$fx/app_pie" "$out/bin/vadd_app"
cp "$fx/app_nopie" "$out/bin/legacy_app"
cp "$fx/libvadd.so" "$out/lib/libvadd.so.1.0"
ln -s libvadd.so.1.0 "$out/lib/libvadd.so.1"
ln -s libvadd.so.1 "$out/lib/libvadd.so"
cp "$fx/libzkern.so" "$out/lib/libzkern.so"
cp "$fx/librdc.so" "$out/lib/librdc.so"
cp "$fx/libkern.a" "$out/lib/libkern.a"

# Kernel databases: per-arch code objects and data, plus arch-independent files.
cp "$fx/vadd-gfx90a.co" "$out/lib/rocblas/library/Kernels.so-000-gfx90a.co"
cp "$fx/kernels.hipfb" "$out/lib/rocblas/library/Kernels.so-000-gfx900.hsaco"
printf 'tensile library for gfx90a\n%.0s' {1..40} > "$out/lib/rocblas/library/TensileLibrary_gfx90a.dat"
printf 'tensile library for gfx900\n%.0s' {1..30} > "$out/lib/rocblas/library/TensileLibrary_gfx900.dat"
printf 'tensile library index\n' > "$out/lib/rocblas/library/TensileLibrary.dat"
cp "$fx/vadd-gfx90a.co" "$out/lib/aotriton.images/amd-gfx90a/flash/attn_fwd.hsaco"
printf 'miopen tuning model\n%.0s' {1..20} > "$out/share/miopen/db/gfx90a.tn.model"
printf 'miopen tuning model\n%.0s' {1..10} > "$out/share/miopen/db/generic.tn.model"
# MIOpen glues the CU count to the arch: gfx90a68 is gfx90a with 68 CUs.
printf 'miopen perf db\n%.0s' {1..12} > "$out/share/miopen/db/gfx90a68.db.txt"

cat > "$out/include/vadd.h" <<'H'
/* Host API of the demo libraries. */
int launch_vadd(const float *a, const float *b, float *c, int n);
int launch_saxpy(float a, const float *x, float *y, int n);
H
cat > "$out/share/doc/demo/README.txt" <<'T'
A small install tree for kpack-tui's demo: fat binaries with uncompressed and
compressed (CCOB) bundles, several translation units, -fgpu-rdc, a feature-flagged
target (gfx90a:xnack+), a static archive, kernel databases and symlinks.
T
ln -s ../../../bin/vadd_app "$out/share/doc/demo/example"
echo "make-demo: $(find "$out" | wc -l) entries in $out ($(du -sh "$out" | cut -f1))"
