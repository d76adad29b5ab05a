#include "ops/pad/kernels.h"
#include "ops/pad/pad_backward.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

namespace {
template <class T>
struct LoadAs {
  const T* g;
  __device__ acc_t<T> operator()(int64_t off) const { return convert<acc_t<T>>(g[off]); }
};

// One thread per input element: it gathers every output that copied it (no atomics, fixed order).
template <class T>
__global__ void pad_backward_kernel(const T* gy, Strided gs, Strided xs, RemapPlan plan, int padded, T* gx,
                                    int64_t n) {
  LIFTOFF_GRID_STRIDE_LOOP(i, n) {
    gx[i] = convert<T>(pad_backward_element<acc_t<T>>(xs, gs, plan, padded, i, LoadAs<T>{gy}));
  }
}
}  // namespace

void pad_backward(const Tensor& gy, const RemapPlan& plan, int padded, const Tensor& gx) {
  const int device = gx.device().index;
  DeviceGuard guard(device);
  const int64_t n = gx.numel();
  const Strided xs = strided_of(gx, "pad backward");
  const Strided gs = strided_of(gy, "pad backward");
  dispatch_device_float(gx.dtype(), "pad backward", [&](auto tag) {
    using T = decltype(tag);
    pad_backward_kernel<T><<<grid_for(n), kBlock, 0, compute_stream(device)>>>(
        static_cast<const T*>(gy.raw_data()), gs, xs, plan, padded, static_cast<T*>(gx.raw_data()), n);
    LIFTOFF_LAUNCH_CHECK();
  });
}

}  // namespace liftoff::cuda
