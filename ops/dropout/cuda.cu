#include "ops/dropout/kernels.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"
#include "runtime/philox.h"

namespace liftoff::cuda {

namespace {
// Thread g handles elements 4g .. 4g+3 with the four words of Philox(seed, offset, g), as the CPU kernel
// does; (seed, offset) come from `draw` (read on the device inside a captured graph).
template <class T>
__global__ void dropout_kernel(const T* x, T* y, int64_t n, float threshold, acc_t<T> keep_scale,
                               PhiloxDraw draw) {
  const PhiloxDraw d = draw.resolve();
  const int64_t groups = (n + 3) / 4;
  LIFTOFF_GRID_STRIDE_LOOP(g, groups) {
    const Philox4 r = philox_at(d.seed, d.offset, static_cast<uint64_t>(g));
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t i = 4 * g + j;
      if (i < n) {
        const bool keep = philox_uniform(r.v[j]) >= threshold;
        y[i] = keep ? convert<T>(convert<acc_t<T>>(x[i]) * keep_scale) : convert<T>(0.0f);
      }
    }
  }
}
}  // namespace

void dropout_apply(const Tensor& x, double p, const PhiloxDraw& draw, const Tensor& y) {
  const int device = x.device().index;
  DeviceGuard guard(device);
  const int64_t n = x.numel();
  if (n == 0) return;
  dispatch_device_float(x.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    const acc_t<T> keep_scale = p < 1.0 ? static_cast<acc_t<T>>(1.0 / (1.0 - p)) : acc_t<T>(0);
    const int64_t groups = (n + 3) / 4;
    dropout_kernel<T><<<grid_for(groups), kBlock, 0, compute_stream(device)>>>(
        static_cast<const T*>(x.raw_data()), static_cast<T*>(y.raw_data()), n, static_cast<float>(p),
        keep_scale, draw);
    LIFTOFF_LAUNCH_CHECK();
  });
}

}  // namespace liftoff::cuda
