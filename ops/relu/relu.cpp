#include "ops/relu/relu.h"

#include "ops/relu/kernels.h"
#include "runtime/autograd.h"
#include "runtime/dispatch.h"

namespace liftoff {

Tensor relu(const Tensor& input) {
  const Tensor x = input.contiguous();
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  LIFTOFF_DISPATCH(x.device(), relu_forward, x, y);
  if (should_record({x})) {
    record(y, "relu", {x}, [y_saved = y.detach()](const Tensor& gy, const NeedsGrad&) {
      const Tensor grad_y = gy.contiguous();
      Tensor gx = Tensor::empty(grad_y.shape(), grad_y.dtype(), grad_y.device());
      LIFTOFF_DISPATCH(grad_y.device(), relu_backward, y_saved, grad_y, gx);
      return std::vector<Tensor>{gx};
    });
  }
  return y;
}

}  // namespace liftoff
