#pragma once
#include <ATen/core/Tensor.h>

namespace muladd {
at::Tensor muladd_cpu(const at::Tensor& a, const at::Tensor& b, double c);
}
