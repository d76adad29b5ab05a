// Kernels behind adaptive_avg_pool2d(): x / gx [n, c, h, w] and y / gy [n, c, oh, ow], dense in one layout.
#pragma once
#include <cstdint>

#include "runtime/macros.h"
#include "runtime/tensor.h"

namespace liftoff {

struct AdaptivePoolArgs {
  int64_t n, c, h, w, oh, ow;
  bool channels_last = false;  // CUDA only; the CPU is always NCHW
};

// Bin o of `out` bins over `in` pixels covers [bin_start, bin_end): PyTorch's start_index / end_index.
// The bins that cover pixel i are, symmetrically, [bin_start(i, out, in), bin_end(i, out, in)).
LIFTOFF_HD int64_t bin_start(int64_t o, int64_t in, int64_t out) {
  return (o * in) / out;
}
LIFTOFF_HD int64_t bin_end(int64_t o, int64_t in, int64_t out) {
  return ((o + 1) * in + out - 1) / out;
}

namespace cpu {
void adaptive_avg_pool2d_forward(const AdaptivePoolArgs& a, const Tensor& x, const Tensor& y);
void adaptive_avg_pool2d_backward(const AdaptivePoolArgs& a, const Tensor& gy, const Tensor& gx);
}  // namespace cpu
namespace cuda {
void adaptive_avg_pool2d_forward(const AdaptivePoolArgs& a, const Tensor& x, const Tensor& y);
void adaptive_avg_pool2d_backward(const AdaptivePoolArgs& a, const Tensor& gy, const Tensor& gx);
}  // namespace cuda
}  // namespace liftoff
