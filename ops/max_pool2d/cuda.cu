#include "ops/max_pool2d/kernels.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

namespace {
template <class T>
__global__ void max_pool2d_forward_kernel(const T* x, T* y, int64_t* indices, MaxPool2dShape g,
                                          int64_t total) {
  using A = acc_t<T>;
  LIFTOFF_GRID_STRIDE_LOOP(i, total) {
    const int64_t ow = i % g.ow;
    const int64_t oh = (i / g.ow) % g.oh;
    const int64_t plane = i / (g.ow * g.oh);
    const int64_t h0 = max(oh * g.stride - g.padding, int64_t{0});
    const int64_t h1 = min(oh * g.stride - g.padding + g.kernel, g.h);
    const int64_t w0 = max(ow * g.stride - g.padding, int64_t{0});
    const int64_t w1 = min(ow * g.stride - g.padding + g.kernel, g.w);
    const T* in = x + plane * g.h * g.w;
    A best = convert<A>(-INFINITY);
    int64_t best_at = h0 * g.w + w0;
    for (int64_t ih = h0; ih < h1; ++ih) {
      for (int64_t iw = w0; iw < w1; ++iw) {
        const A v = convert<A>(in[ih * g.w + iw]);
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
  LIFTOFF_GRID_STRIDE_LOOP(i, total) {
    const int64_t iw = i % g.w;
    const int64_t ih = (i / g.w) % g.h;
    const int64_t plane = i / (g.w * g.h);
    // Outputs whose window [o * stride - p, o * stride - p + kernel) contains the pixel.
    const int64_t oh0 = ih + g.padding < g.kernel ? 0 : (ih + g.padding - g.kernel) / g.stride + 1;
    const int64_t oh1 = min((ih + g.padding) / g.stride + 1, g.oh);
    const int64_t ow0 = iw + g.padding < g.kernel ? 0 : (iw + g.padding - g.kernel) / g.stride + 1;
    const int64_t ow1 = min((iw + g.padding) / g.stride + 1, g.ow);
    const int64_t self = ih * g.w + iw;
    const int64_t base = plane * g.oh * g.ow;
    A sum = A(0);
    for (int64_t oh = oh0; oh < oh1; ++oh) {
      for (int64_t ow = ow0; ow < ow1; ++ow) {
        const int64_t o = base + oh * g.ow + ow;
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
