#include <cmath>

#include "runtime/dispatch.h"
#include "runtime/parallel.h"
#include "swish_kernels.h"

namespace example::cpu {

using namespace liftoff;

void swish_forward(const Tensor& x, const Tensor& beta, const Tensor& y) {
  dispatch_float(x.dtype(), "swish", [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T* out = y.data<T>();
    const T b = beta.data<T>()[0];  // a CPU tensor: reading it is free
    // The library's thread pool; the split depends only on the range, so results are deterministic.
    parallel_for(0, x.numel(), 1 << 14, [=](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) out[i] = in[i] / (T(1) + std::exp(-b * in[i]));
    });
  });
}

void swish_backward(const Tensor& x, const Tensor& beta, const Tensor& grad_y, const Tensor& grad_x,
                    const Tensor& grad_beta_elements) {
  dispatch_float(x.dtype(), "swish backward", [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    const T* gy = grad_y.data<T>();
    T* gx = grad_x.data<T>();
    T* gb = grad_beta_elements.defined() ? grad_beta_elements.data<T>() : nullptr;
    const T b = beta.data<T>()[0];
    parallel_for(0, x.numel(), 1 << 14, [=](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const T s = T(1) / (T(1) + std::exp(-b * in[i]));
        const T ds = s * (T(1) - s);  // sigmoid'
        gx[i] = gy[i] * (s + b * in[i] * ds);
        if (gb) gb[i] = gy[i] * in[i] * in[i] * ds;
      }
    });
  });
}

}  // namespace example::cpu
