#include <algorithm>
#include <initializer_list>
#include <type_traits>

#include "ops/common/channel_vector.cuh"
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

// Channels-last, for tensors under 2^30 elements: a thread takes V consecutive channels (16-byte packs when C
// and the pointers allow) of one pixel, consecutive threads consecutive packs; 32-bit index arithmetic.
// Same comparisons, indices and summation order as the kernels above.
struct NhwcPool {
  int n, h, w, oh, ow, c, kernel, stride, padding, vecs;  // vecs = C / V
};

template <class T, int V>
__global__ void max_pool2d_nhwc_forward_kernel(const T* __restrict__ x, T* __restrict__ y,
                                               int64_t* __restrict__ indices, NhwcPool g) {
  using A = acc_t<T>;
  const int total = g.n * g.oh * g.ow * g.vecs;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const int c0 = (i % g.vecs) * V;
    const int pixel = i / g.vecs;
    const int ow = pixel % g.ow, oh = (pixel / g.ow) % g.oh, n = pixel / (g.ow * g.oh);
    const int h0 = max(oh * g.stride - g.padding, 0), h1 = min(oh * g.stride - g.padding + g.kernel, g.h);
    const int w0 = max(ow * g.stride - g.padding, 0), w1 = min(ow * g.stride - g.padding + g.kernel, g.w);
    A best[V];
    int64_t best_at[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      best[j] = convert<A>(-INFINITY);
      best_at[j] = h0 * g.w + w0;
    }
    for (int ih = h0; ih < h1; ++ih) {
      for (int iw = w0; iw < w1; ++iw) {
        A v[V];
        load_channels<V>(x + ((n * g.h + ih) * g.w + iw) * g.c + c0, v);
#pragma unroll
        for (int j = 0; j < V; ++j) {
          if (v[j] > best[j] || isnan(v[j])) {  // NaN wins, as in PyTorch
            best[j] = v[j];
            best_at[j] = ih * g.w + iw;
          }
        }
      }
    }
    store_channels<V>(y + pixel * g.c + c0, best);
    store_channels<V>(indices + static_cast<int64_t>(pixel) * g.c + c0, best_at);
  }
}

template <class T, int V>
__global__ void max_pool2d_nhwc_backward_kernel(const T* __restrict__ gy, const int64_t* __restrict__ indices,
                                                T* __restrict__ gx, NhwcPool g) {
  using A = acc_t<T>;
  const int total = g.n * g.h * g.w * g.vecs;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const int c0 = (i % g.vecs) * V;
    const int pixel = i / g.vecs;
    const int iw = pixel % g.w, ih = (pixel / g.w) % g.h, n = pixel / (g.w * g.h);
    // Outputs whose window [o * stride - p, o * stride - p + kernel) contains the pixel.
    const int oh0 = ih + g.padding < g.kernel ? 0 : (ih + g.padding - g.kernel) / g.stride + 1;
    const int oh1 = min((ih + g.padding) / g.stride + 1, g.oh);
    const int ow0 = iw + g.padding < g.kernel ? 0 : (iw + g.padding - g.kernel) / g.stride + 1;
    const int ow1 = min((iw + g.padding) / g.stride + 1, g.ow);
    const int64_t self = ih * g.w + iw;
    A sum[V];
#pragma unroll
    for (int j = 0; j < V; ++j) sum[j] = A(0);
    for (int oh = oh0; oh < oh1; ++oh) {
      for (int ow = ow0; ow < ow1; ++ow) {
        const int at = ((n * g.oh + oh) * g.ow + ow) * g.c + c0;
        int64_t index[V];
        A grad[V];
        load_channels<V>(indices + at, index);
        load_channels<V>(gy + at, grad);
#pragma unroll
        for (int j = 0; j < V; ++j) {
          if (index[j] == self) sum[j] += grad[j];
        }
      }
    }
    store_channels<V>(gx + pixel * g.c + c0, sum);
  }
}

