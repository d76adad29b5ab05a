// The binary ops' gradient kernels, apart from the forward ones so the two compile in parallel.
#include "ops/binary/kernels.h"
#include "ops/common/elementwise.cuh"

namespace liftoff::cuda {

void binary_backward(BinaryOp op, int which, double alpha, const ElementwisePlan& plan, const Tensor& gy,
                     const ElementOperand& a, const ElementOperand& b, const Tensor& g) {
  dispatch_device_float(g.dtype(), "binary op backward", [&](auto tag) {
    using T = decltype(tag);
    auto input_of = [](const ElementOperand& o) {
      return o.tensor.defined() ? tensor_input<T>(o.tensor) : constant_input<T>(o.value);
    };
    visit_binary_grad<acc_t<T>>(op, which, alpha, [&](const auto& f) {
      launch_elementwise(g.device().index, plan, static_cast<T*>(g.raw_data()), f, tensor_input<T>(gy),
                         input_of(a), input_of(b));
    });
  });
}

}  // namespace liftoff::cuda
