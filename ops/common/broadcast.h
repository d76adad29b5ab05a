// Broadcasting (NumPy/PyTorch rules) for the elementwise ops and their gradients; public, for any op that
// broadcasts.
#pragma once
#include <vector>

#include "runtime/tensor.h"

namespace liftoff {

// The broadcast shape of a and b: aligned at the trailing dimension, each pair of sizes equal or one of them
// 1 (a missing leading dimension counts as 1), as torch.broadcast_shapes. ShapeError naming `op` and both
// shapes otherwise.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// True when `from` broadcasts to exactly `to` (to is the broadcast of from and to).
bool broadcasts_to(const Shape& from, const Shape& to);

// x viewed with the broadcast shape `shape` (torch.broadcast_to / expand): no copy, stride 0 along the
// broadcast dimensions; differentiable (backward: sum_to_shape). The view is not contiguous: ops read it
// through their strides, contiguous() materialises it. ShapeError when x does not broadcast to shape.
Tensor broadcast_to(const Tensor& x, const Shape& shape);  // defined in ops/views/views.cpp

// Sums a gradient of a broadcast result back to an operand's shape: sums the leading dimensions grad has
// beyond `shape` and (keeping them) the dimensions where shape has 1 and grad does not. Returns grad itself
// when the shapes are equal. Every binary op's backward uses it. Differentiable (built on sum over dims).
Tensor sum_to_shape(const Tensor& grad, const Shape& shape);

// The dtype mixed floating operands compute in, as PyTorch's type promotion: the wider type (f64 > f32 >
// f16/bf16; f16 with bf16 gives f32). DTypeError naming op for a non-floating operand.
DType promote_floating(DType a, DType b, const char* op);

}  // namespace liftoff
