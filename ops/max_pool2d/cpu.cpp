#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/max_pool2d/kernels.h"
#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace liftoff::cpu {

namespace {
// Planes per task so that one task does roughly 16k window reads.
int64_t plane_grain(const MaxPool2dShape& g) {
  return std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(1, g.oh * g.ow * g.kernel * g.kernel));
}
}  // namespace

void max_pool2d_forward(const Tensor& x, const Tensor& y, const Tensor& indices, const MaxPool2dShape& g) {
  dispatch_float(x.dtype(), "max_pool2d", [&](auto tag) {
    using T = decltype(tag);
    const T* xd = x.data<T>();
    T* yd = y.data<T>();
    int64_t* id = indices.data<int64_t>();
    parallel_for(0, g.n * g.c, plane_grain(g), [&](int64_t lo, int64_t hi) {
      for (int64_t plane = lo; plane < hi; ++plane) {
        const T* in = xd + plane * g.h * g.w;
        T* out = yd + plane * g.oh * g.ow;
        int64_t* arg = id + plane * g.oh * g.ow;
        for (int64_t oh = 0; oh < g.oh; ++oh) {
          const int64_t h0 = std::max<int64_t>(oh * g.stride - g.padding, 0);
          const int64_t h1 = std::min(oh * g.stride - g.padding + g.kernel, g.h);
          for (int64_t ow = 0; ow < g.ow; ++ow) {
            const int64_t w0 = std::max<int64_t>(ow * g.stride - g.padding, 0);
            const int64_t w1 = std::min(ow * g.stride - g.padding + g.kernel, g.w);
            T best = -std::numeric_limits<T>::infinity();
            int64_t best_at = h0 * g.w + w0;  // padding <= kernel/2 keeps every window non-empty
            for (int64_t ih = h0; ih < h1; ++ih) {
              for (int64_t iw = w0; iw < w1; ++iw) {
                const T v = in[ih * g.w + iw];
                if (v > best || std::isnan(v)) {  // NaN wins, as in PyTorch
                  best = v;
                  best_at = ih * g.w + iw;
                }
              }
            }
            out[oh * g.ow + ow] = best;
            arg[oh * g.ow + ow] = best_at;
          }
        }
      }
    });
  });
}

void max_pool2d_backward(const Tensor& gy, const Tensor& indices, const Tensor& gx, const MaxPool2dShape& g) {
  dispatch_float(gy.dtype(), "max_pool2d backward", [&](auto tag) {
    using T = decltype(tag);
    const T* gyd = gy.data<T>();
    const int64_t* id = indices.data<int64_t>();
    T* gxd = gx.data<T>();
    const int64_t in_plane = g.h * g.w;
    const int64_t out_plane = g.oh * g.ow;
    parallel_for(0, g.n * g.c, std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(1, in_plane + out_plane)),
                 [&](int64_t lo, int64_t hi) {
                   for (int64_t plane = lo; plane < hi; ++plane) {
                     T* dst = gxd + plane * in_plane;
                     std::fill(dst, dst + in_plane, T(0));
                     const T* src = gyd + plane * out_plane;
                     const int64_t* arg = id + plane * out_plane;
                     for (int64_t o = 0; o < out_plane; ++o) dst[arg[o]] += src[o];
                   }
                 });
  });
}

}  // namespace liftoff::cpu
