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
    // Restrict locals so the loop vectorises (the closure's pointers would be reloaded every element).
    parallel_for(0, a.numel(), 1 << 14, [pa, pb, out](int64_t lo, int64_t hi) {
      const T* __restrict x = pa + lo;
      const T* __restrict y = pb + lo;
      T* __restrict dst = out + lo;
      const int64_t n = hi - lo;
      for (int64_t i = 0; i < n; ++i) dst[i] = x[i] + y[i];
    });
  });
}

}  // namespace liftoff::cpu
