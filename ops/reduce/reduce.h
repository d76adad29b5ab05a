#pragma once
#include "runtime/tensor.h"

namespace liftoff {

// Sum and mean over all elements -> a one-element tensor of shape [] and x's dtype (f32/f64 on the CPU, also
// f16/bf16 on CUDA, accumulated in f32). Deterministic: the summation order depends only on the element count
// (fixed chunks on the CPU, a two-pass block reduction on CUDA, no atomics). The mean of an empty tensor is
// NaN. Backward: gx = gy (sum) or gy / numel (mean) in every element.
Tensor sum(const Tensor& x);
Tensor mean(const Tensor& x);

}  // namespace liftoff
