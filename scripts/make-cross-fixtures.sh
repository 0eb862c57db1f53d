#!/usr/bin/env bash
# Rebuild the fat binaries of other host CPUs (tests/cross/<machine>/) from HIP
# sources with clang-19: the host side compiled for aarch64 or ppc64le (ELFv2) with
# the Debian cross toolchains, the device side for two AMD GPU targets. No GPU and
# no ROCm for those machines is needed: clang-19 builds the bundles, the cross g++
# links them (GNU ld's 64 KiB max-page-size, as on real aarch64/ppc64le systems).
#
#   scripts/make-cross-fixtures.sh [OUT_DIR]      (default: tests/cross)
#
# Per machine:
#   libbulk.so  shared library, two TUs (vadd.hip, bulk.hip: 2 bundles, 2 wrappers);
#               its .hip_fatbin spans whole 64 KiB pages, so a pack removes bytes
#   app_pie     PIE executable, two TUs (vadd.hip, saxpy.hip) + main.cpp, linked
#               against a link-time libamdhip64.so.5 (hip_link.c)
#
# Needs: clang++-19, {aarch64,powerpc64le}-linux-gnu-{gcc,g++}
# (apt-get install clang-19 g++-aarch64-linux-gnu g++-powerpc64le-linux-gnu).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$here/tests/cross}
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cp "$here"/tests/fixtures/src/{vadd.hip,saxpy.hip,main.cpp} "$here"/tests/cross/src/* "$work"/
cd "$work"
for machine in aarch64 ppc64le; do
  case $machine in
    aarch64) triple=aarch64-linux-gnu ;;
    ppc64le) triple=powerpc64le-linux-gnu ;;
  esac
  for tool in clang++-19 "$triple-gcc" "$triple-g++"; do
    command -v "$tool" >/dev/null || { echo "make-cross-fixtures: missing $tool" >&2; exit 3; }
  done
  hip=(clang++-19 -x hip "--target=$triple" --rocm-path=/usr
    --rocm-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode -O2 -g0 -fPIC)
  d=$work/$machine
  mkdir -p "$d"
  "${hip[@]}" --offload-arch=gfx900 --offload-arch=gfx90a:xnack+ -c vadd.hip -o "$d/vadd_l.o"
  "${hip[@]}" --offload-arch=gfx900 --offload-arch=gfx90a:xnack+ -c bulk.hip -o "$d/bulk.o"
  "${hip[@]}" --offload-arch=gfx906 --offload-arch=gfx1030 -c vadd.hip -o "$d/vadd_e.o"
  "${hip[@]}" --offload-arch=gfx906 --offload-arch=gfx1030 -c saxpy.hip -o "$d/saxpy_e.o"
  "$triple-g++" -O2 -g0 -fPIE -c main.cpp -o "$d/main.o"
  "$triple-gcc" -O2 -g0 -fPIC -shared -Wl,-soname,libamdhip64.so.5 hip_link.c -o "$d/libamdhip64.so.5"
  ln -sf libamdhip64.so.5 "$d/libamdhip64.so"
  mkdir -p "$out/$machine"
  "$triple-g++" -shared -Wl,--build-id=none "$d/vadd_l.o" "$d/bulk.o" \
    -L"$d" -lamdhip64 -o "$out/$machine/libbulk.so"
  "$triple-g++" -pie -Wl,--build-id=none "$d/main.o" "$d/vadd_e.o" "$d/saxpy_e.o" \
    -L"$d" -lamdhip64 -o "$out/$machine/app_pie"
done
ls -l "$out"/*/
