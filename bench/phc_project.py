"""Write the phc benchmark project: four HIP files of uneven size (1, 2, 4 and 8
kernels, two template instantiations each) and a Makefile whose recipe passes the
jobserver (`+`) and runs through `$(PHC)` when it is set."""
import os, sys

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
sizes = [1, 2, 4, 8]
for k in sizes:
    with open(os.path.join(out, f"f{k}.hip"), "w") as f:
        f.write("#include <hip/hip_runtime.h>\n")
        for i in range(k):
            f.write(f"""template <int N> __global__ void k{i}(float *x, const float *y, int n) {{
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  float a = y[t];
#pragma unroll
  for (int j = 0; j < N; ++j) a = a * 1.0001f + sinf(a + {i}.0f * j);
  x[t] = a;
}}
template __global__ void k{i}<4>(float *, const float *, int);
template __global__ void k{i}<16>(float *, const float *, int);
""")
objs = " ".join(f"f{k}.o" for k in sizes)
with open(os.path.join(out, "Makefile"), "w") as f:
    f.write(f"""ARCHS := --offload-arch=gfx900 --offload-arch=gfx906 --offload-arch=gfx908 --offload-arch=gfx90a
OBJS := {objs}
all: $(OBJS)
%.o: %.hip
\t+$(PHC) hipcc -O2 -c $< $(ARCHS) -o $@
clean:
\trm -f $(OBJS)
""")
