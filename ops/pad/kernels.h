// Kernels behind pad()'s reflect/replicate backward: gy any strides (the output's shape), gx contiguous of
// x's shape, plan as the forward's, the last `padded` (<= 3) dims padded; floating dtypes.
#pragma once
#include "ops/common/remap.h"

namespace liftoff {
namespace cpu {
void pad_backward(const Tensor& gy, const RemapPlan& plan, int padded, const Tensor& gx);
}  // namespace cpu
namespace cuda {
void pad_backward(const Tensor& gy, const RemapPlan& plan, int padded, const Tensor& gx);
}  // namespace cuda
}  // namespace liftoff
