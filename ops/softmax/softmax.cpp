#include "ops/softmax/softmax.h"

#include <algorithm>

#include "ops/cast/cast.h"
#include "ops/softmax/kernels.h"
#include "runtime/autocast.h"
#include "runtime/autograd.h"
#include "runtime/dispatch.h"

namespace liftoff {

namespace {

struct Columns {
  int64_t outer = 1, extent = 1, inner = 1;
};

Columns columns_of(const Shape& shape, int64_t dim) {
  Columns c;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    const int64_t size = shape[static_cast<size_t>(d)];
    if (d < dim) c.outer *= size;
    if (d == dim) c.extent = size;
    if (d > dim) c.inner *= size;
  }
  return c;
}

Tensor softmax_impl(const char* op, const Tensor& input, int64_t dim, bool log) {
  LIFTOFF_CHECK(input.defined(), ValueError, op, ": input is an undefined tensor");
  LIFTOFF_CHECK(is_floating(input.dtype()), DTypeError, op, ": input ", shape_str(input.shape()),
                " has dtype ", dtype_name(input.dtype()), ", expected a floating type");
  LIFTOFF_CHECK(input.is_cuda() || input.dtype() == DType::f32 || input.dtype() == DType::f64, DTypeError, op,
                ": input ", shape_str(input.shape()), " has dtype ", dtype_name(input.dtype()),
                "; the CPU computes f32 and f64 (cast first, or run on CUDA)");
  const int64_t rank = input.dim();
  const int64_t span = std::max<int64_t>(rank, 1);
  const int64_t d = dim < 0 ? dim + span : dim;
  LIFTOFF_CHECK(d >= 0 && d < span, ShapeError, op, ": dimension ", dim, " out of range for shape ",
                shape_str(input.shape()), " (expected -", span, " to ", span - 1, ")");
  // PyTorch's autocast runs softmax in f32 (and returns f32) for half inputs.
  const bool half = input.dtype() == DType::f16 || input.dtype() == DType::bf16;
  const Tensor x =
      (half && input.is_cuda() && autocast_enabled() ? cast(input, DType::f32) : input).contiguous();
  const Columns c = columns_of(x.shape(), d);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  LIFTOFF_DISPATCH(x.device(), softmax_forward, x.detach(), c.outer, c.extent, c.inner, log, y);
  if (should_record({x})) {
    record(y, op, {x}, [y_saved = y.detach(), c, log](const Tensor& gy, const NeedsGrad&) {
      const Tensor g = gy.contiguous();
      Tensor gx = Tensor::empty(g.shape(), g.dtype(), g.device());
      LIFTOFF_DISPATCH(g.device(), softmax_backward, y_saved, g, c.outer, c.extent, c.inner, log, gx);
      return std::vector<Tensor>{gx};
    });
  }
  return y;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) {
  return softmax_impl("softmax", x, dim, false);
}
Tensor log_softmax(const Tensor& x, int64_t dim) {
  return softmax_impl("log_softmax", x, dim, true);
}

}  // namespace liftoff
