// Registers cuda_axpy::axpy(float alpha, Tensor x, Tensor y) -> Tensor for CUDA tensors.
#include <ATen/core/Tensor.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "axpy.h"

namespace {
at::Tensor axpy_cuda(double alpha, const at::Tensor& x, const at::Tensor& y) {
  TORCH_CHECK(x.is_cuda() && y.is_cuda(), "axpy: CUDA tensors only");
  TORCH_CHECK(x.sizes() == y.sizes(), "axpy: x and y must have the same shape");
  TORCH_CHECK(x.dtype() == at::kFloat && y.dtype() == at::kFloat, "axpy: float32 only");
  c10::cuda::CUDAGuard guard(x.device());
  at::Tensor xc = x.contiguous(), yc = y.contiguous();
  at::Tensor out = at::empty_like(xc);
  axpy::launch_axpy(out.numel(), static_cast<float>(alpha), xc.const_data_ptr<float>(),
                    yc.const_data_ptr<float>(), out.mutable_data_ptr<float>(),
                    at::cuda::getCurrentCUDAStream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}
}  // namespace

TORCH_LIBRARY(cuda_axpy, m) {
  m.def("axpy(float alpha, Tensor x, Tensor y) -> Tensor");
}

TORCH_LIBRARY_IMPL(cuda_axpy, CUDA, m) {
  m.impl("axpy", &axpy_cuda);
}
