#include "ops/layer_norm/layer_norm.h"

#include <utility>

#include "ops/cast/cast.h"
#include "ops/layer_norm/row_norm.h"
#include "runtime/autocast.h"

namespace liftoff {

namespace {
bool is_half(DType t) {
  return t == DType::f16 || t == DType::bf16;
}
}  // namespace

Tensor layer_norm(const Tensor& input, const Shape& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
  LIFTOFF_CHECK(input.defined(), ValueError, "layer_norm: the input tensor is undefined");
  // Autocast's f32 list: a half CUDA input is normalised in f32 (and so are weight and bias).
  if (input.is_cuda() && is_half(input.dtype()) && autocast_enabled()) {
    auto to_f32 = [](const Tensor& t) { return t.defined() ? cast(t, DType::f32) : t; };
    return layer_norm(cast(input, DType::f32), normalized_shape, to_f32(weight), to_f32(bias), eps);
  }
  const Shape& xs = input.shape();
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  LIFTOFF_CHECK(is_floating(input.dtype()), DTypeError, "layer_norm: input ", shape_str(xs), " has dtype ",
                dtype_name(input.dtype()), "; expected a floating dtype");
  LIFTOFF_CHECK(k >= 1 && k <= input.dim() && Shape(xs.end() - k, xs.end()) == normalized_shape, ShapeError,
                "layer_norm: normalized_shape ", shape_str(normalized_shape),
                " must be the last sizes of input ", shape_str(xs), " (e.g. [", xs.empty() ? 0 : xs.back(),
                "] to normalise the last dimension)");
  for (const auto& [t, what] : {std::pair{&weight, "weight"}, std::pair{&bias, "bias"}}) {
    if (!t->defined()) continue;
    LIFTOFF_CHECK(t->shape() == normalized_shape, ShapeError, "layer_norm: ", what, " ",
                  shape_str(t->shape()), " must have normalized_shape ", shape_str(normalized_shape),
                  " (input ", shape_str(xs), ")");
    check_affine("layer_norm", input, *t, what);
  }
  LIFTOFF_CHECK(eps >= 0.0, ValueError, "layer_norm: eps must be non-negative, got ", eps);
  RowNormShape s;
  s.cols = shape_numel(normalized_shape);
  s.rows = shape_numel(Shape(xs.begin(), xs.end() - k));
  s.eps = eps;
  return row_norm("layer_norm", input, input.contiguous(), weight, bias, s, MemoryFormat::contiguous);
}

}  // namespace liftoff