constexpr int64_t kNhwcMaxElements = int64_t{1} << 30;

// Runs launch(T{}, integral_constant<V>, NhwcPool) for a channels-last pool small enough for 32-bit indexing
// and returns true; false (nothing run) otherwise. V: 16 bytes of T when C and every pointer allow it (the
// int64 indices then move as packs of V, in 16-byte accesses).
template <class Fn>
bool run_nhwc(DType dtype, const MaxPool2dShape& g, const void* indices,
              std::initializer_list<const void*> data, Fn&& launch) {
  if (!g.channels_last || g.n * g.c * g.h * g.w >= kNhwcMaxElements ||
      g.n * g.c * g.oh * g.ow >= kNhwcMaxElements) {
    return false;
  }
  dispatch_device_float(dtype, "max_pool2d", [&](auto tag) {
    using T = decltype(tag);
    constexpr int kWide = kChannelVector<T>;
    bool wide = channel_pack_fits(indices, g.c, kWide, sizeof(int64_t));
    for (const void* p : data) wide = wide && channel_pack_fits(p, g.c, kWide, sizeof(T));
    auto geometry = [&](int v) {
      auto i32 = [](int64_t value) { return static_cast<int>(value); };
      return NhwcPool{i32(g.n), i32(g.h),      i32(g.w),      i32(g.oh),      i32(g.ow),
                      i32(g.c), i32(g.kernel), i32(g.stride), i32(g.padding), i32(g.c / v)};
    };
    if (wide) {
      launch(T{}, std::integral_constant<int, kWide>{}, geometry(kWide));
    } else {
      launch(T{}, std::integral_constant<int, 1>{}, geometry(1));
    }
  });
  return true;
}
}  // namespace

void max_pool2d_forward(const Tensor& x, const Tensor& y, const Tensor& indices, const MaxPool2dShape& g) {
  const int device = x.device().index;
  DeviceGuard guard(device);
  const int64_t total = y.numel();
  if (total == 0) return;
  const bool nhwc = run_nhwc(x.dtype(), g, indices.raw_data(), {x.raw_data(), y.raw_data()},
                             [&](auto tag, auto width, const NhwcPool& geometry) {
                               using T = decltype(tag);
                               constexpr int V = decltype(width)::value;
                               const int64_t threads = total / V;
                               max_pool2d_nhwc_forward_kernel<T, V>
                                   <<<grid_for(threads), kBlock, 0, compute_stream(device)>>>(
                                       static_cast<const T*>(x.raw_data()), static_cast<T*>(y.raw_data()),
                                       static_cast<int64_t*>(indices.raw_data()), geometry);
                               LIFTOFF_LAUNCH_CHECK();
                             });
  if (nhwc) return;
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
  const bool nhwc = run_nhwc(
      gy.dtype(), g, indices.raw_data(), {gy.raw_data(), gx.raw_data()},
      [&](auto tag, auto width, const NhwcPool& geometry) {
        using T = decltype(tag);
        constexpr int V = decltype(width)::value;
        const int64_t threads = total / V;
        max_pool2d_nhwc_backward_kernel<T, V><<<grid_for(threads), kBlock, 0, compute_stream(device)>>>(
            static_cast<const T*>(gy.raw_data()), static_cast<const int64_t*>(indices.raw_data()),
            static_cast<T*>(gx.raw_data()), geometry);
        LIFTOFF_LAUNCH_CHECK();
      });
  if (nhwc) return;
  dispatch_device_float(gy.dtype(), "max_pool2d backward", [&](auto tag) {
    using T = decltype(tag);
    max_pool2d_backward_kernel<T><<<grid_for(total), kBlock, 0, compute_stream(device)>>>(
        static_cast<const T*>(gy.raw_data()), static_cast<const int64_t*>(indices.raw_data()),
        static_cast<T*>(gx.raw_data()), g, total);
    LIFTOFF_LAUNCH_CHECK();
  });
}

}  // namespace liftoff::cuda
