#pragma once
#include "runtime/tensor.h"

namespace liftoff {

// Elementwise comparisons -> a bool mask (DType::b8, read with to_vector<bool>() or to_vector<uint8_t>()),
// as torch.eq/ne/lt/le/gt/ge: shapes broadcast (ShapeError naming both shapes otherwise); any dtype (f32,
// f64, i32, i64, u8, bool on the CPU, also f16/bf16 on CUDA); operands of different dtypes compare in the
// promoted dtype (the wider floating one, else i64). A double scalar compares in the tensor's dtype for
// floating tensors (x_f32 > 0.1 compares with 0.1f, as PyTorch) and in double for integer ones. NaN is
// unequal to everything. Not differentiable (no gradient flows through a mask). The C++ operators ==, !=, <
// are not overloaded for tensors (they would change what comparing handles means): call these.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);

// torch.logical_not: x == 0 as a bool mask (NaN counts as true, so its negation is false); any dtype.
Tensor logical_not(const Tensor& x);
// ~mask for a bool mask (DTypeError for other dtypes: PyTorch's ~ is bitwise there).
Tensor operator~(const Tensor& mask);

}  // namespace liftoff
