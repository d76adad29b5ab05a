#include "ops/linear/kernels.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

namespace {
constexpr int kWarp = 32;
constexpr int kRowsPerBlock = 8;  // blockDim.y of the column-sum kernel

template <class T>
__global__ void bias_add_kernel(T* y, const T* bias, int64_t rows, int64_t cols) {
  LIFTOFF_GRID_STRIDE_LOOP(i, rows * cols) {
    y[i] = convert<T>(convert<acc_t<T>>(y[i]) + convert<acc_t<T>>(bias[i % cols]));
  }
}

// Column sums with a fixed order: thread (x, y) sums rows y, y + 8, ... of its column, then the 8 partials
// are added in shared memory. Coalesced along the row, no atomics.
template <class T>
__global__ void bias_grad_kernel(const T* gy, T* gb, int64_t rows, int64_t cols) {
  __shared__ acc_t<T> partial[kRowsPerBlock][kWarp + 1];
  const int64_t col = blockIdx.x * static_cast<int64_t>(kWarp) + threadIdx.x;
  acc_t<T> acc = 0;
  if (col < cols) {
    for (int64_t r = threadIdx.y; r < rows; r += kRowsPerBlock) acc += convert<acc_t<T>>(gy[r * cols + col]);
  }
  partial[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    acc_t<T> total = 0;
    for (int r = 0; r < kRowsPerBlock; ++r) total += partial[r][threadIdx.x];
    gb[col] = convert<T>(total);
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
    bias_add_kernel<T><<<grid_for(rows * cols), kBlock, 0, compute_stream(device)>>>(
        static_cast<T*>(y.raw_data()), static_cast<const T*>(bias.raw_data()), rows, cols);
    LIFTOFF_LAUNCH_CHECK();
  });
}

void bias_grad(const Tensor& gy, const Tensor& gb) {
  const int device = gy.device().index;
  DeviceGuard guard(device);
  const int64_t rows = gy.size(0);
  const int64_t cols = gy.size(1);
  if (cols == 0) return;
  dispatch_device_float(gy.dtype(), "linear bias backward", [&](auto tag) {
    using T = decltype(tag);
    const dim3 block(kWarp, kRowsPerBlock);
    const dim3 grid(static_cast<unsigned>((cols + kWarp - 1) / kWarp));
    bias_grad_kernel<T><<<grid, block, 0, compute_stream(device)>>>(
        static_cast<const T*>(gy.raw_data()), static_cast<T*>(gb.raw_data()), rows, cols);
    LIFTOFF_LAUNCH_CHECK();
  });
}

}  // namespace liftoff::cuda
