// Loads every code object of a host-only binary through the reference kpack runtime
// (../shared/oracles/rocm-kpack-runtime), the way the HIP runtime (CLR) calls it:
// for each `.hipFatBinSegment` wrapper whose magic is HIPK, the wrapper's pointer
// (the `.rocm_kpack_ref` marker, here in the mapped file), the binary's path, the
// bundle index from `reserved1`, and the device's ISA list go to
// kpack_load_code_object. Each loaded code object is written to
// OUTDIR/<co_index>_<n>.co, where n is the position of the ISA in the argument list.
//
//   load_all BINARY OUTDIR ISA [ISA...]
//
// Prints one line per (wrapper, ISA): "co <i> isa <isa> ok <bytes>" or
// "co <i> isa <isa> error <code>". Exit 0 when every load succeeded, 1 otherwise,
// 2 on bad input.
#include <rocm_kpack/kpack.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <elf.h>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: load_all BINARY OUTDIR ISA [ISA...]\n");
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  std::vector<char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (data.size() < sizeof(Elf64_Ehdr)) return 2;
  Elf64_Ehdr eh;
  std::memcpy(&eh, data.data(), sizeof eh);
  if (eh.e_shoff == 0 || eh.e_shoff + eh.e_shnum * sizeof(Elf64_Shdr) > data.size()) return 2;
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  std::memcpy(sh.data(), data.data() + eh.e_shoff, eh.e_shnum * sizeof(Elf64_Shdr));
  const char* names = data.data() + sh[eh.e_shstrndx].sh_offset;
  const Elf64_Shdr* seg = nullptr;
  for (auto& s : sh)
    if (std::strcmp(names + s.sh_name, ".hipFatBinSegment") == 0) seg = &s;
  if (!seg) {
    std::fprintf(stderr, "no .hipFatBinSegment\n");
    return 2;
  }
  // Where an address of the image lies in the file (the marker's section).
  auto at = [&](uint64_t vaddr) -> const char* {
    for (auto& s : sh)
      if (s.sh_type != SHT_NOBITS && s.sh_addr && vaddr >= s.sh_addr && vaddr < s.sh_addr + s.sh_size)
        return data.data() + s.sh_offset + (vaddr - s.sh_addr);
    return nullptr;
  };
  kpack_cache_t cache = nullptr;
  if (kpack_cache_create(&cache) != KPACK_SUCCESS) return 2;
  int failures = 0;
  for (uint64_t off = 0; off + 24 <= seg->sh_size; off += 24) {
    const char* w = data.data() + seg->sh_offset + off;
    uint32_t magic;
    uint64_t pointer, reserved1;
    std::memcpy(&magic, w, 4);
    std::memcpy(&pointer, w + 8, 8);
    std::memcpy(&reserved1, w + 16, 8);
    if (magic != 0x4B504948u) {  // "HIPK"
      std::printf("co ? wrapper %llu magic %08x is not HIPK\n", (unsigned long long)(off / 24), magic);
      failures++;
      continue;
    }
    const char* marker = at(pointer);
    uint32_t co = (uint32_t)reserved1;
    for (int i = 3; i < argc; i++) {
      const char* archs[1] = {argv[i]};
      void* code = nullptr;
      size_t size = 0;
      kpack_error_t e = kpack_load_code_object(cache, marker, argv[1], co, archs, 1, &code, &size);
      if (e != KPACK_SUCCESS) {
        std::printf("co %u isa %s error %d\n", co, argv[i], (int)e);
        failures++;
        continue;
      }
      std::string path = std::string(argv[2]) + "/" + std::to_string(co) + "_" + std::to_string(i - 3) + ".co";
      std::ofstream(path, std::ios::binary).write(static_cast<const char*>(code), (std::streamsize)size);
      std::printf("co %u isa %s ok %zu\n", co, argv[i], size);
      kpack_free_code_object(code);
    }
  }
  kpack_cache_destroy(cache);
  return failures ? 1 : 0;
}
