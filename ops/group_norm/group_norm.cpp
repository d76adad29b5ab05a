#include "ops/group_norm/group_norm.h"

#include <utility>

#include "ops/cast/cast.h"
#include "ops/common/layout.h"
#include "ops/layer_norm/row_norm.h"
#include "runtime/autocast.h"

namespace liftoff {

Tensor group_norm(const Tensor& input, int64_t num_groups, const Tensor& weight, const Tensor& bias,
                  double eps) {
  LIFTOFF_CHECK(input.defined(), ValueError, "group_norm: the input tensor is undefined");
  const DType dt = input.dtype();
  if (input.is_cuda() && (dt == DType::f16 || dt == DType::bf16) && autocast_enabled()) {
    auto to_f32 = [](const Tensor& t) { return t.defined() ? cast(t, DType::f32) : t; };
    return group_norm(cast(input, DType::f32), num_groups, to_f32(weight), to_f32(bias), eps);
  }
  const Shape& xs = input.shape();
  LIFTOFF_CHECK(is_floating(dt), DTypeError, "group_norm: input ", shape_str(xs), " has dtype ",
                dtype_name(dt), "; expected a floating dtype");
  LIFTOFF_CHECK(input.dim() >= 2, ShapeError, "group_norm: expected an input [N, C, *], got ", shape_str(xs));
  LIFTOFF_CHECK(num_groups >= 1, ValueError, "group_norm: num_groups must be positive, got ", num_groups);
  const int64_t channels = xs[1];
  LIFTOFF_CHECK(channels % num_groups == 0, ShapeError, "group_norm: input ", shape_str(xs), " has ",
                channels, " channels, not divisible by num_groups = ", num_groups, "; pick a divisor of ",
                channels);
  for (const auto& [t, what] : {std::pair{&weight, "weight"}, std::pair{&bias, "bias"}}) {
    if (!t->defined()) continue;
    LIFTOFF_CHECK(t->shape() == Shape({channels}), ShapeError, "group_norm: ", what, " ",
                  shape_str(t->shape()), " must be [", channels, "] for input ", shape_str(xs));
    check_affine("group_norm", input, *t, what);
  }
  LIFTOFF_CHECK(eps >= 0.0, ValueError, "group_norm: eps must be non-negative, got ", eps);
  RowNormShape s;
  s.groups = num_groups;
  s.inner = shape_numel(Shape(xs.begin() + 2, xs.end()));
  s.rows = xs[0] * num_groups;
  s.cols = channels / num_groups * s.inner;
  s.eps = eps;
  if (s.inner == 0) s.inner = 1;  // no values at all (cols = 0): the kernels do not run
  // The kernels read NCHW; a channels-last CUDA input is converted, and so is the result back.
  const MemoryFormat format = op_memory_format(input);
  return row_norm("group_norm", input, input.contiguous(), weight, bias, s, format);
}

}  // namespace liftoff
