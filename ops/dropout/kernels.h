// Kernels behind dropout(): y = x * mask(draw) / (1 - p), used for the forward and (with gy as x) the
// backward. x contiguous, y preallocated. The CPU gets draws by value; a CUDA draw may read its (seed,
// offset) on the device (PhiloxDraw::resolve, inside a captured graph).
#pragma once
#include <cstdint>

#include "runtime/philox.h"
#include "runtime/tensor.h"

namespace liftoff {
namespace cpu {
void dropout_apply(const Tensor& x, double p, const PhiloxDraw& draw, const Tensor& y);
}  // namespace cpu
namespace cuda {
void dropout_apply(const Tensor& x, double p, const PhiloxDraw& draw, const Tensor& y);
}  // namespace cuda
}  // namespace liftoff
