// AMP kernels: scale by a device scalar, the multi-tensor unscale + inf/NaN check (the multi-tensor apply of
// ops/optimizer_step), and the one-thread scale update. Nothing here reads a device value on the host.
#include "ops/amp/kernels.h"
#include "ops/optimizer_step/multi_tensor_apply.cuh"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

namespace {
using mta::kChunk;
using mta::TensorListMeta;

static_assert(sizeof(TensorListMeta<1>) + 2 * sizeof(void*) <= 4000, "kernel parameters must stay < 4 KB");

template <class T>
__global__ void scale_by_kernel(const T* x, const float* factor, T* y, int64_t n) {
  using A = acc_t<T>;
  const A f = static_cast<A>(*factor);
  LIFTOFF_GRID_STRIDE_LOOP(i, n) {
    y[i] = convert<T>(convert<A>(x[i]) * f);
  }
}

// Checks each value before scaling (as PyTorch). Racing writes of the same 1.0 to found_inf are benign.
template <class T>
__global__ void unscale_kernel(TensorListMeta<1> meta, const float* inv_scale, float* found_inf) {
  using A = acc_t<T>;
  const int tensor = meta.block_tensor[blockIdx.x];
  const int64_t start = static_cast<int64_t>(meta.block_chunk[blockIdx.x]) * kChunk;
  const int64_t end = min(meta.sizes[tensor], start + kChunk);
  T* g = static_cast<T*>(meta.ptrs[0][tensor]);
  const A inv = static_cast<A>(*inv_scale);
  bool bad = false;
  for (int64_t i = start + threadIdx.x; i < end; i += blockDim.x) {
    const A v = convert<A>(g[i]);
    bad |= !isfinite(v);
    g[i] = convert<T>(v * inv);
  }
  if (bad) *found_inf = 1.0f;
}

__global__ void inverse_scale_kernel(const float* scale, float* inv_scale) {
  *inv_scale = static_cast<float>(1.0 / static_cast<double>(*scale));
}

template <class I>
__global__ void update_scale_kernel(float* scale, I* tracker, const float* found_inf, UpdateScaleArgs args,
                                    int64_t* skipped) {
  if (*found_inf != 0.0f) {  // NaN counts as found
    *scale = static_cast<float>(static_cast<double>(*scale) * args.backoff_factor);
    *tracker = 0;
    if (skipped != nullptr) *skipped += 1;
    return;
  }
  const int64_t successful = static_cast<int64_t>(*tracker) + 1;
  if (successful >= args.growth_interval) {
    const float grown = static_cast<float>(static_cast<double>(*scale) * args.growth_factor);
    if (isfinite(grown)) *scale = grown;
    *tracker = 0;
  } else {
    *tracker = static_cast<I>(successful);
  }
}

const float* scalar_f32(const Tensor& t) {
  return static_cast<const float*>(t.raw_data());
}
float* mutable_f32(const Tensor& t) {
  return static_cast<float*>(t.raw_data());
}
}  // namespace

void scale_by_forward(const Tensor& x, const Tensor& factor, const Tensor& y) {
  const int device = x.device().index;
  DeviceGuard guard(device);
  const int64_t n = x.numel();
  if (n == 0) return;
  dispatch_device_float(x.dtype(), "scale_by", [&](auto tag) {
    using T = decltype(tag);
    scale_by_kernel<T><<<grid_for(n), kBlock, 0, compute_stream(device)>>>(
        static_cast<const T*>(x.raw_data()), scalar_f32(factor), static_cast<T*>(y.raw_data()), n);
    LIFTOFF_LAUNCH_CHECK();
  });
}

void unscale_and_check(const std::vector<Tensor>& grads, const Tensor& inv_scale, const Tensor& found_inf) {
  const int device = inv_scale.device().index;
  DeviceGuard guard(device);
  cudaStream_t stream = compute_stream(device);
  const float* inv = scalar_f32(inv_scale);
  float* found = mutable_f32(found_inf);
  dispatch_device_float(grads[0].dtype(), "unscale_and_check", [&](auto tag) {
    using T = decltype(tag);
    mta::apply<1>({&grads}, [&](const TensorListMeta<1>& meta, int blocks) {
      unscale_kernel<T><<<blocks, mta::kBlock, 0, stream>>>(meta, inv, found);
      LIFTOFF_LAUNCH_CHECK();
    });
  });
}

void inverse_scale(const Tensor& scale, const Tensor& inv_scale) {
  const int device = scale.device().index;
  DeviceGuard guard(device);
  inverse_scale_kernel<<<1, 1, 0, compute_stream(device)>>>(scalar_f32(scale), mutable_f32(inv_scale));
  LIFTOFF_LAUNCH_CHECK();
}

void update_scale(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                  const UpdateScaleArgs& args, const Tensor& skipped_steps) {
  const int device = scale.device().index;
  DeviceGuard guard(device);
  cudaStream_t stream = compute_stream(device);
  int64_t* skipped = skipped_steps.defined() ? static_cast<int64_t*>(skipped_steps.raw_data()) : nullptr;
  if (growth_tracker.dtype() == DType::i64) {
    update_scale_kernel<int64_t><<<1, 1, 0, stream>>>(mutable_f32(scale),
                                                      static_cast<int64_t*>(growth_tracker.raw_data()),
                                                      scalar_f32(found_inf), args, skipped);
  } else {
    update_scale_kernel<int32_t><<<1, 1, 0, stream>>>(mutable_f32(scale),
                                                      static_cast<int32_t*>(growth_tracker.raw_data()),
                                                      scalar_f32(found_inf), args, skipped);
  }
  LIFTOFF_LAUNCH_CHECK();
}

}  // namespace liftoff::cuda
