#include "ops/relu/kernels.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

namespace {
template <class T>
__global__ void relu_forward_kernel(const T* x, T* y, int64_t n) {
  LIFTOFF_GRID_STRIDE_LOOP(i, n) {
    const acc_t<T> v = convert<acc_t<T>>(x[i]);
    y[i] = convert<T>(v > acc_t<T>(0) ? v : acc_t<T>(0));
  }
}

template <class T>
__global__ void relu_backward_kernel(const T* y, const T* gy, T* gx, int64_t n) {
  LIFTOFF_GRID_STRIDE_LOOP(i, n) {
    gx[i] = convert<acc_t<T>>(y[i]) > acc_t<T>(0) ? gy[i] : convert<T>(0.0f);
  }
}
}  // namespace

void relu_forward(const Tensor& x, const Tensor& y) {
  const int device = x.device().index;
  DeviceGuard guard(device);
  const int64_t n = x.numel();
  if (n == 0) return;
  dispatch_device_float(x.dtype(), "relu", [&](auto tag) {
    using T = decltype(tag);
    relu_forward_kernel<T><<<grid_for(n), kBlock, 0, compute_stream(device)>>>(
        static_cast<const T*>(x.raw_data()), static_cast<T*>(y.raw_data()), n);
    LIFTOFF_LAUNCH_CHECK();
  });
}

void relu_backward(const Tensor& y, const Tensor& grad_y, const Tensor& grad_x) {
  const int device = y.device().index;
  DeviceGuard guard(device);
  const int64_t n = y.numel();
  if (n == 0) return;
  dispatch_device_float(y.dtype(), "relu backward", [&](auto tag) {
    using T = decltype(tag);
    relu_backward_kernel<T><<<grid_for(n), kBlock, 0, compute_stream(device)>>>(
        static_cast<const T*>(y.raw_data()), static_cast<const T*>(grad_y.raw_data()),
        static_cast<T*>(grad_x.raw_data()), n);
    LIFTOFF_LAUNCH_CHECK();
  });
}

}  // namespace liftoff::cuda
