#include "ops/binary/kernels.h"
#include "ops/common/elementwise_cpu.h"
#include "runtime/dispatch.h"

namespace liftoff::cpu {

namespace {
template <class T>
ElementInput<T> input_of(const ElementOperand& o) {
  return o.tensor.defined() ? tensor_input<T>(o.tensor) : constant_input<T>(static_cast<T>(o.value));
}
}  // namespace

void binary_forward(BinaryOp op, double alpha, const ElementwisePlan& plan, const ElementOperand& a,
                    const ElementOperand& b, const Tensor& y) {
  dispatch_float(y.dtype(), "binary op", [&](auto tag) {
    using T = decltype(tag);
    visit_binary<T>(
        op, alpha, [&](const auto& f) { elementwise(plan, y.data<T>(), f, input_of<T>(a), input_of<T>(b)); });
  });
}

void binary_backward(BinaryOp op, int which, double alpha, const ElementwisePlan& plan, const Tensor& gy,
                     const ElementOperand& a, const ElementOperand& b, const Tensor& g) {
  dispatch_float(g.dtype(), "binary op backward", [&](auto tag) {
    using T = decltype(tag);
    visit_binary_grad<T>(op, which, alpha, [&](const auto& f) {
      elementwise(plan, g.data<T>(), f, tensor_input<T>(gy), input_of<T>(a), input_of<T>(b));
    });
  });
}

}  // namespace liftoff::cpu
