// Kernels behind interpolate(): x / gx and y / gy dense in one layout (contiguous; channels-last on CUDA).
#pragma once
#include <cstdint>

#include "runtime/tensor.h"

namespace liftoff {

struct UpsampleArgs {
  int64_t n, c, h, w, oh, ow;
  bool bilinear = false;
  bool align_corners = false;
  bool channels_last = false;  // x, y, gx, gy are channels-last (CUDA only; the CPU is always NCHW)
  // Source-coordinate scales per axis, already rounded to the computation type (float, or double for f64
  // bilinear) exactly as PyTorch computes them.
  double scale_h = 1.0, scale_w = 1.0;
};

namespace cpu {
void upsample_forward(const UpsampleArgs& a, const Tensor& x, const Tensor& y);
void upsample_backward(const UpsampleArgs& a, const Tensor& gy, const Tensor& gx);
}  // namespace cpu
namespace cuda {
void upsample_forward(const UpsampleArgs& a, const Tensor& x, const Tensor& y);
void upsample_backward(const UpsampleArgs& a, const Tensor& gy, const Tensor& gx);
}  // namespace cuda
}  // namespace liftoff
