#include <algorithm>

#include "ops/reduce/kernels.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

namespace {
constexpr int kMaxPartials = 1024;  // first-pass blocks; also the second pass's block size
constexpr int kPerThread = 8;       // elements each thread adds before the block reduction

template <class A>
__device__ __forceinline__ A warp_sum(A v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

// Sum over the block in a fixed order; the result is valid in thread 0. blockDim.x is a multiple of 32.
template <class A>
__device__ A block_sum(A v) {
  __shared__ A warp_totals[32];
  v = warp_sum(v);
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  if (lane == 0) warp_totals[warp] = v;
  __syncthreads();
  const int warps = blockDim.x / 32;
  v = threadIdx.x < warps ? warp_totals[threadIdx.x] : A(0);
  if (warp == 0) v = warp_sum(v);
  return v;
}

template <class T, class A>
__global__ void partial_sum_kernel(const T* x, int64_t n, A* partial) {
  A acc = 0;
  LIFTOFF_GRID_STRIDE_LOOP(i, n) {
    acc += convert<A>(x[i]);
  }
  acc = block_sum(acc);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

template <class T, class A>
__global__ void final_sum_kernel(const A* partial, int count, A factor, T* y) {
  A acc = 0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) acc += partial[i];
  acc = block_sum(acc);
  if (threadIdx.x == 0) y[0] = convert<T>(acc * factor);
}

template <class T>
__global__ void fill_from_scalar_kernel(const T* gy, acc_t<T> factor, T* gx, int64_t n) {
  const T value = convert<T>(convert<acc_t<T>>(gy[0]) * factor);
  LIFTOFF_GRID_STRIDE_LOOP(i, n) {
    gx[i] = value;
  }
}
}  // namespace

void sum_forward(const Tensor& x, double factor, const Tensor& y) {
  const int device = x.device().index;
  DeviceGuard guard(device);
  cudaStream_t stream = compute_stream(device);
  const int64_t n = x.numel();
  dispatch_device_float(x.dtype(), "sum", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    // The block count depends only on n, so the summation order is the same on every run.
    const int64_t wanted = (n + kBlock * kPerThread - 1) / (kBlock * kPerThread);
    const int blocks = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(wanted, kMaxPartials)));
    const Tensor partial = Tensor::empty({blocks}, DTypeOf<A>::value, x.device());
    partial_sum_kernel<T, A><<<blocks, kBlock, 0, stream>>>(static_cast<const T*>(x.raw_data()), n,
                                                            static_cast<A*>(partial.raw_data()));
    LIFTOFF_LAUNCH_CHECK();
    final_sum_kernel<T, A><<<1, kMaxPartials, 0, stream>>>(static_cast<const A*>(partial.raw_data()), blocks,
                                                           static_cast<A>(factor),
                                                           static_cast<T*>(y.raw_data()));
    LIFTOFF_LAUNCH_CHECK();
  });
}

void sum_backward(const Tensor& gy, double factor, const Tensor& gx) {
  const int device = gy.device().index;
  DeviceGuard guard(device);
  const int64_t n = gx.numel();
  if (n == 0) return;
  dispatch_device_float(gy.dtype(), "sum backward", [&](auto tag) {
    using T = decltype(tag);
    fill_from_scalar_kernel<T><<<grid_for(n), kBlock, 0, compute_stream(device)>>>(
        static_cast<const T*>(gy.raw_data()), static_cast<acc_t<T>>(factor), static_cast<T*>(gx.raw_data()),
        n);
    LIFTOFF_LAUNCH_CHECK();
  });
}

}  // namespace liftoff::cuda
