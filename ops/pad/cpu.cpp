#include "ops/common/host_types.h"
#include "ops/pad/kernels.h"
#include "ops/pad/pad_backward.h"
#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace liftoff::cpu {

void pad_backward(const Tensor& gy, const RemapPlan& plan, int padded, const Tensor& gx) {
  const Strided xs = strided_of(gx, "pad backward");
  const Strided gs = strided_of(gy, "pad backward");
  dispatch_all(gy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) {
      throw DTypeError(str_cat("pad backward: dtype ", dtype_name(gy.dtype()), " is not a floating type"));
    } else {
      using A = host_acc_t<T>;
      const T* g = static_cast<const T*>(gy.raw_data());
      T* out = static_cast<T*>(gx.raw_data());
      auto load = [g](int64_t off) { return host_convert<A>(g[off]); };
      parallel_for(0, gx.numel(), 1 << 12, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) {
          out[i] = host_convert<T>(pad_backward_element<A>(xs, gs, plan, padded, i, load));
        }
      });
    }
  });
}

}  // namespace liftoff::cpu
