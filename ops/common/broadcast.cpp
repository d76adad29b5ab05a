#include "ops/common/broadcast.h"

#include <algorithm>

#include "ops/reduce/reduce.h"
#include "runtime/autograd.h"

namespace liftoff {

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t sa = i < a.size() ? a[a.size() - 1 - i] : 1;
    const int64_t sb = i < b.size() ? b[b.size() - 1 - i] : 1;
    LIFTOFF_CHECK(sa == sb || sa == 1 || sb == 1, ShapeError, op, ": shapes ", shape_str(a), " and ",
                  shape_str(b), " do not broadcast (dimension ", static_cast<int64_t>(rank - 1 - i),
                  " of the result: ", sa, " vs ", sb,
                  "; sizes must match or be 1, aligned from the last dimension)");
    out[rank - 1 - i] = sa == 1 ? sb : sa;
  }
  return out;
}

bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] != 1 && from[i] != to[lead + i]) return false;
  }
  return true;
}

// broadcast_to is defined once, in ops/views (expand: the same stride-0 view, backward sum_to_size).

Tensor sum_to_shape(const Tensor& grad, const Shape& shape) {
  if (grad.shape() == shape) return grad;
  LIFTOFF_CHECK(broadcasts_to(shape, grad.shape()), ShapeError, "sum_to_shape: gradient of shape ",
                shape_str(grad.shape()), " is not a broadcast of ", shape_str(shape));
  const int64_t lead = grad.dim() - static_cast<int64_t>(shape.size());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < grad.dim(); ++d) {
    if (d < lead ||
        (shape[static_cast<size_t>(d - lead)] == 1 && grad.shape()[static_cast<size_t>(d)] != 1)) {
      dims.push_back(d);
    }
  }
  // Summing with keepdim leaves 1s where shape has them; the leading 1s then drop with a view.
  const Tensor summed = dims.empty() ? grad : sum(grad, dims, /*keepdim=*/true);
  return summed.contiguous().view(shape);
}

DType promote_floating(DType a, DType b, const char* op) {
  LIFTOFF_CHECK(is_floating(a) && is_floating(b), DTypeError, op, ": dtypes ", dtype_name(a), " and ",
                dtype_name(b), " are not both floating (f32, f64, f16, bf16)");
  if (a == b) return a;
  if (a == DType::f64 || b == DType::f64) return DType::f64;
  return DType::f32;  // f32 with a 16-bit type, or f16 with bf16
}

}  // namespace liftoff
