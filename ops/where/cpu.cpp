#include "ops/common/elementwise_cpu.h"
#include "ops/where/kernels.h"
#include "runtime/dispatch.h"

namespace liftoff::cpu {

void where_forward(const ElementwisePlan& plan, const Tensor& cond, const ElementOperand& a,
                   const ElementOperand& b, const Tensor& y) {
  dispatch_numeric(y.dtype(), "where", [&](auto tag) {
    using T = decltype(tag);
    auto input_of = [](const ElementOperand& o) {
      return o.tensor.defined() ? tensor_input<T>(o.tensor) : constant_input<T>(static_cast<T>(o.value));
    };
    elementwise(plan, y.data<T>(), SelectFn{}, tensor_input<bool>(cond), input_of(a), input_of(b));
  });
}

}  // namespace liftoff::cpu
