// A stand-in for libamdhip64.so.5 that does at registration what CLR does: for each
// `__hipRegisterFatBinary(wrapper)` a binary's constructor makes *in a live
// process*, follow the wrapper's pointer (set by the dynamic loader) to the
// `.rocm_kpack_ref` marker in mapped memory and load the bundle the wrapper names
// through the reference kpack runtime (compiled into this library). Loaded code
// objects are written to $KPACK_STUB_OUT/<binary name>_<co_index>_<isa position>.co;
// the ISAs come from $KPACK_STUB_ISAS (comma-separated). One line per load goes to
// stderr: "stub <binary> co <i> isa <isa> ok <bytes>" or "... error <code>".
// A pointer into unmapped memory crashes the process, as it would crash CLR.
#include <rocm_kpack/kpack.h>

#include <dlfcn.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {
struct Wrapper {
  uint32_t magic;
  uint32_t version;
  const void* pointer;
  uint64_t reserved;
};
void* handles[64];
}  // namespace

extern "C" void** __hipRegisterFatBinary(const void* w_) {
  const Wrapper* w = static_cast<const Wrapper*>(w_);
  Dl_info info{};
  std::string path;
  if (dladdr(w_, &info) && info.dli_fname && info.dli_fname[0]) path = info.dli_fname;
  // The main program's dli_fname is argv[0]-like; the runtime wants the file.
  if (path.empty() || path.find('/') == std::string::npos || access(path.c_str(), R_OK) != 0) {
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n > 0) path.assign(buf, (size_t)n);
  }
  std::string name = path.substr(path.rfind('/') + 1);
  if (w->magic != 0x4B504948u) {  // not HIPK: a fat wrapper, nothing to load here
    std::fprintf(stderr, "stub %s fat magic %08x\n", name.c_str(), w->magic);
    return handles;
  }
  const char* isas = std::getenv("KPACK_STUB_ISAS");
  const char* out = std::getenv("KPACK_STUB_OUT");
  if (!isas || !out) return handles;
  std::vector<std::string> list;
  for (const char* p = isas; *p;) {
    const char* c = std::strchr(p, ',');
    list.emplace_back(p, c ? (size_t)(c - p) : std::strlen(p));
    p = c ? c + 1 : p + std::strlen(p);
  }
  static kpack_cache_t cache = nullptr;
  if (!cache && kpack_cache_create(&cache) != KPACK_SUCCESS) std::abort();
  uint32_t co = (uint32_t)w->reserved;
  for (size_t i = 0; i < list.size(); i++) {
    const char* archs[1] = {list[i].c_str()};
    void* code = nullptr;
    size_t size = 0;
    kpack_error_t e = kpack_load_code_object(cache, w->pointer, path.c_str(), co, archs, 1, &code, &size);
    if (e != KPACK_SUCCESS) {
      std::fprintf(stderr, "stub %s co %u isa %s error %d\n", name.c_str(), co, archs[0], (int)e);
      continue;
    }
    std::string file = std::string(out) + "/" + name + "_" + std::to_string(co) + "_" + std::to_string(i) + ".co";
    std::ofstream(file, std::ios::binary).write(static_cast<const char*>(code), (std::streamsize)size);
    std::fprintf(stderr, "stub %s co %u isa %s ok %zu\n", name.c_str(), co, archs[0], size);
    kpack_free_code_object(code);
  }
  return handles;
}

extern "C" void __hipUnregisterFatBinary(void**) {}
extern "C" void __hipRegisterFunction(void**, const void*, char*, const char*, int, void*, void*, void*,
                                      void*, int*) {}
extern "C" int __hipPushCallConfiguration(uint64_t, uint32_t, uint64_t, uint32_t, size_t, void*) { return 0; }
extern "C" int __hipPopCallConfiguration(void*, void*, size_t*, void*) { return 0; }
extern "C" int hipLaunchKernel(const void*, uint64_t, uint32_t, uint64_t, uint32_t, void**, size_t, void*) {
  return 0;
}
extern "C" int hipGetLastError() { return 0; }
