#include "ops/common/nchw_index.h"
#include "ops/upsample/kernels.h"
#include "ops/upsample/upsample_math.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

namespace {
using upsample_math::Lerp;

// One thread per output element, in the layout's memory order (coalesced writes; channels-last neighbours
// read neighbouring channels).
template <class T, class A>
__global__ void upsample_forward_kernel(const T* x, T* y, UpsampleArgs a, bool nhwc, int64_t total) {
  const Nchw in{a.n, a.c, a.h, a.w}, out{a.n, a.c, a.oh, a.ow};
  LIFTOFF_GRID_STRIDE_LOOP(i, total) {
    const Nchw p = unravel_nchw(i, out, nhwc);
    const auto at = [&](int64_t h, int64_t w) {
      return convert<A>(x[ravel_nchw({p.n, p.c, h, w}, in, nhwc)]);
    };
    if (!a.bilinear) {
      const int64_t h = upsample_math::nearest_source(p.h, a.h, a.oh, static_cast<float>(a.scale_h));
      const int64_t w = upsample_math::nearest_source(p.w, a.w, a.ow, static_cast<float>(a.scale_w));
      y[i] = x[ravel_nchw({p.n, p.c, h, w}, in, nhwc)];
      continue;
    }
    const Lerp<A> lh =
        upsample_math::linear_source<A>(p.h, a.h, a.oh, static_cast<A>(a.scale_h), a.align_corners);
    const Lerp<A> lw =
        upsample_math::linear_source<A>(p.w, a.w, a.ow, static_cast<A>(a.scale_w), a.align_corners);
    y[i] = convert<T>(lh.l0 * (lw.l0 * at(lh.i0, lw.i0) + lw.l1 * at(lh.i0, lw.i1)) +
                      lh.l1 * (lw.l0 * at(lh.i1, lw.i0) + lw.l1 * at(lh.i1, lw.i1)));
  }
}

// Gather form: one thread per input element sums, with the forward's weights, the gradients of the outputs
// that read it (found by binary search per axis). No atomics, so the result is deterministic.
template <class T, class A>
__global__ void upsample_backward_kernel(const T* gy, T* gx, UpsampleArgs a, bool nhwc, int64_t total) {
  const Nchw in{a.n, a.c, a.h, a.w}, out{a.n, a.c, a.oh, a.ow};
  const A sh = static_cast<A>(a.scale_h), sw = static_cast<A>(a.scale_w);
  LIFTOFF_GRID_STRIDE_LOOP(i, total) {
    const Nchw p = unravel_nchw(i, in, nhwc);
    int64_t h0, h1, w0, w1;
    upsample_math::reader_range<A>(p.h, a.h, a.oh, sh, a.bilinear, a.align_corners, &h0, &h1);
    upsample_math::reader_range<A>(p.w, a.w, a.ow, sw, a.bilinear, a.align_corners, &w0, &w1);
    A sum = A(0);
    for (int64_t oh = h0; oh < h1; ++oh) {
      const A wh = upsample_math::axis_weight<A>(oh, p.h, a.h, a.oh, sh, a.bilinear, a.align_corners);
      if (wh == A(0)) continue;
      A row = A(0);
      for (int64_t ow = w0; ow < w1; ++ow) {
        const A ww = upsample_math::axis_weight<A>(ow, p.w, a.w, a.ow, sw, a.bilinear, a.align_corners);
        row += ww * convert<A>(gy[ravel_nchw({p.n, p.c, oh, ow}, out, nhwc)]);
      }
      sum += wh * row;
    }
    gx[i] = convert<T>(sum);
  }
}
}  // namespace

void upsample_forward(const UpsampleArgs& a, const Tensor& x, const Tensor& y) {
  const int device = x.device().index;
  DeviceGuard guard(device);
  const int64_t total = y.numel();
  if (total == 0) return;
  dispatch_device_float(x.dtype(), "interpolate", [&](auto tag) {
    using T = decltype(tag);
    upsample_forward_kernel<T, acc_t<T>><<<grid_for(total), kBlock, 0, compute_stream(device)>>>(
        static_cast<const T*>(x.raw_data()), static_cast<T*>(y.raw_data()), a, a.channels_last, total);
    LIFTOFF_LAUNCH_CHECK();
  });
}

void upsample_backward(const UpsampleArgs& a, const Tensor& gy, const Tensor& gx) {
  const int device = gy.device().index;
  DeviceGuard guard(device);
  const int64_t total = gx.numel();
  if (total == 0) return;
  dispatch_device_float(gy.dtype(), "interpolate backward", [&](auto tag) {
    using T = decltype(tag);
    upsample_backward_kernel<T, acc_t<T>><<<grid_for(total), kBlock, 0, compute_stream(device)>>>(
        static_cast<const T*>(gy.raw_data()), static_cast<T*>(gx.raw_data()), a, a.channels_last, total);
    LIFTOFF_LAUNCH_CHECK();
  });
}

}  // namespace liftoff::cuda
