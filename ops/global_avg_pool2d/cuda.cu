#include <cstdint>

#include "ops/common/elementwise.cuh"
#include "ops/global_avg_pool2d/kernels.h"
#include "ops/reduce/kernels.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

namespace {
// gx [images, per_image] (one image's elements in memory order) = gy[image, channel_of(i)] / plane, V
// elements a thread at a time. Channels-last: the channel of element i is i % C; NCHW: i / plane. One grid
// row per image (blockIdx.y) keeps the division to the index within the image, in 32 bits where it fits.
template <class T, int V, bool kChannelsLast, class I>
__global__ void global_avg_pool2d_backward_kernel(const T* gy, T* gx, int64_t images, I per_image, I channels,
                                                  I plane) {
  using A = acc_t<T>;
  const I packs = per_image / V;
  const A denominator = static_cast<A>(plane);
  for (int64_t n = blockIdx.y; n < images; n += gridDim.y) {
    const T* row = gy + n * static_cast<int64_t>(channels);
    auto* out = reinterpret_cast<detail::Pack<T, V>*>(gx + n * static_cast<int64_t>(per_image));
    for (I q = blockIdx.x * static_cast<I>(blockDim.x) + threadIdx.x; q < packs;
         q += static_cast<I>(gridDim.x) * blockDim.x) {
      const I first = q * V;
      detail::Pack<T, V> p;
      if constexpr (kChannelsLast) {
        // V divides C: the pack's channels are consecutive.
        const I c = first % channels;
#pragma unroll
        for (int j = 0; j < V; ++j) p.v[j] = convert<T>(convert<A>(row[c + j]) / denominator);
      } else {
        // V divides the plane: the pack lies in one channel's plane.
        const T value = convert<T>(convert<A>(row[first / plane]) / denominator);
#pragma unroll
        for (int j = 0; j < V; ++j) p.v[j] = value;
      }
      out[q] = p;
    }
  }
}

template <class T, int V, bool kChannelsLast>
void launch_backward(const T* gy, T* gx, int64_t images, int64_t channels, int64_t plane,
                     cudaStream_t stream) {
  const int64_t per_image = channels * plane;
  const unsigned blocks_x = grid_for(per_image / V);
  const unsigned rows = static_cast<unsigned>(images < 65535 ? images : 65535);
  const dim3 grid(blocks_x, rows);
  if (per_image <= INT32_MAX) {
    global_avg_pool2d_backward_kernel<T, V, kChannelsLast, uint32_t>
        <<<grid, kBlock, 0, stream>>>(gy, gx, images, static_cast<uint32_t>(per_image),
                                      static_cast<uint32_t>(channels), static_cast<uint32_t>(plane));
  } else {
    global_avg_pool2d_backward_kernel<T, V, kChannelsLast, int64_t>
        <<<grid, kBlock, 0, stream>>>(gy, gx, images, per_image, channels, plane);
  }
  LIFTOFF_LAUNCH_CHECK();
}
}  // namespace

// The forward is a mean over each image's pixels: ops/reduce's kernels, which keep the GPU's bandwidth busy
// for every shape (split extents, packed column loads). x channels-last is [N, H*W, C] in memory, a column
// reduction; NCHW is [N*C, H*W], a row reduction.
void global_avg_pool2d_forward(const Tensor& x, const Tensor& y) {
  const int64_t n = x.size(0), c = x.size(1), plane = x.size(2) * x.size(3);
  ReduceParams mean;
  mean.kind = ReduceKind::sum;
  mean.scale = 1.0 / static_cast<double>(plane);
  if (x.is_channels_last()) {
    reduce_forward(x, n, plane, c, mean, y, Tensor());
  } else {
    reduce_forward(x, n * c, plane, 1, mean, y, Tensor());
  }
}

void global_avg_pool2d_backward(const Tensor& gy, const Tensor& gx) {
  const int device = gy.device().index;
  DeviceGuard guard(device);
  if (gx.numel() == 0) return;
  const int64_t images = gx.size(0), channels = gx.size(1), plane = gx.size(2) * gx.size(3);
  const bool channels_last = gx.is_channels_last();
  dispatch_device_float(gy.dtype(), "global_avg_pool2d backward", [&](auto tag) {
    using T = decltype(tag);
    constexpr int V = static_cast<int>(16 / sizeof(T)) > 8 ? 8 : static_cast<int>(16 / sizeof(T));
    const auto* gyp = static_cast<const T*>(gy.raw_data());
    auto* gxp = static_cast<T*>(gx.raw_data());
    const cudaStream_t stream = compute_stream(device);
    // Whole packs: V divides the extent a pack must not cross, and every image starts aligned.
    const bool packed = (channels_last ? channels % V == 0 : plane % V == 0) &&
                        reinterpret_cast<uintptr_t>(gxp) % (V * sizeof(T)) == 0;
    if (channels_last) {
      packed ? launch_backward<T, V, true>(gyp, gxp, images, channels, plane, stream)
             : launch_backward<T, 1, true>(gyp, gxp, images, channels, plane, stream);
    } else {
      packed ? launch_backward<T, V, false>(gyp, gxp, images, channels, plane, stream)
             : launch_backward<T, 1, false>(gyp, gxp, images, channels, plane, stream);
    }
  });
}

}  // namespace liftoff::cuda
