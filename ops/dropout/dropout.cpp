#include "ops/dropout/dropout.h"

#include "ops/dropout/kernels.h"
#include "runtime/autograd.h"
#include "runtime/dispatch.h"

namespace liftoff {

Tensor dropout(const Tensor& input, double p, bool training, Generator& gen) {
  LIFTOFF_CHECK(input.defined(), ValueError, "dropout: input is an undefined tensor");
  LIFTOFF_CHECK(p >= 0.0 && p <= 1.0, ValueError, "dropout: probability p = ", p, " is outside [0, 1]");
  LIFTOFF_CHECK(is_floating(input.dtype()), DTypeError, "dropout: input ", shape_str(input.shape()),
                " has dtype ", dtype_name(input.dtype()), ", expected a floating type");
  if (!training || p == 0.0) return input;
  const Tensor x = input.contiguous();
  const PhiloxDraw draw = gen.next_draw(x.device());  // graph-safe on CUDA
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  LIFTOFF_DISPATCH(x.device(), dropout_apply, x, p, draw, y);
  if (should_record({x})) {
    record(y, "dropout", {x}, [p, draw](const Tensor& gy, const NeedsGrad&) {
      const Tensor grad_y = gy.contiguous();
      Tensor gx = Tensor::empty(grad_y.shape(), grad_y.dtype(), grad_y.device());
      LIFTOFF_DISPATCH(grad_y.device(), dropout_apply, grad_y, p, draw, gx);
      return std::vector<Tensor>{gx};
    });
  }
  return y;
}

}  // namespace liftoff
