#include <algorithm>

#include "ops/global_avg_pool2d/kernels.h"
#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace liftoff::cpu {

void global_avg_pool2d_forward(const Tensor& x, const Tensor& y) {
  dispatch_float(x.dtype(), "global_avg_pool2d", [&](auto tag) {
    using T = decltype(tag);
    const T* xd = x.data<T>();
    T* yd = y.data<T>();
    const int64_t plane = x.size(2) * x.size(3);
    parallel_for(0, y.numel(), std::max<int64_t>(1, (1 << 14) / plane), [&](int64_t lo, int64_t hi) {
      for (int64_t p = lo; p < hi; ++p) {
        const T* in = xd + p * plane;
        double sum = 0.0;  // double even for f32: exact enough for any plane size
        for (int64_t j = 0; j < plane; ++j) sum += static_cast<double>(in[j]);
        yd[p] = static_cast<T>(sum / static_cast<double>(plane));
      }
    });
  });
}

void global_avg_pool2d_backward(const Tensor& gy, const Tensor& gx) {
  dispatch_float(gy.dtype(), "global_avg_pool2d backward", [&](auto tag) {
    using T = decltype(tag);
    const T* gyd = gy.data<T>();
    T* gxd = gx.data<T>();
    const int64_t plane = gx.size(2) * gx.size(3);
    parallel_for(0, gy.numel(), std::max<int64_t>(1, (1 << 14) / plane), [&](int64_t lo, int64_t hi) {
      for (int64_t p = lo; p < hi; ++p) {
        const T share = gyd[p] / static_cast<T>(plane);
        std::fill(gxd + p * plane, gxd + (p + 1) * plane, share);
      }
    });
  });
}

}  // namespace liftoff::cpu
