#include <cmath>

#include "ops/cross_entropy/kernels.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

namespace {
constexpr int kWarpsPerBlock = 8;
constexpr int kReduceBlock = 1024;

template <class A>
__device__ __forceinline__ A warp_sum(A v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
template <class A>
__device__ __forceinline__ A warp_max(A v) {
  for (int offset = 16; offset > 0; offset /= 2) v = max(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

__device__ __forceinline__ float exp_acc(float v) {
  return expf(v);
}
__device__ __forceinline__ double exp_acc(double v) {
  return exp(v);
}
__device__ __forceinline__ float log_acc(float v) {
  return logf(v);
}
__device__ __forceinline__ double log_acc(double v) {
  return log(v);
}

// One warp per row: max, then sum of exp and sum of logits; lane 0 writes the row's loss and log-sum-exp.
template <class T, class A>
__global__ void row_loss_kernel(const T* logits, const int64_t* labels, int64_t rows, int64_t classes, A on,
                                A spread, A* row_loss, A* lse) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kWarpsPerBlock) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;  // whole warps exit together
  const T* z = logits + row * classes;
  A max_v = -INFINITY;
  for (int64_t j = lane; j < classes; j += 32) max_v = max(max_v, convert<A>(z[j]));
  max_v = warp_max(max_v);
  A sum_exp = 0, sum_z = 0;
  for (int64_t j = lane; j < classes; j += 32) {
    const A v = convert<A>(z[j]);
    sum_exp += exp_acc(v - max_v);
    sum_z += v;
  }
  sum_exp = warp_sum(sum_exp);
  sum_z = warp_sum(sum_z);
  if (lane == 0) {
    const A log_sum_exp = max_v + log_acc(sum_exp);
    lse[row] = log_sum_exp;
    const int64_t label = labels[row];
    // A bad label cannot throw here without a host sync: poison the loss instead.
    row_loss[row] =
        (label < 0 || label >= classes) ? A(NAN) : log_sum_exp - on * convert<A>(z[label]) - spread * sum_z;
  }
}

// Single block, fixed order: the mean does not depend on scheduling.
template <class T, class A>
__global__ void mean_kernel(const A* row_loss, int64_t rows, T* loss) {
  __shared__ A warp_totals[kReduceBlock / 32];
  A acc = 0;
  for (int64_t i = threadIdx.x; i < rows; i += blockDim.x) acc += row_loss[i];
  acc = warp_sum(acc);
  if (threadIdx.x % 32 == 0) warp_totals[threadIdx.x / 32] = acc;
  __syncthreads();
  if (threadIdx.x < 32) {
    acc = threadIdx.x < blockDim.x / 32 ? warp_totals[threadIdx.x] : A(0);
    acc = warp_sum(acc);
    if (threadIdx.x == 0) loss[0] = convert<T>(acc / static_cast<A>(rows));
  }
}

template <class T, class A>
__global__ void backward_kernel(const T* logits, const int64_t* labels, const A* lse, const T* grad_loss,
                                int64_t rows, int64_t classes, A on, A spread, T* grad_logits) {
  const A scale = convert<A>(grad_loss[0]) / static_cast<A>(rows);
  LIFTOFF_GRID_STRIDE_LOOP(i, rows * classes) {
    const int64_t row = i / classes;
    const int64_t j = i - row * classes;
    const int64_t label = labels[row];
    const bool valid = label >= 0 && label < classes;
    const A p = exp_acc(convert<A>(logits[i]) - lse[row]);
    const A target = spread + (j == label ? on : A(0));
    grad_logits[i] = convert<T>(valid ? (p - target) * scale : A(NAN));
  }
}
}  // namespace

void cross_entropy_forward(const Tensor& logits, const Tensor& labels, double smoothing, const Tensor& loss,
                           const Tensor& lse) {
  const int device = logits.device().index;
  DeviceGuard guard(device);
  cudaStream_t stream = compute_stream(device);
  const int64_t rows = logits.size(0);
  const int64_t classes = logits.size(1);
  dispatch_device_float(logits.dtype(), "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const Tensor row_loss = Tensor::empty({rows}, DTypeOf<A>::value, logits.device());
    const unsigned blocks = static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
    row_loss_kernel<T, A><<<blocks, kWarpsPerBlock * 32, 0, stream>>>(
        static_cast<const T*>(logits.raw_data()), labels.data<int64_t>(), rows, classes,
        static_cast<A>(1.0 - smoothing), static_cast<A>(smoothing / static_cast<double>(classes)),
        static_cast<A*>(row_loss.raw_data()), static_cast<A*>(lse.raw_data()));
    LIFTOFF_LAUNCH_CHECK();
    mean_kernel<T, A><<<1, kReduceBlock, 0, stream>>>(static_cast<const A*>(row_loss.raw_data()), rows,
                                                      static_cast<T*>(loss.raw_data()));
    LIFTOFF_LAUNCH_CHECK();
  });
}

void cross_entropy_backward(const Tensor& logits, const Tensor& labels, const Tensor& lse,
                            const Tensor& grad_loss, double smoothing, const Tensor& grad_logits) {
  const int device = logits.device().index;
  DeviceGuard guard(device);
  const int64_t rows = logits.size(0);
  const int64_t classes = logits.size(1);
  dispatch_device_float(logits.dtype(), "cross_entropy backward", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    backward_kernel<T, A><<<grid_for(rows * classes), kBlock, 0, compute_stream(device)>>>(
        static_cast<const T*>(logits.raw_data()), labels.data<int64_t>(),
        static_cast<const A*>(lse.raw_data()), static_cast<const T*>(grad_loss.raw_data()), rows, classes,
        static_cast<A>(1.0 - smoothing), static_cast<A>(smoothing / static_cast<double>(classes)),
        static_cast<T*>(grad_logits.raw_data()));
    LIFTOFF_LAUNCH_CHECK();
  });
}

}  // namespace liftoff::cuda
