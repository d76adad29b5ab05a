#include "ops/relu/relu.h"

#include "ops/batch_norm2d/fusion.h"
#include "ops/common/layout.h"
#include "ops/conv2d/fusion.h"
#include "ops/relu/kernels.h"
#include "runtime/autograd.h"
#include "runtime/dispatch.h"

namespace liftoff {

Tensor relu(const Tensor& input) {
  // relu(batch_norm2d(x)) on CUDA: one normalize pass with the ReLU (ops/batch_norm2d/fusion.h).
  if (Tensor folded = fold_relu_into_batch_norm(input); folded.defined()) return folded;
  // Elementwise over the storage: a channels-last CUDA input stays channels-last (output and gradient).
  const MemoryFormat format = op_memory_format(input);
  // relu(conv2d(x, w, b)) on CUDA: the bias add and the ReLU in one pass (ops/conv2d/fusion.h); the node
  // below reads only the output, so the input is never needed with its bias.
  Tensor y = fold_relu_into_conv_bias(input);
  const Tensor x = y.defined() ? input : input.contiguous(format);
  if (!y.defined()) {
    y = Tensor::empty(x.shape(), x.dtype(), x.device(), format);
    LIFTOFF_DISPATCH(x.device(), relu_forward, x, y);
  }
  if (should_record({x})) {
    record(y, "relu", {x}, [y_saved = y.detach(), format](const Tensor& gy, const NeedsGrad&) {
      const Tensor grad_y = gy.contiguous(format);
      Tensor gx = Tensor::empty(grad_y.shape(), grad_y.dtype(), grad_y.device(), format);
      LIFTOFF_DISPATCH(grad_y.device(), relu_backward, y_saved, grad_y, gx);
      return std::vector<Tensor>{gx};
    });
  }
  return y;
}

}  // namespace liftoff
