// Registers ext4_bench::{muladd, scale_shift, clamp_abs}.
#include <torch/library.h>

#include "ext4.h"
#include "muladd.h"

TORCH_LIBRARY(ext4_bench, m) {
  m.def("muladd(Tensor a, Tensor b, float c) -> Tensor");
  m.def("scale_shift(Tensor x, float scale, float shift) -> Tensor");
  m.def("clamp_abs(Tensor x, float limit) -> Tensor");
}

TORCH_LIBRARY_IMPL(ext4_bench, CPU, m) {
  m.impl("muladd", &muladd::muladd_cpu);
  m.impl("scale_shift", &ext4::scale_shift);
  m.impl("clamp_abs", &ext4::clamp_abs);
}
