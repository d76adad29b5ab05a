#include "ops/scale/kernels.h"
#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace liftoff::cpu {

void scale_forward(const Tensor& x, double factor, const Tensor& y) {
  dispatch_float(x.dtype(), "scale", [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T* out = y.data<T>();
    const T f = static_cast<T>(factor);
    parallel_for(0, x.numel(), 1 << 14, [in, out, f](int64_t lo, int64_t hi) {
      const T* __restrict src = in + lo;
      T* __restrict dst = out + lo;
      const int64_t n = hi - lo;
      for (int64_t i = 0; i < n; ++i) dst[i] = src[i] * f;
    });
  });
}

}  // namespace liftoff::cpu
