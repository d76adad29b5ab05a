#include "ops/common/remap.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

namespace {
constexpr int64_t kWarpReduceMin = 64;  // reductions at least this long get a warp per output element

template <class T>
__global__ void remap_kernel(const T* src, Strided in, T* dst, Strided out, RemapPlan plan, T fill,
                             int64_t n) {
  LIFTOFF_GRID_STRIDE_LOOP(i, n) {
    const int64_t from = remap_source(out, in, plan, i);
    dst[strided_offset(out, i)] = from < 0 ? fill : src[from];
  }
}

// One thread per output element: short reductions (expand/repeat backward over a few copies).
template <class T, class A>
__global__ void sum_strided_thread_kernel(const T* src, Strided keep, Strided reduce, int64_t reduce_numel,
                                          T* dst, int64_t n) {
  LIFTOFF_GRID_STRIDE_LOOP(k, n) {
    const T* base = src + strided_offset(keep, k);
    A acc = 0;
    for (int64_t r = 0; r < reduce_numel; ++r) acc += convert<A>(base[strided_offset(reduce, r)]);
    dst[k] = convert<T>(acc);
  }
}

// One warp per output element: long reductions (a broadcast bias's gradient). Lanes stride the reduction,
// then a fixed shuffle tree adds them, so the order depends only on the sizes.
template <class T, class A>
__global__ void sum_strided_warp_kernel(const T* src, Strided keep, Strided reduce, int64_t reduce_numel,
                                        T* dst, int64_t n) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t k = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32; k < n; k += warps) {
    const T* base = src + strided_offset(keep, k);
    A acc = 0;
    for (int64_t r = lane; r < reduce_numel; r += 32) acc += convert<A>(base[strided_offset(reduce, r)]);
    for (int offset = 16; offset > 0; offset /= 2) acc += __shfl_down_sync(0xffffffffu, acc, offset);
    if (lane == 0) dst[k] = convert<T>(acc);
  }
}
}  // namespace

void remap(const Tensor& src, const Tensor& dst, const RemapPlan& plan, double fill) {
  const int device = dst.device().index;
  DeviceGuard guard(device);
  const int64_t n = dst.numel();
  const Strided in = strided_of(src, "remap");
  const Strided out = strided_of(dst, "remap");
  dispatch_device_all(dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    remap_kernel<T><<<grid_for(n), kBlock, 0, compute_stream(device)>>>(static_cast<const T*>(src.raw_data()),
                                                                        in, static_cast<T*>(dst.raw_data()),
                                                                        out, plan, convert<T>(fill), n);
    LIFTOFF_LAUNCH_CHECK();
  });
}

void sum_strided(const Tensor& src, const Strided& keep, const Strided& reduce, const Tensor& dst) {
  const int device = dst.device().index;
  DeviceGuard guard(device);
  cudaStream_t stream = compute_stream(device);
  const int64_t n = dst.numel();
  int64_t reduce_numel = 1;
  for (int d = 0; d < reduce.dims; ++d) reduce_numel *= reduce.shape[d];
  dispatch_device_float(dst.dtype(), "sum_strided", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* s = static_cast<const T*>(src.raw_data());
    T* d = static_cast<T*>(dst.raw_data());
    if (reduce_numel >= kWarpReduceMin) {
      sum_strided_warp_kernel<T, A>
          <<<grid_for(n * 32), kBlock, 0, stream>>>(s, keep, reduce, reduce_numel, d, n);
    } else {
      sum_strided_thread_kernel<T, A>
          <<<grid_for(n), kBlock, 0, stream>>>(s, keep, reduce, reduce_numel, d, n);
    }
    LIFTOFF_LAUNCH_CHECK();
  });
}

}  // namespace liftoff::cuda
