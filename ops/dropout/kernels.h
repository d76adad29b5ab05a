// Kernels behind dropout(): y = x * mask(seed, offset) / (1 - p), used for the forward and (with gy as x) the
// backward. x contiguous, y preallocated.
#pragma once
#include <cstdint>

#include "runtime/tensor.h"

namespace liftoff {
namespace cpu {
void dropout_apply(const Tensor& x, double p, uint64_t seed, uint64_t offset, const Tensor& y);
}  // namespace cpu
namespace cuda {
void dropout_apply(const Tensor& x, double p, uint64_t seed, uint64_t offset, const Tensor& y);
}  // namespace cuda
}  // namespace liftoff
