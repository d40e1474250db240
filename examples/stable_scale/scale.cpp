// A libtorch stable-ABI op: out = a * scale + shift, float32, CPU.
// Only torch/csrc/stable/ and torch/headeronly/ headers are used, and the
// library is built with -DTORCH_TARGET_VERSION for torch 2.10, so one binary
// loads on every torch release from 2.10 on.
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

using torch::stable::Tensor;

Tensor scale_shift(const Tensor& a, double scale, double shift) {
  STD_TORCH_CHECK(a.scalar_type() == torch::headeronly::ScalarType::Float,
                  "scale_shift: float32 only");
  Tensor in = torch::stable::contiguous(a);
  Tensor out = torch::stable::empty_like(in);
  const float* src = static_cast<const float*>(in.data_ptr());
  float* dst = static_cast<float*>(out.data_ptr());
  const float s = static_cast<float>(scale), t = static_cast<float>(shift);
  for (int64_t i = 0; i < in.numel(); ++i) {
    dst[i] = src[i] * s + t;
  }
  return out;
}

STABLE_TORCH_LIBRARY(stable_scale, m) {
  m.def("scale_shift(Tensor a, float scale, float shift) -> Tensor");
}

STABLE_TORCH_LIBRARY_IMPL(stable_scale, CPU, m) {
  m.impl("scale_shift", TORCH_BOX(&scale_shift));
}
