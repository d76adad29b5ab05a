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
    parallel_for(0, x.numel(), 1 << 14, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) out[i] = in[i] * f;
    });
  });
}

}  // namespace liftoff::cpu
