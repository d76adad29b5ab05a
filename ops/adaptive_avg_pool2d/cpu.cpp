#include <algorithm>

#include "ops/adaptive_avg_pool2d/kernels.h"
#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace liftoff::cpu {

namespace {
int64_t plane_grain(const AdaptivePoolArgs& a) {
  return std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(1, a.h * a.w));
}
}  // namespace

void adaptive_avg_pool2d_forward(const AdaptivePoolArgs& a, const Tensor& x, const Tensor& y) {
  dispatch_float(x.dtype(), "adaptive_avg_pool2d", [&](auto tag) {
    using T = decltype(tag);
    const T* xd = x.data<T>();
    T* yd = y.data<T>();
    parallel_for(0, a.n * a.c, plane_grain(a), [&](int64_t lo, int64_t hi) {
      for (int64_t plane = lo; plane < hi; ++plane) {
        const T* in = xd + plane * a.h * a.w;
        T* out = yd + plane * a.oh * a.ow;
        for (int64_t oh = 0; oh < a.oh; ++oh) {
          const int64_t h0 = bin_start(oh, a.h, a.oh), h1 = bin_end(oh, a.h, a.oh);
          for (int64_t ow = 0; ow < a.ow; ++ow) {
            const int64_t w0 = bin_start(ow, a.w, a.ow), w1 = bin_end(ow, a.w, a.ow);
            T sum = T(0);
            for (int64_t ih = h0; ih < h1; ++ih) {
              for (int64_t iw = w0; iw < w1; ++iw) sum += in[ih * a.w + iw];
            }
            out[oh * a.ow + ow] = sum / static_cast<T>((h1 - h0) * (w1 - w0));
          }
        }
      }
    });
  });
}

// The plain scatter (the CUDA kernel gathers instead, so the two are independent implementations).
void adaptive_avg_pool2d_backward(const AdaptivePoolArgs& a, const Tensor& gy, const Tensor& gx) {
  gx.zero_();
  dispatch_float(gy.dtype(), "adaptive_avg_pool2d backward", [&](auto tag) {
    using T = decltype(tag);
    const T* gyd = gy.data<T>();
    T* gxd = gx.data<T>();
    parallel_for(0, a.n * a.c, plane_grain(a), [&](int64_t lo, int64_t hi) {
      for (int64_t plane = lo; plane < hi; ++plane) {
        const T* g = gyd + plane * a.oh * a.ow;
        T* dst = gxd + plane * a.h * a.w;
        for (int64_t oh = 0; oh < a.oh; ++oh) {
          const int64_t h0 = bin_start(oh, a.h, a.oh), h1 = bin_end(oh, a.h, a.oh);
          for (int64_t ow = 0; ow < a.ow; ++ow) {
            const int64_t w0 = bin_start(ow, a.w, a.ow), w1 = bin_end(ow, a.w, a.ow);
            const T share = g[oh * a.ow + ow] / static_cast<T>((h1 - h0) * (w1 - w0));
            for (int64_t ih = h0; ih < h1; ++ih) {
              for (int64_t iw = w0; iw < w1; ++iw) dst[ih * a.w + iw] += share;
            }
          }
        }
      }
    });
  });
}

}  // namespace liftoff::cpu
