#include "swish.h"

#include "ops/reduce/reduce.h"
#include "ops/reshape/reshape.h"
#include "runtime/autograd.h"
#include "runtime/dispatch.h"
#include "swish_kernels.h"

namespace example {

using namespace liftoff;

Tensor swish(const Tensor& input, const Tensor& beta_input) {
  // Checks first, naming the op, the shapes, dtypes and devices: kernels may assume all of this.
  LIFTOFF_CHECK(input.defined() && beta_input.defined(), ValueError, "swish: undefined input");
  LIFTOFF_CHECK(input.dtype() == DType::f32 || input.dtype() == DType::f64, DTypeError, "swish: x ",
                shape_str(input.shape()), " has dtype ", dtype_name(input.dtype()), ", expected f32 or f64");
  LIFTOFF_CHECK(beta_input.numel() == 1, ShapeError, "swish: beta must hold one element, got shape ",
                shape_str(beta_input.shape()));
  LIFTOFF_CHECK(beta_input.dtype() == input.dtype() && beta_input.device() == input.device(), DTypeError,
                "swish: beta (", dtype_name(beta_input.dtype()), " on ", beta_input.device().str(),
                ") must match x (", dtype_name(input.dtype()), " on ", input.device().str(), ")");
  const Tensor x = input.contiguous();
  const Tensor beta = beta_input.contiguous();
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  LIFTOFF_DISPATCH(x.device(), swish_forward, x, beta, y);  // cpu:: or cuda::swish_forward
  if (should_record({x, beta})) {
    // The closure keeps only what backward needs, detached (never y: it would hold its own node alive).
    record(y, "swish", {x, beta},
           [x_saved = x.detach(), beta_saved = beta.detach()](const Tensor& gy, const NeedsGrad& needs) {
             const Tensor grad_y = gy.contiguous();
             Tensor grad_x = Tensor::empty(grad_y.shape(), grad_y.dtype(), grad_y.device());
             Tensor grad_beta_elements =
                 needs[1] ? Tensor::empty(grad_y.shape(), grad_y.dtype(), grad_y.device()) : Tensor();
             LIFTOFF_DISPATCH(grad_y.device(), swish_backward, x_saved, beta_saved, grad_y, grad_x,
                              grad_beta_elements);
             // Library ops compose inside a backward too: the reduction runs on the device, no host sync.
             Tensor grad_beta = needs[1] ? reshape(sum(grad_beta_elements), beta_saved.shape()) : Tensor();
             return std::vector<Tensor>{needs[0] ? grad_x : Tensor(), grad_beta};
           });
  }
  return y;
}

}  // namespace example
