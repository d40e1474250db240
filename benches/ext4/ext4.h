#pragma once
// The four-unit CPU extension of the build benchmark: three kernels and a
// registration unit, all on <torch/library.h> and ATen core headers (no
// <torch/extension.h>, so the library is Python-agnostic). The muladd kernel
// is the CPU example's (muladd.h), copied in by the benchmark.
#include <ATen/core/Tensor.h>

namespace ext4 {
at::Tensor scale_shift(const at::Tensor& x, double scale, double shift);
at::Tensor clamp_abs(const at::Tensor& x, double limit);
}  // namespace ext4
