#include "ops/add/kernels.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

namespace {
template <class T>
__global__ void add_kernel(const T* a, const T* b, T* y, int64_t n) {
  LIFTOFF_GRID_STRIDE_LOOP(i, n) {
    y[i] = convert<T>(convert<acc_t<T>>(a[i]) + convert<acc_t<T>>(b[i]));
  }
}
}  // namespace

void add_forward(const Tensor& a, const Tensor& b, const Tensor& y) {
  const int device = a.device().index;
  DeviceGuard guard(device);
  const int64_t n = a.numel();
  if (n == 0) return;
  dispatch_device_float(a.dtype(), "add", [&](auto tag) {
    using T = decltype(tag);
    add_kernel<T><<<grid_for(n), kBlock, 0, compute_stream(device)>>>(static_cast<const T*>(a.raw_data()),
                                                                      static_cast<const T*>(b.raw_data()),
                                                                      static_cast<T*>(y.raw_data()), n);
    LIFTOFF_LAUNCH_CHECK();
  });
}

}  // namespace liftoff::cuda
