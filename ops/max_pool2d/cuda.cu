#include "ops/common/nchw_index.h"
#include "ops/max_pool2d/kernels.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

namespace {
// Both layouts: thread i handles element i of its tensor in memory order (NCHW, or NHWC where consecutive
// threads take consecutive channels of one pixel, so loads and stores coalesce either way). Indices hold the
// maximum's position in its H*W plane, whatever the layout.
template <class T>
__global__ void max_pool2d_forward_kernel(const T* x, T* y, int64_t* indices, MaxPool2dShape g,
                                          int64_t total) {
  using A = acc_t<T>;
  const Nchw in_size{g.n, g.c, g.h, g.w}, out_size{g.n, g.c, g.oh, g.ow};
  LIFTOFF_GRID_STRIDE_LOOP(i, total) {
    const Nchw o = unravel_nchw(i, out_size, g.channels_last);
    const int64_t h0 = max(o.h * g.stride - g.padding, int64_t{0});
    const int64_t h1 = min(o.h * g.stride - g.padding + g.kernel, g.h);
    const int64_t w0 = max(o.w * g.stride - g.padding, int64_t{0});
    const int64_t w1 = min(o.w * g.stride - g.padding + g.kernel, g.w);
    A best = convert<A>(-INFINITY);
    int64_t best_at = h0 * g.w + w0;
    for (int64_t ih = h0; ih < h1; ++ih) {
      for (int64_t iw = w0; iw < w1; ++iw) {
        const A v = convert<A>(x[ravel_nchw({o.n, o.c, ih, iw}, in_size, g.channels_last)]);
        if (v > best || isnan(v)) {  // NaN wins, as in PyTorch
          best = v;
          best_at = ih * g.w + iw;
        }
      }
    }
    y[i] = convert<T>(best);
    indices[i] = best_at;
  }
}

// Gather form (one thread per input pixel, summing the outputs whose maximum it was): no atomics,
// deterministic.
template <class T>
__global__ void max_pool2d_backward_kernel(const T* gy, const int64_t* indices, T* gx, MaxPool2dShape g,
                                           int64_t total) {
  using A = acc_t<T>;
  const Nchw in_size{g.n, g.c, g.h, g.w}, out_size{g.n, g.c, g.oh, g.ow};
  LIFTOFF_GRID_STRIDE_LOOP(i, total) {
    const Nchw p = unravel_nchw(i, in_size, g.channels_last);
    // Outputs whose window [o * stride - p, o * stride - p + kernel) contains the pixel.
    const int64_t oh0 = p.h + g.padding < g.kernel ? 0 : (p.h + g.padding - g.kernel) / g.stride + 1;
    const int64_t oh1 = min((p.h + g.padding) / g.stride + 1, g.oh);
    const int64_t ow0 = p.w + g.padding < g.kernel ? 0 : (p.w + g.padding - g.kernel) / g.stride + 1;
    const int64_t ow1 = min((p.w + g.padding) / g.stride + 1, g.ow);
    const int64_t self = p.h * g.w + p.w;
    A sum = A(0);
    for (int64_t oh = oh0; oh < oh1; ++oh) {
      for (int64_t ow = ow0; ow < ow1; ++ow) {
        const int64_t o = ravel_nchw({p.n, p.c, oh, ow}, out_size, g.channels_last);
        if (indices[o] == self) sum += convert<A>(gy[o]);
      }
    }
    gx[i] = convert<T>(sum);
  }
}
}  // namespace

void max_pool2d_forward(const Tensor& x, const Tensor& y, const Tensor& indices, const MaxPool2dShape& g) {
  const int device = x.device().index;
  DeviceGuard guard(device);
  const int64_t total = y.numel();
  if (total == 0) return;
  dispatch_device_float(x.dtype(), "max_pool2d", [&](auto tag) {
    using T = decltype(tag);
    max_pool2d_forward_kernel<T><<<grid_for(total), kBlock, 0, compute_stream(device)>>>(
        static_cast<const T*>(x.raw_data()), static_cast<T*>(y.raw_data()),
        static_cast<int64_t*>(indices.raw_data()), g, total);
    LIFTOFF_LAUNCH_CHECK();
  });
}

void max_pool2d_backward(const Tensor& gy, const Tensor& indices, const Tensor& gx, const MaxPool2dShape& g) {
  const int device = gy.device().index;
  DeviceGuard guard(device);
  const int64_t total = gx.numel();
  if (total == 0) return;
  dispatch_device_float(gy.dtype(), "max_pool2d backward", [&](auto tag) {
    using T = decltype(tag);
    max_pool2d_backward_kernel<T><<<grid_for(total), kBlock, 0, compute_stream(device)>>>(
        static_cast<const T*>(gy.raw_data()), static_cast<const int64_t*>(indices.raw_data()),
        static_cast<T*>(gx.raw_data()), g, total);
    LIFTOFF_LAUNCH_CHECK();
  });
}

}  // namespace liftoff::cuda
