#include "ops/conv_transpose2d/kernels.h"
#include "runtime/dispatch.h"

namespace liftoff::cpu {

void conv_transpose2d_add_bias(const Tensor& y, const Tensor& bias) {
  dispatch_float(y.dtype(), "conv_transpose2d", [&](auto tag) {
    using T = decltype(tag);
    const int64_t images = y.size(0), channels = y.size(1), plane = y.size(2) * y.size(3);
    T* yd = y.data<T>();
    const T* bd = bias.data<T>();
    for (int64_t i = 0; i < images * channels; ++i)
      for (int64_t p = 0; p < plane; ++p) yd[i * plane + p] += bd[i % channels];
  });
}

}  // namespace liftoff::cpu
