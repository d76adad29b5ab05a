#include "ops/adaptive_avg_pool2d/kernels.h"
#include "ops/common/nchw_index.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

namespace {
// One thread per output element, in the layout's memory order.
template <class T>
__global__ void adaptive_avg_pool2d_forward_kernel(const T* x, T* y, AdaptivePoolArgs a, int64_t total) {
  using A = acc_t<T>;
  const Nchw in{a.n, a.c, a.h, a.w}, out{a.n, a.c, a.oh, a.ow};
  LIFTOFF_GRID_STRIDE_LOOP(i, total) {
    const Nchw p = unravel_nchw(i, out, a.channels_last);
    const int64_t h0 = bin_start(p.h, a.h, a.oh), h1 = bin_end(p.h, a.h, a.oh);
    const int64_t w0 = bin_start(p.w, a.w, a.ow), w1 = bin_end(p.w, a.w, a.ow);
    A sum = A(0);
    for (int64_t ih = h0; ih < h1; ++ih) {
      for (int64_t iw = w0; iw < w1; ++iw)
        sum += convert<A>(x[ravel_nchw({p.n, p.c, ih, iw}, in, a.channels_last)]);
    }
    y[i] = convert<T>(sum / static_cast<A>((h1 - h0) * (w1 - w0)));
  }
}

// Gather form: one thread per input element sums the shares of the bins covering it (no atomics).
template <class T>
__global__ void adaptive_avg_pool2d_backward_kernel(const T* gy, T* gx, AdaptivePoolArgs a, int64_t total) {
  using A = acc_t<T>;
  const Nchw in{a.n, a.c, a.h, a.w}, out{a.n, a.c, a.oh, a.ow};
  LIFTOFF_GRID_STRIDE_LOOP(i, total) {
    const Nchw p = unravel_nchw(i, in, a.channels_last);
    const int64_t oh0 = bin_start(p.h, a.oh, a.h), oh1 = bin_end(p.h, a.oh, a.h);
    const int64_t ow0 = bin_start(p.w, a.ow, a.w), ow1 = bin_end(p.w, a.ow, a.w);
    A sum = A(0);
    for (int64_t oh = oh0; oh < oh1; ++oh) {
      const int64_t rows = bin_end(oh, a.h, a.oh) - bin_start(oh, a.h, a.oh);
      for (int64_t ow = ow0; ow < ow1; ++ow) {
        const int64_t cols = bin_end(ow, a.w, a.ow) - bin_start(ow, a.w, a.ow);
        sum += convert<A>(gy[ravel_nchw({p.n, p.c, oh, ow}, out, a.channels_last)]) /
               static_cast<A>(rows * cols);
      }
    }
    gx[i] = convert<T>(sum);
  }
}
}  // namespace

void adaptive_avg_pool2d_forward(const AdaptivePoolArgs& a, const Tensor& x, const Tensor& y) {
  const int device = x.device().index;
  DeviceGuard guard(device);
  const int64_t total = y.numel();
  if (total == 0) return;
  dispatch_device_float(x.dtype(), "adaptive_avg_pool2d", [&](auto tag) {
    using T = decltype(tag);
    adaptive_avg_pool2d_forward_kernel<T><<<grid_for(total), kBlock, 0, compute_stream(device)>>>(
        static_cast<const T*>(x.raw_data()), static_cast<T*>(y.raw_data()), a, total);
    LIFTOFF_LAUNCH_CHECK();
  });
}

void adaptive_avg_pool2d_backward(const AdaptivePoolArgs& a, const Tensor& gy, const Tensor& gx) {
  const int device = gy.device().index;
  DeviceGuard guard(device);
  const int64_t total = gx.numel();
  if (total == 0) return;
  dispatch_device_float(gy.dtype(), "adaptive_avg_pool2d backward", [&](auto tag) {
    using T = decltype(tag);
    adaptive_avg_pool2d_backward_kernel<T><<<grid_for(total), kBlock, 0, compute_stream(device)>>>(
        static_cast<const T*>(gy.raw_data()), static_cast<T*>(gx.raw_data()), a, total);
    LIFTOFF_LAUNCH_CHECK();
  });
}

}  // namespace liftoff::cuda
