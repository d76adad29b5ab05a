#include "ops/reduce/reduce.h"

#include <limits>

#include "ops/reduce/kernels.h"
#include "runtime/autograd.h"
#include "runtime/dispatch.h"

namespace liftoff {

namespace {
Tensor scaled_sum(const char* op, const Tensor& input, bool average) {
  LIFTOFF_CHECK(input.defined(), ValueError, op, ": input is an undefined tensor");
  LIFTOFF_CHECK(is_floating(input.dtype()), DTypeError, op, ": input ", shape_str(input.shape()),
                " has dtype ", dtype_name(input.dtype()), ", expected a floating type");
  const Tensor x = input.contiguous();
  const int64_t n = x.numel();
  const double factor =
      !average ? 1.0 : (n > 0 ? 1.0 / static_cast<double>(n) : std::numeric_limits<double>::quiet_NaN());
  Tensor y = Tensor::empty({}, x.dtype(), x.device());
  LIFTOFF_DISPATCH(x.device(), sum_forward, x, factor, y);
  if (should_record({x})) {
    record(y, op, {x}, [factor, shape = x.shape()](const Tensor& gy, const NeedsGrad&) {
      const Tensor grad_y = gy.contiguous();
      Tensor gx = Tensor::empty(shape, grad_y.dtype(), grad_y.device());
      LIFTOFF_DISPATCH(grad_y.device(), sum_backward, grad_y, factor, gx);
      return std::vector<Tensor>{gx};
    });
  }
  return y;
}
}  // namespace

Tensor sum(const Tensor& x) {
  return scaled_sum("sum", x, false);
}
Tensor mean(const Tensor& x) {
  return scaled_sum("mean", x, true);
}

}  // namespace liftoff
