// The square pooling window shared by max_pool2d and avg_pool2d: its geometry and its argument checks.
#pragma once
#include <cstdint>

#include "runtime/tensor.h"

namespace liftoff {

struct PoolWindow {
  int64_t n, c, h, w;  // input
  int64_t oh, ow;      // output
  int64_t kernel, stride, padding;
  bool channels_last = false;  // CUDA: input and output NHWC (set by the front; the CPU kernels are NCHW)
};

// Checks x (4-D floating [N, C, H, W]), kernel >= 1, stride >= 1, 0 <= padding <= kernel / 2 (PyTorch's rule)
// and a non-empty output; errors name `op` and the input shape.
PoolWindow check_pool_window(const char* op, const Tensor& x, int64_t kernel, int64_t stride,
                             int64_t padding);

}  // namespace liftoff
