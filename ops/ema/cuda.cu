// EMA update and content swap over multi-tensor apply (ops/optimizer_step/multi_tensor_apply.cuh): one launch
// per few dozen tensors on the compute stream, the decay a kernel parameter (a constant of the run, so a
// captured graph replays it as is).
#include "ops/ema/kernels.h"
#include "ops/optimizer_step/multi_tensor_apply.cuh"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

namespace {
using mta::kChunk;
using mta::TensorListMeta;

static_assert(sizeof(TensorListMeta<2>) + 2 * sizeof(double) <= 4000, "kernel parameters must stay < 4 KB");

template <class T>
__global__ void ema_update_kernel(TensorListMeta<2> meta, T keep, T take) {
  const int tensor = meta.block_tensor[blockIdx.x];
  const int64_t start = static_cast<int64_t>(meta.block_chunk[blockIdx.x]) * kChunk;
  const int64_t end = min(meta.sizes[tensor], start + kChunk);
  T* avg = static_cast<T*>(meta.ptrs[0][tensor]);
  const T* cur = static_cast<const T*>(meta.ptrs[1][tensor]);
  for (int64_t i = start + threadIdx.x; i < end; i += blockDim.x) avg[i] = keep * avg[i] + take * cur[i];
}

template <class T>
__global__ void swap_kernel(TensorListMeta<2> meta) {
  const int tensor = meta.block_tensor[blockIdx.x];
  const int64_t start = static_cast<int64_t>(meta.block_chunk[blockIdx.x]) * kChunk;
  const int64_t end = min(meta.sizes[tensor], start + kChunk);
  T* x = static_cast<T*>(meta.ptrs[0][tensor]);
  T* y = static_cast<T*>(meta.ptrs[1][tensor]);
  for (int64_t i = start + threadIdx.x; i < end; i += blockDim.x) {
    const T v = x[i];
    x[i] = y[i];
    y[i] = v;
  }
}

// Calls fn(T{}) for f32 / f64 (the front admits nothing else).
template <class Fn>
void dispatch_f32_f64(DType dtype, Fn&& fn) {
  if (dtype == DType::f64) {
    fn(double{});
  } else {
    fn(float{});
  }
}
}  // namespace

void ema_update(const std::vector<Tensor>& averaged, const std::vector<Tensor>& current, double decay) {
  const int device = averaged[0].device().index;
  DeviceGuard guard(device);
  cudaStream_t stream = compute_stream(device);
  dispatch_f32_f64(averaged[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T keep = static_cast<T>(decay), take = static_cast<T>(1.0 - decay);
    mta::apply<2>({&averaged, &current}, [&](const TensorListMeta<2>& meta, int blocks) {
      ema_update_kernel<T><<<blocks, mta::kBlock, 0, stream>>>(meta, keep, take);
      LIFTOFF_LAUNCH_CHECK();
    });
  });
}

void swap_contents(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  const int device = a[0].device().index;
  DeviceGuard guard(device);
  cudaStream_t stream = compute_stream(device);
  dispatch_f32_f64(a[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    mta::apply<2>({&a, &b}, [&](const TensorListMeta<2>& meta, int blocks) {
      swap_kernel<T><<<blocks, mta::kBlock, 0, stream>>>(meta);
      LIFTOFF_LAUNCH_CHECK();
    });
  });
}

}  // namespace liftoff::cuda
