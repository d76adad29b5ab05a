#include "ops/avg_pool2d/kernels.h"
#include "ops/common/nchw_index.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

namespace {
// Start of output o's window and PyTorch's count_include_pad divisor part along one axis.
__device__ __forceinline__ int64_t window_start(int64_t o, const AvgPool2dShape& g) {
  return o * g.stride - g.padding;
}
__device__ __forceinline__ int64_t window_count(int64_t o, int64_t size, const AvgPool2dShape& g) {
  const int64_t start = window_start(o, g);
  return min(start + g.kernel, size + g.padding) - start;
}

// Both layouts: thread i handles element i of its tensor in memory order (NCHW or NHWC, coalesced either
// way).
template <class T>
__global__ void avg_pool2d_forward_kernel(const T* x, T* y, AvgPool2dShape g, int64_t total) {
  using A = acc_t<T>;
  const Nchw in_size{g.n, g.c, g.h, g.w}, out_size{g.n, g.c, g.oh, g.ow};
  LIFTOFF_GRID_STRIDE_LOOP(i, total) {
    const Nchw o = unravel_nchw(i, out_size, g.channels_last);
    const int64_t h0 = max(window_start(o.h, g), int64_t{0});
    const int64_t h1 = min(window_start(o.h, g) + g.kernel, g.h);
    const int64_t w0 = max(window_start(o.w, g), int64_t{0});
    const int64_t w1 = min(window_start(o.w, g) + g.kernel, g.w);
    A sum = A(0);
    for (int64_t ih = h0; ih < h1; ++ih) {
      for (int64_t iw = w0; iw < w1; ++iw)
        sum += convert<A>(x[ravel_nchw({o.n, o.c, ih, iw}, in_size, g.channels_last)]);
    }
    y[i] = convert<T>(sum / static_cast<A>(window_count(o.h, g.h, g) * window_count(o.w, g.w, g)));
  }
}

// Gather form: one thread per input pixel sums the shares of the windows covering it (no atomics).
template <class T>
__global__ void avg_pool2d_backward_kernel(const T* gy, T* gx, AvgPool2dShape g, int64_t total) {
  using A = acc_t<T>;
  const Nchw in_size{g.n, g.c, g.h, g.w}, out_size{g.n, g.c, g.oh, g.ow};
  LIFTOFF_GRID_STRIDE_LOOP(i, total) {
    const Nchw p = unravel_nchw(i, in_size, g.channels_last);
    const int64_t oh0 = p.h + g.padding < g.kernel ? 0 : (p.h + g.padding - g.kernel) / g.stride + 1;
    const int64_t oh1 = min((p.h + g.padding) / g.stride + 1, g.oh);
    const int64_t ow0 = p.w + g.padding < g.kernel ? 0 : (p.w + g.padding - g.kernel) / g.stride + 1;
    const int64_t ow1 = min((p.w + g.padding) / g.stride + 1, g.ow);
    A sum = A(0);
    for (int64_t oh = oh0; oh < oh1; ++oh) {
      const int64_t count_h = window_count(oh, g.h, g);
      for (int64_t ow = ow0; ow < ow1; ++ow) {
        const T v = gy[ravel_nchw({p.n, p.c, oh, ow}, out_size, g.channels_last)];
        sum += convert<A>(v) / static_cast<A>(count_h * window_count(ow, g.w, g));
      }
    }
    gx[i] = convert<T>(sum);
  }
}
}  // namespace

void avg_pool2d_forward(const Tensor& x, const Tensor& y, const AvgPool2dShape& g) {
  const int device = x.device().index;
  DeviceGuard guard(device);
  const int64_t total = y.numel();
  if (total == 0) return;
  dispatch_device_float(x.dtype(), "avg_pool2d", [&](auto tag) {
    using T = decltype(tag);
    avg_pool2d_forward_kernel<T><<<grid_for(total), kBlock, 0, compute_stream(device)>>>(
        static_cast<const T*>(x.raw_data()), static_cast<T*>(y.raw_data()), g, total);
    LIFTOFF_LAUNCH_CHECK();
  });
}

void avg_pool2d_backward(const Tensor& gy, const Tensor& gx, const AvgPool2dShape& g) {
  const int device = gy.device().index;
  DeviceGuard guard(device);
  const int64_t total = gx.numel();
  if (total == 0) return;
  dispatch_device_float(gy.dtype(), "avg_pool2d backward", [&](auto tag) {
    using T = decltype(tag);
    avg_pool2d_backward_kernel<T><<<grid_for(total), kBlock, 0, compute_stream(device)>>>(
        static_cast<const T*>(gy.raw_data()), static_cast<T*>(gx.raw_data()), g, total);
    LIFTOFF_LAUNCH_CHECK();
  });
}

}  // namespace liftoff::cuda
