#include <algorithm>
#include <vector>

#include "ops/upsample/kernels.h"
#include "ops/upsample/upsample_math.h"
#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace liftoff::cpu {

namespace {
using upsample_math::Lerp;

// Each output index's sources along one axis (nearest: i0 with weight 1).
template <class A>
std::vector<Lerp<A>> axis_table(int64_t in, int64_t out, double scale, const UpsampleArgs& a) {
  std::vector<Lerp<A>> t(static_cast<size_t>(out));
  for (int64_t d = 0; d < out; ++d) {
    if (a.bilinear) {
      t[static_cast<size_t>(d)] =
          upsample_math::linear_source<A>(d, in, out, static_cast<A>(scale), a.align_corners);
    } else {
      const int64_t s = upsample_math::nearest_source(d, in, out, static_cast<float>(scale));
      t[static_cast<size_t>(d)] = {s, s, A(1), A(0)};
    }
  }
  return t;
}

int64_t plane_grain(const UpsampleArgs& a) {
  return std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(1, a.oh * a.ow));
}
}  // namespace

void upsample_forward(const UpsampleArgs& a, const Tensor& x, const Tensor& y) {
  dispatch_float(x.dtype(), "interpolate", [&](auto tag) {
    using T = decltype(tag);
    const auto th = axis_table<T>(a.h, a.oh, a.scale_h, a);
    const auto tw = axis_table<T>(a.w, a.ow, a.scale_w, a);
    const T* xd = x.data<T>();
    T* yd = y.data<T>();
    parallel_for(0, a.n * a.c, plane_grain(a), [&](int64_t lo, int64_t hi) {
      for (int64_t plane = lo; plane < hi; ++plane) {
        const T* in = xd + plane * a.h * a.w;
        T* out = yd + plane * a.oh * a.ow;
        for (int64_t oh = 0; oh < a.oh; ++oh) {
          const Lerp<T>& lh = th[static_cast<size_t>(oh)];
          const T* r0 = in + lh.i0 * a.w;
          const T* r1 = in + lh.i1 * a.w;
          for (int64_t ow = 0; ow < a.ow; ++ow) {
            const Lerp<T>& lw = tw[static_cast<size_t>(ow)];
            out[oh * a.ow + ow] = a.bilinear ? lh.l0 * (lw.l0 * r0[lw.i0] + lw.l1 * r0[lw.i1]) +
                                                   lh.l1 * (lw.l0 * r1[lw.i0] + lw.l1 * r1[lw.i1])
                                             : r0[lw.i0];
          }
        }
      }
    });
  });
}

// The plain scatter (the CUDA kernel gathers instead, so the two are independent implementations).
void upsample_backward(const UpsampleArgs& a, const Tensor& gy, const Tensor& gx) {
  gx.zero_();
  dispatch_float(gy.dtype(), "interpolate backward", [&](auto tag) {
    using T = decltype(tag);
    const auto th = axis_table<T>(a.h, a.oh, a.scale_h, a);
    const auto tw = axis_table<T>(a.w, a.ow, a.scale_w, a);
    const T* gyd = gy.data<T>();
    T* gxd = gx.data<T>();
    parallel_for(0, a.n * a.c, plane_grain(a), [&](int64_t lo, int64_t hi) {
      for (int64_t plane = lo; plane < hi; ++plane) {
        const T* g = gyd + plane * a.oh * a.ow;
        T* dst = gxd + plane * a.h * a.w;
        for (int64_t oh = 0; oh < a.oh; ++oh) {
          const Lerp<T>& lh = th[static_cast<size_t>(oh)];
          for (int64_t ow = 0; ow < a.ow; ++ow) {
            const Lerp<T>& lw = tw[static_cast<size_t>(ow)];
            const T v = g[oh * a.ow + ow];
            dst[lh.i0 * a.w + lw.i0] += lh.l0 * lw.l0 * v;
            if (!a.bilinear) continue;
            dst[lh.i0 * a.w + lw.i1] += lh.l0 * lw.l1 * v;
            dst[lh.i1 * a.w + lw.i0] += lh.l1 * lw.l0 * v;
            dst[lh.i1 * a.w + lw.i1] += lh.l1 * lw.l1 * v;
          }
        }
      }
    });
  });
}

}  // namespace liftoff::cpu
