// CUDA kernels of swish on the device's compute stream (the stream every Liftoff op uses, so ordering with
// the library's own kernels is implicit). beta is read inside the kernels: the host never waits.
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/dispatch.h"
#include "swish_kernels.h"

namespace example::cuda {

using namespace liftoff;

namespace {
constexpr int kThreads = 256;

int blocks_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 4096 ? blocks : 4096);  // grid-stride loops cover the rest
}

template <class T>
__device__ T sigmoid(T v) {
  return T(1) / (T(1) + exp(-v));
}

template <class T>
__global__ void swish_forward_kernel(const T* x, const T* beta, T* y, int64_t n) {
  const T b = *beta;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] = x[i] * sigmoid(b * x[i]);
  }
}

template <class T>
__global__ void swish_backward_kernel(const T* x, const T* beta, const T* gy, T* gx, T* gb, int64_t n) {
  const T b = *beta;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const T s = sigmoid(b * x[i]);
    const T ds = s * (T(1) - s);
    gx[i] = gy[i] * (s + b * x[i] * ds);
    if (gb) gb[i] = gy[i] * x[i] * x[i] * ds;
  }
}
}  // namespace

void swish_forward(const Tensor& x, const Tensor& beta, const Tensor& y) {
  const int device = x.device().index;
  liftoff::cuda::DeviceGuard guard(device);
  const int64_t n = x.numel();
  if (n == 0) return;
  dispatch_float(x.dtype(), "swish", [&](auto tag) {
    using T = decltype(tag);
    swish_forward_kernel<T><<<blocks_for(n), kThreads, 0, liftoff::cuda::compute_stream(device)>>>(
        x.data<T>(), beta.data<T>(), y.data<T>(), n);
    LIFTOFF_LAUNCH_CHECK();
  });
}

void swish_backward(const Tensor& x, const Tensor& beta, const Tensor& grad_y, const Tensor& grad_x,
                    const Tensor& grad_beta_elements) {
  const int device = x.device().index;
  liftoff::cuda::DeviceGuard guard(device);
  const int64_t n = x.numel();
  if (n == 0) return;
  dispatch_float(x.dtype(), "swish backward", [&](auto tag) {
    using T = decltype(tag);
    T* gb = grad_beta_elements.defined() ? grad_beta_elements.data<T>() : nullptr;
    swish_backward_kernel<T><<<blocks_for(n), kThreads, 0, liftoff::cuda::compute_stream(device)>>>(
        x.data<T>(), beta.data<T>(), grad_y.data<T>(), grad_x.data<T>(), gb, n);
    LIFTOFF_LAUNCH_CHECK();
  });
}

}  // namespace example::cuda
