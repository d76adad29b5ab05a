#include <type_traits>

#include "ops/common/elementwise.cuh"
#include "ops/compare/kernels.h"

namespace liftoff::cuda {

void compare_forward(CompareOp op, const ElementwisePlan& plan, const Tensor& a, const ElementOperand& b,
                     const Tensor& y) {
  dispatch_device_all(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    visit_compare(op, [&](const auto& f) {
      bool* out = static_cast<bool*>(y.raw_data());
      if (b.tensor.defined()) {
        launch_elementwise(y.device().index, plan, out, f, tensor_input<T>(a), tensor_input<T>(b.tensor));
      } else if constexpr (std::is_integral_v<T>) {
        launch_elementwise(y.device().index, plan, out, f, tensor_input<T>(a),
                           constant_input<double>(b.value));
      } else {
        // Rounded to the tensor's dtype first, as the CPU and PyTorch do, then compared in its acc type.
        const double rounded = convert<double>(convert<acc_t<T>>(convert<T>(b.value)));
        launch_elementwise(y.device().index, plan, out, f, tensor_input<T>(a), constant_input<T>(rounded));
      }
    });
  });
}

}  // namespace liftoff::cuda
