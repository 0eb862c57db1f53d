// A kernel with a 96 KiB table: its code objects are large enough that the device
// code of the library spans whole 64 KiB pages, which the host-only rewrite removes
// from the file (aarch64 and ppc64le are linked for 64 KiB pages).
#include <hip/hip_runtime.h>

#define ENTRIES 24576
__device__ const unsigned table[ENTRIES] = {2, 3, 5, 7, 11, 13};

__global__ void lookup(unsigned *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = table[(i * 2654435761u) % ENTRIES];
}

extern "C" int launch_lookup(unsigned *out, int n) {
  hipLaunchKernelGGL(lookup, dim3((n + 255) / 256), dim3(256), 0, 0, out, n);
  return hipGetLastError() == hipSuccess ? 0 : 1;
}
