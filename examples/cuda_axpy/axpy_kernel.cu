// out = alpha * x + y on float32 CUDA tensors.
#include <cuda_runtime.h>

#include "axpy.h"

namespace {
__global__ void axpy_kernel(int64_t n, float alpha, const float* x, const float* y, float* out) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    out[i] = alpha * x[i] + y[i];
  }
}
}  // namespace

namespace axpy {
void launch_axpy(int64_t n, float alpha, const float* x, const float* y, float* out, cudaStream_t stream) {
  if (n == 0) return;
  const int threads = 256;
  const int64_t blocks = (n + threads - 1) / threads;
  axpy_kernel<<<static_cast<unsigned>(blocks), threads, 0, stream>>>(n, alpha, x, y, out);
}
}  // namespace axpy
