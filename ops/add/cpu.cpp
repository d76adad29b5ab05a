#include "ops/add/kernels.h"
#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace liftoff::cpu {

void add_forward(const Tensor& a, const Tensor& b, const Tensor& y) {
  dispatch_float(a.dtype(), "add", [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* out = y.data<T>();
    parallel_for(0, a.numel(), 1 << 14, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) out[i] = pa[i] + pb[i];
    });
  });
}

}  // namespace liftoff::cpu
