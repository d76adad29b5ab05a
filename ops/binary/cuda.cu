#include "ops/binary/kernels.h"
#include "ops/common/elementwise.cuh"

namespace liftoff::cuda {

namespace {
template <class T>
ElementInput<T> input_of(const ElementOperand& o) {
  return o.tensor.defined() ? tensor_input<T>(o.tensor) : constant_input<T>(o.value);
}
}  // namespace

void binary_forward(BinaryOp op, double alpha, const ElementwisePlan& plan, const ElementOperand& a,
                    const ElementOperand& b, const Tensor& y) {
  dispatch_device_float(y.dtype(), "binary op", [&](auto tag) {
    using T = decltype(tag);
    visit_binary<acc_t<T>>(op, alpha, [&](const auto& f) {
      launch_elementwise(y.device().index, plan, static_cast<T*>(y.raw_data()), f, input_of<T>(a),
                         input_of<T>(b));
    });
  });
}

}  // namespace liftoff::cuda
