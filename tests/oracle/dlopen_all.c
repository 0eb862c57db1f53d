// dlopen each library given (RTLD_NOW: every constructor runs, so every HIP
// registration happens); exit 1 naming the first that fails to load.
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char** argv) {
  for (int i = 1; i < argc; i++) {
    if (!dlopen(argv[i], RTLD_NOW | RTLD_GLOBAL)) {
      fprintf(stderr, "dlopen %s: %s\n", argv[i], dlerror());
      return 1;
    }
  }
  return 0;
}
