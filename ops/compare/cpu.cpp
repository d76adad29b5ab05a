#include <type_traits>

#include "ops/common/elementwise_cpu.h"
#include "ops/compare/kernels.h"
#include "runtime/dispatch.h"

namespace liftoff::cpu {

void compare_forward(CompareOp op, const ElementwisePlan& plan, const Tensor& a, const ElementOperand& b,
                     const Tensor& y) {
  dispatch_numeric(a.dtype(), "comparison", [&](auto tag) {
    using T = decltype(tag);
    visit_compare(op, [&](const auto& f) {
      if (b.tensor.defined()) {
        elementwise(plan, y.data<bool>(), f, tensor_input<T>(a), tensor_input<T>(b.tensor));
      } else {
        // A floating tensor compares with the scalar rounded to its dtype; integers compare in double.
        using C = std::conditional_t<std::is_floating_point_v<T>, T, double>;
        elementwise(plan, y.data<bool>(), f, tensor_input<T>(a), constant_input<C>(static_cast<C>(b.value)));
      }
    });
  });
}

}  // namespace liftoff::cpu
