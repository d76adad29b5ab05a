#pragma once
#include <vector>

#include "runtime/tensor.h"

namespace liftoff {

// Adaptive average pooling, as PyTorch's F.adaptive_avg_pool2d(input, output_size): input [N, C, H, W] or
// [C, H, W]; output_size {oh, ow} or {s} (square), each >= 1 or -1 for "keep the input's size" (PyTorch's
// None). Output [N, C, oh, ow] (or [C, oh, ow]); bin o along an axis of size `in` averages the input range
// [floor(o * in / out), ceil((o + 1) * in / out)), exactly PyTorch's boundaries (bins may overlap when out
// does not divide in). Dtypes: f32/f64 on the CPU, also f16/bf16 on CUDA (f32 accumulation). A channels-last
// CUDA input gives a channels-last output. Backward: each output's gradient divided by its bin's size, added
// to the bin's pixels (CUDA: a gather per input pixel, no atomics).
Tensor adaptive_avg_pool2d(const Tensor& input, const std::vector<int64_t>& output_size);

}  // namespace liftoff
