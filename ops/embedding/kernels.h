// Kernels behind embedding(): indices (i64/i32) and weight / gy contiguous; out [n, dim], gweight [num, dim].
// padding < 0 means none (the front wraps a negative padding_idx).
#pragma once
#include <cstdint>

#include "runtime/tensor.h"

namespace liftoff {
namespace cpu {
// Indices are validated by the front.
void embedding_forward(const Tensor& indices, const Tensor& weight, const Tensor& out);
void embedding_backward(const Tensor& indices, const Tensor& gy, int64_t padding, const Tensor& gweight);
}  // namespace cpu
namespace cuda {
void embedding_forward(const Tensor& indices, const Tensor& weight, const Tensor& out);
void embedding_backward(const Tensor& indices, const Tensor& gy, int64_t padding, const Tensor& gweight);
}  // namespace cuda
}  // namespace liftoff
