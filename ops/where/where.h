#pragma once
#include "runtime/tensor.h"

namespace liftoff {

// torch.where(cond, a, b): a where cond, else b. cond is a bool mask (DType::b8; DTypeError otherwise); the
// three shapes broadcast together (ShapeError naming all three otherwise). a and b: any dtype (f32, f64,
// i32, i64, u8, bool on the CPU, also f16/bf16 on CUDA); two floating dtypes promote to the wider one, other
// mixes are a DTypeError. A double operand takes the other operand's dtype. Layout as the binary ops.
// Backward (floating a/b): ga = sum_to_shape(where(cond, gy, 0)), gb = sum_to_shape(where(cond, 0, gy)).
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, double b);
Tensor where(const Tensor& cond, double a, const Tensor& b);

// torch.masked_fill(x, mask, value): value where mask, else x. mask (b8) must broadcast to x's shape; the
// result has x's shape and dtype. Backward: gx = where(mask, 0, gy).
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

}  // namespace liftoff
