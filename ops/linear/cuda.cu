#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "ops/linear/kernels.h"
#include "ops/reduce/kernels.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

namespace {
template <class T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

constexpr int kColumnThreads = 32;  // blockDim.x: vectors of one row's columns
constexpr int kRowThreads = 8;      // blockDim.y: rows of a block at once

// y[r, :] += bias in vectors of V elements (16 bytes when the row allows it): the bias vector a thread adds
// is loaded once and reused for every row it visits, and no index needs a division.
template <class T, int V>
__global__ void bias_add_kernel(T* y, const T* bias, int64_t rows, int64_t cols) {
  using A = acc_t<T>;
  const int64_t vectors = cols / V;
  for (int64_t cv = blockIdx.x * static_cast<int64_t>(kColumnThreads) + threadIdx.x; cv < vectors;
       cv += static_cast<int64_t>(gridDim.x) * kColumnThreads) {
    const Pack<T, V> b = reinterpret_cast<const Pack<T, V>*>(bias)[cv];
    for (int64_t r = blockIdx.y * static_cast<int64_t>(kRowThreads) + threadIdx.y; r < rows;
         r += static_cast<int64_t>(gridDim.y) * kRowThreads) {
      auto* at = reinterpret_cast<Pack<T, V>*>(y + r * cols) + cv;
      Pack<T, V> v = *at;
#pragma unroll
      for (int k = 0; k < V; ++k) v.v[k] = convert<T>(convert<A>(v.v[k]) + convert<A>(b.v[k]));
      *at = v;
    }
  }
}
}  // namespace

void bias_add(const Tensor& y, const Tensor& bias) {
  const int device = y.device().index;
  DeviceGuard guard(device);
  const int64_t rows = y.size(0);
  const int64_t cols = y.size(1);
  if (rows * cols == 0) return;
  dispatch_device_float(y.dtype(), "linear bias", [&](auto tag) {
    using T = decltype(tag);
    constexpr int kWide = 16 / sizeof(T);
    const auto launch = [&](auto width) {
      constexpr int V = decltype(width)::value;
      const int64_t vectors = cols / V;
      const unsigned gx =
          static_cast<unsigned>(std::min<int64_t>((vectors + kColumnThreads - 1) / kColumnThreads, 65535));
      // Enough row blocks for about 4 waves of 256-thread blocks over the SMs.
      int sms = 0;
      LIFTOFF_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
      const int64_t want = std::max<int64_t>(1, int64_t{4} * sms * 8 / gx);
      const unsigned gy =
          static_cast<unsigned>(std::min<int64_t>({want, (rows + kRowThreads - 1) / kRowThreads, 65535}));
      bias_add_kernel<T, V><<<dim3(gx, gy), dim3(kColumnThreads, kRowThreads), 0, compute_stream(device)>>>(
          static_cast<T*>(y.raw_data()), static_cast<const T*>(bias.raw_data()), rows, cols);
    };
    const bool aligned = reinterpret_cast<uintptr_t>(y.raw_data()) % 16 == 0 &&
                         reinterpret_cast<uintptr_t>(bias.raw_data()) % 16 == 0 && cols % kWide == 0;
    if (aligned) {
      launch(std::integral_constant<int, kWide>{});
    } else {
      launch(std::integral_constant<int, 1>{});
    }
    LIFTOFF_LAUNCH_CHECK();
  });
}

// The column sums are the reduction of [1, rows, cols] over its middle dimension: the reduce op's kernels
// (split over the rows when the columns alone leave the GPU idle, vectorised, a fixed order).
void bias_grad(const Tensor& gy, const Tensor& gb) {
  const int64_t rows = gy.size(0);
  const int64_t cols = gy.size(1);
  if (cols == 0) return;
  if (rows == 0) {
    gb.zero_();
    return;
  }
  reduce_forward(gy, 1, rows, cols, ReduceParams{}, gb, Tensor());
}

}  // namespace liftoff::cuda
