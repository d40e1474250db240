#pragma once
#include <cstdint>
#include <cuda_runtime.h>

namespace axpy {
void launch_axpy(int64_t n, float alpha, const float* x, const float* y, float* out, cudaStream_t stream);
}
