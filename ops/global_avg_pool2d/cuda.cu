#include "ops/global_avg_pool2d/kernels.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

namespace {
constexpr int kWarp = 32;

// One warp per plane (grid-stride over planes): planes are small (7x7 .. 32x32), so a block would idle.
template <class T>
__global__ void global_avg_pool2d_forward_kernel(const T* x, T* y, int64_t planes, int64_t plane) {
  using A = acc_t<T>;
  const int lane = threadIdx.x % kWarp;
  const int64_t warps_per_block = blockDim.x / kWarp;
  const int64_t first = blockIdx.x * warps_per_block + threadIdx.x / kWarp;
  for (int64_t p = first; p < planes; p += static_cast<int64_t>(gridDim.x) * warps_per_block) {
    const T* in = x + p * plane;
    A sum = A(0);
    for (int64_t j = lane; j < plane; j += kWarp) sum += convert<A>(in[j]);
    for (int offset = kWarp / 2; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
    if (lane == 0) y[p] = convert<T>(sum / static_cast<A>(plane));
  }
}

// Channels-last x [N, H, W, C] in memory: one thread per (n, c), walking the image's pixels; neighbouring
// threads read neighbouring channels, so every pixel step is one coalesced row read.
template <class T>
__global__ void global_avg_pool2d_forward_nhwc_kernel(const T* x, T* y, int64_t outputs, int64_t channels,
                                                      int64_t plane) {
  using A = acc_t<T>;
  LIFTOFF_GRID_STRIDE_LOOP(o, outputs) {
    const int64_t n = o / channels;
    const int64_t c = o - n * channels;
    const T* in = x + n * plane * channels + c;
    A sum = A(0);
    for (int64_t j = 0; j < plane; ++j) sum += convert<A>(in[j * channels]);
    y[o] = convert<T>(sum / static_cast<A>(plane));
  }
}

// gx channels-last: element i is (n, pixel, c) with c = i % C and n = i / (plane * C).
template <class T>
__global__ void global_avg_pool2d_backward_nhwc_kernel(const T* gy, T* gx, int64_t total, int64_t channels,
                                                       int64_t plane) {
  using A = acc_t<T>;
  LIFTOFF_GRID_STRIDE_LOOP(i, total) {
    const int64_t n = i / (plane * channels);
    const int64_t c = i % channels;
    gx[i] = convert<T>(convert<A>(gy[n * channels + c]) / static_cast<A>(plane));
  }
}

template <class T>
__global__ void global_avg_pool2d_backward_kernel(const T* gy, T* gx, int64_t total, int64_t plane) {
  using A = acc_t<T>;
  LIFTOFF_GRID_STRIDE_LOOP(i, total) {
    gx[i] = convert<T>(convert<A>(gy[i / plane]) / static_cast<A>(plane));
  }
}
}  // namespace

void global_avg_pool2d_forward(const Tensor& x, const Tensor& y) {
  const int device = x.device().index;
  DeviceGuard guard(device);
  const int64_t planes = y.numel();
  if (planes == 0) return;
  const int64_t plane = x.size(2) * x.size(3);
  dispatch_device_float(x.dtype(), "global_avg_pool2d", [&](auto tag) {
    using T = decltype(tag);
    if (x.is_channels_last()) {
      global_avg_pool2d_forward_nhwc_kernel<T><<<grid_for(planes), kBlock, 0, compute_stream(device)>>>(
          static_cast<const T*>(x.raw_data()), static_cast<T*>(y.raw_data()), planes, x.size(1), plane);
      LIFTOFF_LAUNCH_CHECK();
      return;
    }
    // Every lane of a warp reaches the shuffles: the plane loop bound is uniform across the warp.
    global_avg_pool2d_forward_kernel<T><<<grid_for(planes * kWarp), kBlock, 0, compute_stream(device)>>>(
        static_cast<const T*>(x.raw_data()), static_cast<T*>(y.raw_data()), planes, plane);
    LIFTOFF_LAUNCH_CHECK();
  });
}

void global_avg_pool2d_backward(const Tensor& gy, const Tensor& gx) {
  const int device = gy.device().index;
  DeviceGuard guard(device);
  const int64_t total = gx.numel();
  if (total == 0) return;
  const int64_t plane = gx.size(2) * gx.size(3);
  dispatch_device_float(gy.dtype(), "global_avg_pool2d backward", [&](auto tag) {
    using T = decltype(tag);
    if (gx.is_channels_last()) {
      global_avg_pool2d_backward_nhwc_kernel<T><<<grid_for(total), kBlock, 0, compute_stream(device)>>>(
          static_cast<const T*>(gy.raw_data()), static_cast<T*>(gx.raw_data()), total, gx.size(1), plane);
      LIFTOFF_LAUNCH_CHECK();
      return;
    }
    global_avg_pool2d_backward_kernel<T><<<grid_for(total), kBlock, 0, compute_stream(device)>>>(
        static_cast<const T*>(gy.raw_data()), static_cast<T*>(gx.raw_data()), total, plane);
    LIFTOFF_LAUNCH_CHECK();
  });
}

}  // namespace liftoff::cuda
