// out = a * b + c, elementwise, float32.
#include "ext4.h"

#include <ATen/ops/empty_like.h>
#include <c10/util/Exception.h>

namespace ext4 {

at::Tensor muladd(const at::Tensor& a, const at::Tensor& b, double c) {
  TORCH_CHECK(a.sizes() == b.sizes(), "muladd: a and b must have the same shape");
  TORCH_CHECK(a.dtype() == at::kFloat && b.dtype() == at::kFloat, "muladd: float32 only");
  at::Tensor ac = a.contiguous();
  at::Tensor bc = b.contiguous();
  at::Tensor out = at::empty_like(ac);
  const float* pa = ac.const_data_ptr<float>();
  const float* pb = bc.const_data_ptr<float>();
  float* po = out.mutable_data_ptr<float>();
  const float fc = static_cast<float>(c);
  for (int64_t i = 0; i < out.numel(); ++i) {
    po[i] = pa[i] * pb[i] + fc;
  }
  return out;
}

}  // namespace ext4
