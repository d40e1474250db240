// out = clamp(|x|, 0, limit), elementwise, float32.
#include "ext4.h"

#include <ATen/ops/empty_like.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>

namespace ext4 {

at::Tensor clamp_abs(const at::Tensor& x, double limit) {
  TORCH_CHECK(x.dtype() == at::kFloat, "clamp_abs: float32 only");
  TORCH_CHECK(limit >= 0, "clamp_abs: limit must be >= 0");
  at::Tensor xc = x.contiguous();
  at::Tensor out = at::empty_like(xc);
  const float* px = xc.const_data_ptr<float>();
  float* po = out.mutable_data_ptr<float>();
  const float l = static_cast<float>(limit);
  for (int64_t i = 0; i < out.numel(); ++i) {
    po[i] = std::min(std::fabs(px[i]), l);
  }
  return out;
}

}  // namespace ext4
