#include <algorithm>

#include "ops/avg_pool2d/kernels.h"
#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace liftoff::cpu {

namespace {
// Window of one output along one axis, clamped to the image, and PyTorch's count_include_pad divisor part
// (the window clamped to the padded image).
struct Window {
  int64_t lo, hi, count;
};
Window window(int64_t o, int64_t size, const AvgPool2dShape& g) {
  const int64_t start = o * g.stride - g.padding;
  const int64_t end = std::min(start + g.kernel, size + g.padding);
  return {std::max<int64_t>(start, 0), std::min(end, size), end - start};
}

int64_t plane_grain(const AvgPool2dShape& g) {
  return std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(1, g.oh * g.ow * g.kernel * g.kernel));
}
}  // namespace

void avg_pool2d_forward(const Tensor& x, const Tensor& y, const AvgPool2dShape& g) {
  dispatch_float(x.dtype(), "avg_pool2d", [&](auto tag) {
    using T = decltype(tag);
    const T* xd = x.data<T>();
    T* yd = y.data<T>();
    parallel_for(0, g.n * g.c, plane_grain(g), [&](int64_t lo, int64_t hi) {
      for (int64_t plane = lo; plane < hi; ++plane) {
        const T* in = xd + plane * g.h * g.w;
        T* out = yd + plane * g.oh * g.ow;
        for (int64_t oh = 0; oh < g.oh; ++oh) {
          const Window wh = window(oh, g.h, g);
          for (int64_t ow = 0; ow < g.ow; ++ow) {
            const Window ww = window(ow, g.w, g);
            T sum = T(0);
            for (int64_t ih = wh.lo; ih < wh.hi; ++ih) {
              for (int64_t iw = ww.lo; iw < ww.hi; ++iw) sum += in[ih * g.w + iw];
            }
            out[oh * g.ow + ow] = sum / static_cast<T>(wh.count * ww.count);
          }
        }
      }
    });
  });
}

void avg_pool2d_backward(const Tensor& gy, const Tensor& gx, const AvgPool2dShape& g) {
  dispatch_float(gy.dtype(), "avg_pool2d backward", [&](auto tag) {
    using T = decltype(tag);
    const T* gyd = gy.data<T>();
    T* gxd = gx.data<T>();
    parallel_for(0, g.n * g.c, plane_grain(g), [&](int64_t lo, int64_t hi) {
      for (int64_t plane = lo; plane < hi; ++plane) {
        T* dst = gxd + plane * g.h * g.w;
        std::fill(dst, dst + g.h * g.w, T(0));
        const T* src = gyd + plane * g.oh * g.ow;
        for (int64_t oh = 0; oh < g.oh; ++oh) {
          const Window wh = window(oh, g.h, g);
          for (int64_t ow = 0; ow < g.ow; ++ow) {
            const Window ww = window(ow, g.w, g);
            const T share = src[oh * g.ow + ow] / static_cast<T>(wh.count * ww.count);
            for (int64_t ih = wh.lo; ih < wh.hi; ++ih) {
              for (int64_t iw = ww.lo; iw < ww.hi; ++iw) dst[ih * g.w + iw] += share;
            }
          }
        }
      }
    });
  });
}

}  // namespace liftoff::cpu
