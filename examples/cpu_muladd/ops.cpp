// Registers muladd_example::muladd(Tensor a, Tensor b, float c) -> Tensor.
// Uses <torch/library.h>, not <torch/extension.h>: no CPython ABI is involved,
// so abicache keys this library as Python-agnostic.
#include <torch/library.h>

#include "muladd.h"

TORCH_LIBRARY(muladd_example, m) {
  m.def("muladd(Tensor a, Tensor b, float c) -> Tensor");
}

TORCH_LIBRARY_IMPL(muladd_example, CPU, m) {
  m.impl("muladd", &muladd::muladd_cpu);
}
