#include "ops/common/elementwise.cuh"
#include "ops/where/kernels.h"

namespace liftoff::cuda {

void where_forward(const ElementwisePlan& plan, const Tensor& cond, const ElementOperand& a,
                   const ElementOperand& b, const Tensor& y) {
  dispatch_device_all(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    auto input_of = [](const ElementOperand& o) {
      return o.tensor.defined() ? tensor_input<T>(o.tensor) : constant_input<T>(o.value);
    };
    launch_elementwise(y.device().index, plan, static_cast<T*>(y.raw_data()), SelectFn{},
                       tensor_input<bool>(cond), input_of(a), input_of(b));
  });
}

}  // namespace liftoff::cuda
