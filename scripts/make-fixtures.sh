#!/usr/bin/env bash
# Rebuild the real fixture binaries from tests/fixtures/src with Debian's hipcc
# (clang 15, uncompressed bundles) and clang++-19 + lld-19 (--offload-compress, CCOB).
#
#   scripts/make-fixtures.sh [OUT_DIR]      (default: tests/fixtures/bin)
#
# Needs: hipcc, clang++-19, lld-19, clang-offload-bundler-15, objcopy, cc, ar
# (apt-get install hipcc clang-19 lld-19 binutils gcc). No GPU is needed.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
src=$here/tests/fixtures/src
out=${1:-$here/tests/fixtures/bin}
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for tool in hipcc clang++-19 clang-19 ld.lld-19 lld-link-19 clang-offload-bundler-15 objcopy cc ar; do
  command -v "$tool" >/dev/null || { echo "make-fixtures: missing $tool" >&2; exit 3; }
done

# Reproducible-ish: no build ids, fixed paths in debug info are avoided (-g0).
common=(-O2 -g0 -fPIC -Wl,--build-id=none)
# hipcc's link step chatters (GPU probing, linker notes): show it only on failure.
hip15() { hipcc "$@" >"$work/log" 2>&1 || { cat "$work/log" >&2; return 1; }; }
cd "$work"
cp "$src"/* .

# Host part, compiled by the plain C++ compiler so it carries no bundle.
c++ -O2 -g0 -fPIC -c main.cpp -o main.o

# 1. Shared library, one TU, a feature-flagged target.
hipcc -O2 -g0 -fPIC -c --offload-arch=gfx900 --offload-arch=gfx90a:xnack+ vadd.hip -o vadd_a.o
hip15 "${common[@]}" -shared vadd_a.o -o libvadd.so

# 2. PIE executable, two TUs (two bundles, two wrappers).
hipcc -O2 -g0 -fPIC -c --offload-arch=gfx900 --offload-arch=gfx906 vadd.hip -o vadd_b.o
hipcc -O2 -g0 -fPIC -c --offload-arch=gfx900 --offload-arch=gfx906 saxpy.hip -o saxpy_b.o
hip15 "${common[@]}" -pie main.o vadd_b.o saxpy_b.o -o app_pie

# 3. Non-PIE executable, two TUs, other archs.
hipcc -O2 -g0 -c --offload-arch=gfx908 --offload-arch=gfx1030 vadd.hip -o vadd_c.o
hipcc -O2 -g0 -c --offload-arch=gfx908 --offload-arch=gfx1030 saxpy.hip -o saxpy_c.o
c++ -O2 -g0 -c main.cpp -o main_nopie.o
hip15 -O2 -g0 -no-pie -Wl,--build-id=none main_nopie.o vadd_c.o saxpy_c.o -o app_nopie

# 4. -fgpu-rdc: two TUs device-linked into one bundle; two wrappers share it.
hipcc -O2 -g0 -fPIC -fgpu-rdc -c --offload-arch=gfx900 --offload-arch=gfx906 vadd.hip -o vadd_rdc.o
hipcc -O2 -g0 -fPIC -fgpu-rdc -c --offload-arch=gfx900 --offload-arch=gfx906 saxpy.hip -o saxpy_rdc.o
hip15 "${common[@]}" -fgpu-rdc --offload-arch=gfx900 --offload-arch=gfx906 -shared vadd_rdc.o saxpy_rdc.o -o librdc.so

# 5. Compressed bundles (CCOB) from clang 19, two TUs.
clang19=(clang++-19 -x hip --rocm-path=/usr --rocm-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode
  -O2 -g0 -fPIC --offload-compress --offload-arch=gfx900 --offload-arch=gfx1030)
"${clang19[@]}" -c vadd.hip -o vadd_z.o
"${clang19[@]}" -c saxpy.hip -o saxpy_z.o
clang++-19 -fuse-ld=lld-19 -shared -Wl,--build-id=none vadd_z.o saxpy_z.o -L/usr/lib/x86_64-linux-gnu -lamdhip64 -o libzkern.so

# 6. Build-tree shapes: a relocatable object and a static archive.
cp vadd_b.o vadd.o
ar rcsD libkern.a vadd_b.o saxpy_b.o

# 7. A standalone bundle file and a raw code object.
objcopy -O binary --only-section=.hip_fatbin libvadd.so kernels.hipfb
clang-offload-bundler-15 -unbundle -type=o -input=kernels.hipfb \
  -targets=hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+ -output=vadd-gfx90a.co

# 8. A PE/COFF DLL with a .hip_fat section and a .hipFatB wrapper, built with
#    clang-19 for Windows and lld-link-19 (no Windows libraries needed).
cat > fat_pe.s <<'ASM'
.section .hip_fat,"dr"
.p2align 12
.globl __hip_fatbin
__hip_fatbin:
.incbin "kernels.hipfb"
.section .hipFatB,"dw"
.p2align 3
.globl __hip_fatbin_wrapper
__hip_fatbin_wrapper:
.long 0x48495046, 1
.quad __hip_fatbin
.quad 0
ASM
echo 'int __declspec(dllexport) kpack_pe_fixture(void) { return 42; }' > dll.c
clang-19 --target=x86_64-pc-windows-msvc -c dll.c -o dll.obj
clang-19 --target=x86_64-pc-windows-msvc -c fat_pe.s -o fat_pe.obj
lld-link-19 /dll /noentry /Brepro dll.obj fat_pe.obj /out:kfat.dll >/dev/null

# 9. A host-only (kpack'd) shape from a plain C compiler.
cc -O2 -g0 -Wl,--build-id=none hostonly.c -o hostonly

# 10. Kernels for the code-object reader: templates, LDS, scratch, VGPR spills; one
#     library with plain bundles (hipcc), one with compressed ones (clang 19).
hipcc -O2 -g0 -fPIC -c --offload-arch=gfx900 --offload-arch=gfx90a kernels.hip -o kernels_a.o
hip15 "${common[@]}" -shared kernels_a.o -o libkernels.so
"${clang19[@]/--offload-arch=gfx900/--offload-arch=gfx90a:xnack+}" -c kernels.hip -o kernels_z.o
clang++-19 -fuse-ld=lld-19 -shared -Wl,--build-id=none kernels_z.o -L/usr/lib/x86_64-linux-gnu -lamdhip64 -o libkernels_z.so

# 11. A code object v6 bundle file (clang 19; no device libraries for v6 here).
clang++-19 -x hip -nogpulib -nogpuinc -O2 -g0 --offload-arch=gfx1030 -mcode-object-version=6 \
  --offload-device-only -c v6.hip -o v6-gfx1030.hipfb 2>/dev/null

# 13. Real HIP PE images (Windows): the same two kernels for gfx900 and gfx1030, built
#     by clang-19 for x86_64-pc-windows-msvc without the HIP headers (kpe.hip declares
#     what it needs), linked by lld-link-19 with stand-ins for the runtime: a DLL with
#     plain bundles, one with a compressed (CCOB) bundle, and an EXE.
hipwin=(clang++-19 -x hip --target=x86_64-pc-windows-msvc -nogpulib -nogpuinc -O2
        --offload-arch=gfx900 --offload-arch=gfx1030)
"${hipwin[@]}" -c kpe.hip -o kpe.obj
"${hipwin[@]}" --offload-compress -c kpe.hip -o kpez.obj
clang-19 --target=x86_64-pc-windows-msvc -O2 -c pe_stubs.c -o pe_stubs.obj
lld-link-19 /dll /noentry /Brepro /nodefaultlib kpe.obj pe_stubs.obj /out:libkpe.dll >/dev/null
lld-link-19 /dll /noentry /Brepro /nodefaultlib kpez.obj pe_stubs.obj /out:libkpez.dll >/dev/null
lld-link-19 /subsystem:console /entry:kpack_pe_main /Brepro /nodefaultlib kpe.obj pe_stubs.obj \
  /out:kpe.exe >/dev/null

# 12. A shared library without device code (a plain member of the test wheels).
cc -O2 -g0 -fPIC -shared -Wl,--build-id=none plain.c -o libplain.so

for f in libkpe.dll libkpez.dll kpe.exe libplain.so libvadd.so app_pie app_nopie librdc.so libzkern.so vadd.o libkern.a kernels.hipfb vadd-gfx90a.co hostonly kfat.dll libkernels.so libkernels_z.so v6-gfx1030.hipfb; do
  cp "$f" "$out/$f"
done
chmod 0644 "$out"/*.o "$out"/*.a "$out"/*.hipfb "$out"/*.co "$out"/*.dll
# 13. Device code embedded in a library's data (built from the blobs just written).
bash "$here/scripts/make-embedded.sh" "$out" >/dev/null
echo "make-fixtures: wrote $(ls "$out" | wc -l) files to $out ($(du -sh "$out" | cut -f1))"
