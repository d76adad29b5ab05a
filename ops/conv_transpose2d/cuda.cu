#include "ops/conv_transpose2d/kernels.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

namespace {
// nhwc: the channel is the innermost index.
template <class T>
__global__ void add_bias_kernel(T* y, const T* bias, int64_t n, int64_t plane, int64_t channels, bool nhwc) {
  LIFTOFF_GRID_STRIDE_LOOP(i, n) {
    const int64_t ch = nhwc ? i % channels : (i / plane) % channels;
    y[i] = convert<T>(convert<acc_t<T>>(y[i]) + convert<acc_t<T>>(bias[ch]));
  }
}
}  // namespace

void conv_transpose2d_add_bias(const Tensor& y, const Tensor& bias) {
  const int device = y.device().index;
  DeviceGuard guard(device);
  const int64_t n = y.numel();
  if (n == 0) return;
  const bool nhwc = !y.is_contiguous() && y.is_channels_last();
  dispatch_device_float(y.dtype(), "conv_transpose2d", [&](auto tag) {
    using T = decltype(tag);
    add_bias_kernel<T><<<grid_for(n), kBlock, 0, compute_stream(device)>>>(
        static_cast<T*>(y.raw_data()), static_cast<const T*>(bias.raw_data()), n, y.size(2) * y.size(3),
        y.size(1), nhwc);
    LIFTOFF_LAUNCH_CHECK();
  });
}

}  // namespace liftoff::cuda
