#include "ops/scale/scale.h"

#include "ops/scale/kernels.h"
#include "runtime/autograd.h"
#include "runtime/dispatch.h"

namespace liftoff {

Tensor scale(const Tensor& input, double factor) {
  LIFTOFF_CHECK(input.defined(), ValueError, "scale: input is an undefined tensor");
  LIFTOFF_CHECK(is_floating(input.dtype()), DTypeError, "scale: input ", shape_str(input.shape()),
                " has dtype ", dtype_name(input.dtype()), ", expected a floating type");
  const Tensor x = input.contiguous();
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  LIFTOFF_DISPATCH(x.device(), scale_forward, x, factor, y);
  if (should_record({x})) {
    record(y, "scale", {x}, [factor](const Tensor& gy, const NeedsGrad&) {
      const Tensor grad_y = gy.contiguous();
      Tensor gx = Tensor::empty(grad_y.shape(), grad_y.dtype(), grad_y.device());
      LIFTOFF_DISPATCH(grad_y.device(), scale_forward, grad_y, factor, gx);
      return std::vector<Tensor>{gx};
    });
  }
  return y;
}

}  // namespace liftoff
