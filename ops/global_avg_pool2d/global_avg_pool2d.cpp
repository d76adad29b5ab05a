#include "ops/global_avg_pool2d/global_avg_pool2d.h"

#include "ops/common/layout.h"
#include "ops/global_avg_pool2d/kernels.h"
#include "runtime/autograd.h"
#include "runtime/dispatch.h"

namespace liftoff {

Tensor global_avg_pool2d(const Tensor& input) {
  LIFTOFF_CHECK(input.defined(), ValueError, "global_avg_pool2d: the input tensor is undefined");
  LIFTOFF_CHECK(input.dim() == 4, ShapeError, "global_avg_pool2d: expected a 4-D input [N, C, H, W], got ",
                shape_str(input.shape()));
  LIFTOFF_CHECK(is_floating(input.dtype()), DTypeError, "global_avg_pool2d: input ", shape_str(input.shape()),
                " has dtype ", dtype_name(input.dtype()), "; expected a floating dtype");
  LIFTOFF_CHECK(input.size(2) >= 1 && input.size(3) >= 1, ShapeError, "global_avg_pool2d: input ",
                shape_str(input.shape()), " must have a positive height and width");
  // CUDA reads a channels-last input as it is; the gradient then comes back channels-last too.
  const MemoryFormat format = op_memory_format(input);
  const Tensor x = input.contiguous(format);
  Tensor y = Tensor::empty({x.size(0), x.size(1)}, x.dtype(), x.device());
  LIFTOFF_DISPATCH(x.device(), global_avg_pool2d_forward, x, y);
  // Record against the caller's tensor: contiguous() of a strided input is a raw copy without grad edges.
  if (should_record({input})) {
    record(y, "global_avg_pool2d", {input},
           [in_shape = x.shape(), dtype = x.dtype(), format](const Tensor& gy_in, const NeedsGrad&) {
             LIFTOFF_CHECK(gy_in.shape() == Shape({in_shape[0], in_shape[1]}) && gy_in.dtype() == dtype,
                           ShapeError, "global_avg_pool2d backward: gradient ", shape_str(gy_in.shape()), " ",
                           dtype_name(gy_in.dtype()), " does not match the output [", in_shape[0], ", ",
                           in_shape[1], "] ", dtype_name(dtype));
             const Tensor gy = gy_in.contiguous();
             Tensor gx = Tensor::empty(in_shape, dtype, gy.device(), format);
             LIFTOFF_DISPATCH(gy.device(), global_avg_pool2d_backward, gy, gx);
             return std::vector<Tensor>{gx};
           });
  }
  return y;
}

}  // namespace liftoff
