#include "ops/relu/kernels.h"
#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace liftoff::cpu {

void relu_forward(const Tensor& x, const Tensor& y) {
  dispatch_float(x.dtype(), "relu", [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T* out = y.data<T>();
    // Pointers copied into the chunk as restrict locals: without that the compiler reloads them through the
    // closure every element and the loop stays scalar.
    parallel_for(0, x.numel(), 1 << 14, [in, out](int64_t lo, int64_t hi) {
      const T* __restrict src = in + lo;
      T* __restrict dst = out + lo;
      const int64_t n = hi - lo;
      for (int64_t i = 0; i < n; ++i) dst[i] = src[i] > T(0) ? src[i] : T(0);
    });
  });
}

void relu_backward(const Tensor& y, const Tensor& grad_y, const Tensor& grad_x) {
  dispatch_float(y.dtype(), "relu backward", [&](auto tag) {
    using T = decltype(tag);
    const T* out = y.data<T>();
    const T* gy = grad_y.data<T>();
    T* gx = grad_x.data<T>();
    parallel_for(0, y.numel(), 1 << 14, [out, gy, gx](int64_t lo, int64_t hi) {
      const T* __restrict o = out + lo;
      const T* __restrict g = gy + lo;
      T* __restrict dst = gx + lo;
      const int64_t n = hi - lo;
      for (int64_t i = 0; i < n; ++i) dst[i] = o[i] > T(0) ? g[i] : T(0);
    });
  });
}

}  // namespace liftoff::cpu
