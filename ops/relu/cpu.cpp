#include "ops/relu/kernels.h"
#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace liftoff::cpu {

void relu_forward(const Tensor& x, const Tensor& y) {
  dispatch_float(x.dtype(), "relu", [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T* out = y.data<T>();
    parallel_for(0, x.numel(), 1 << 14, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) out[i] = in[i] > T(0) ? in[i] : T(0);
    });
  });
}

void relu_backward(const Tensor& y, const Tensor& grad_y, const Tensor& grad_x) {
  dispatch_float(y.dtype(), "relu backward", [&](auto tag) {
    using T = decltype(tag);
    const T* out = y.data<T>();
    const T* gy = grad_y.data<T>();
    T* gx = grad_x.data<T>();
    parallel_for(0, y.numel(), 1 << 14, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) gx[i] = out[i] > T(0) ? gy[i] : T(0);
    });
  });
}

}  // namespace liftoff::cpu
