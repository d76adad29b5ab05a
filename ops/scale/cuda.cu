#include "ops/scale/kernels.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

namespace {
template <class T>
__global__ void scale_kernel(const T* x, acc_t<T> factor, T* y, int64_t n) {
  LIFTOFF_GRID_STRIDE_LOOP(i, n) {
    y[i] = convert<T>(convert<acc_t<T>>(x[i]) * factor);
  }
}
}  // namespace

void scale_forward(const Tensor& x, double factor, const Tensor& y) {
  const int device = x.device().index;
  DeviceGuard guard(device);
  const int64_t n = x.numel();
  if (n == 0) return;
  dispatch_device_float(x.dtype(), "scale", [&](auto tag) {
    using T = decltype(tag);
    scale_kernel<T><<<grid_for(n), kBlock, 0, compute_stream(device)>>>(
        static_cast<const T*>(x.raw_data()), static_cast<acc_t<T>>(factor), static_cast<T*>(y.raw_data()), n);
    LIFTOFF_LAUNCH_CHECK();
  });
}

}  // namespace liftoff::cuda
