// Fused optimizer kernels over multi-tensor apply (multi_tensor_apply.cuh). With a skip flag (AMP found_inf)
// every block reads it first and returns when it is non-zero: the decision stays on the device.
#include <cmath>

#include "ops/optimizer_step/kernels.h"
#include "ops/optimizer_step/multi_tensor_apply.cuh"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

namespace {
using mta::kChunk;
using mta::TensorListMeta;

template <class A>
struct SgdArgs {
  A lr, momentum, weight_decay;
  bool nesterov, use_momentum;
  const float* skip;       // null, or a device flag: non-zero leaves everything untouched
  const float* lr_device;  // null, or the learning rate on the device (then `lr` is unused)
};
template <class A>
struct AdamWArgs {
  A decay, beta1, beta2, one_minus_beta1, one_minus_beta2, step_size, bias_correction2_sqrt, eps;
  const float* skip;  // as in SgdArgs
};

static_assert(sizeof(TensorListMeta<2>) <= 4000, "kernel parameters must stay < 4 KB");
static_assert(sizeof(TensorListMeta<3>) + sizeof(SgdArgs<double>) <= 4000,
              "kernel parameters must stay < 4 KB");
static_assert(sizeof(TensorListMeta<4>) + sizeof(AdamWArgs<double>) <= 4000,
              "kernel parameters must stay < 4 KB");

__device__ __forceinline__ float sqrt_acc(float v) {
  return sqrtf(v);
}
__device__ __forceinline__ double sqrt_acc(double v) {
  return sqrt(v);
}

// dst += src per element, as the one-tensor accumulate kernel adds (16-bit floats in f32).
template <class T>
__global__ void accumulate_lists_kernel(TensorListMeta<2> meta) {
  const int tensor = meta.block_tensor[blockIdx.x];
  const int64_t start = static_cast<int64_t>(meta.block_chunk[blockIdx.x]) * kChunk;
  const int64_t end = min(meta.sizes[tensor], start + kChunk);
  T* dst = static_cast<T*>(meta.ptrs[0][tensor]);
  const T* src = static_cast<const T*>(meta.ptrs[1][tensor]);
  for (int64_t i = start + threadIdx.x; i < end; i += blockDim.x) {
    if constexpr (IsHalfType<T>::value) {
      dst[i] = convert<T>(convert<float>(dst[i]) + convert<float>(src[i]));
    } else {
      dst[i] = dst[i] + src[i];
    }
  }
}

// P: parameter/state type (float or double); G: gradient type.
template <class P, class G>
__global__ void sgd_kernel(TensorListMeta<3> meta, SgdArgs<P> args) {
  if (args.skip != nullptr && *args.skip != 0.0f) return;  // NaN counts as set
  const P lr = args.lr_device != nullptr ? static_cast<P>(*args.lr_device) : args.lr;
  const int tensor = meta.block_tensor[blockIdx.x];
  const int64_t start = static_cast<int64_t>(meta.block_chunk[blockIdx.x]) * kChunk;
  const int64_t end = min(meta.sizes[tensor], start + kChunk);
  P* p = static_cast<P*>(meta.ptrs[0][tensor]);
  const G* g = static_cast<const G*>(meta.ptrs[1][tensor]);
  P* buf = static_cast<P*>(meta.ptrs[2][tensor]);
  for (int64_t i = start + threadIdx.x; i < end; i += blockDim.x) {
    P d = convert<P>(g[i]);
    if (args.weight_decay != P(0)) d += args.weight_decay * p[i];
    if (args.use_momentum) {
      const P b = args.momentum * buf[i] + d;
      buf[i] = b;
      d = args.nesterov ? d + args.momentum * b : b;
    }
    p[i] -= lr * d;
  }
}

template <class P, class G>
__global__ void adamw_kernel(TensorListMeta<4> meta, AdamWArgs<P> args) {
  if (args.skip != nullptr && *args.skip != 0.0f) return;
  const int tensor = meta.block_tensor[blockIdx.x];
  const int64_t start = static_cast<int64_t>(meta.block_chunk[blockIdx.x]) * kChunk;
  const int64_t end = min(meta.sizes[tensor], start + kChunk);
  P* p = static_cast<P*>(meta.ptrs[0][tensor]);
  const G* g = static_cast<const G*>(meta.ptrs[1][tensor]);
  P* m = static_cast<P*>(meta.ptrs[2][tensor]);
  P* v = static_cast<P*>(meta.ptrs[3][tensor]);
  for (int64_t i = start + threadIdx.x; i < end; i += blockDim.x) {
    const P grad = convert<P>(g[i]);
    const P pi = p[i] * args.decay;
    const P mi = args.beta1 * m[i] + args.one_minus_beta1 * grad;
    const P vi = args.beta2 * v[i] + args.one_minus_beta2 * grad * grad;
    m[i] = mi;
    v[i] = vi;
    p[i] = pi - args.step_size * mi / (sqrt_acc(vi) / args.bias_correction2_sqrt + args.eps);
  }
}

// The data pointer of a one-element f32 device tensor, or null when it is undefined.
const float* scalar_pointer(const Tensor& flag) {
  return flag.defined() ? static_cast<const float*>(flag.raw_data()) : nullptr;
}

// Calls fn(P{}, G{}) for the parameter and gradient dtypes the front accepts.
template <class Fn>
void dispatch_param_grad(DType param, DType grad, const char* op, Fn&& fn) {
  if (param == DType::f64) {
    fn(double{}, double{});
    return;
  }
  dispatch_device_float(grad, op, [&](auto g) {
    if constexpr (std::is_same_v<decltype(g), double>) {
      throw DTypeError(str_cat(op, ": f64 gradients need f64 parameters"));
    } else {
      fn(float{}, g);
    }
  });
}
}  // namespace

void accumulate_gradients(const std::vector<Tensor>& sums, const std::vector<Tensor>& grads) {
  const int device = sums[0].device().index;
  DeviceGuard guard(device);
  cudaStream_t stream = compute_stream(device);
  dispatch_device_float(sums[0].dtype(), "accumulate_gradients", [&](auto tag) {
    using T = decltype(tag);
    mta::apply<2>({&sums, &grads}, [&](const TensorListMeta<2>& meta, int blocks) {
      accumulate_lists_kernel<T><<<blocks, mta::kBlock, 0, stream>>>(meta);
      LIFTOFF_LAUNCH_CHECK();
    });
  });
}

void sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
              const std::vector<Tensor>& momentum_buffers, const SgdScalars& s) {
  const int device = params[0].device().index;
  DeviceGuard guard(device);
  cudaStream_t stream = compute_stream(device);
  const bool use_momentum = !momentum_buffers.empty();
  dispatch_param_grad(params[0].dtype(), grads[0].dtype(), "sgd_step", [&](auto p_tag, auto g_tag) {
    using P = decltype(p_tag);
    using G = decltype(g_tag);
    SgdArgs<P> args{
        static_cast<P>(s.lr), static_cast<P>(s.momentum),        static_cast<P>(s.weight_decay), s.nesterov,
        use_momentum,         scalar_pointer(s.skip_if_nonzero), scalar_pointer(s.lr_tensor)};
    mta::apply<3>({&params, &grads, use_momentum ? &momentum_buffers : nullptr},
                  [&](const TensorListMeta<3>& meta, int blocks) {
                    sgd_kernel<P, G><<<blocks, mta::kBlock, 0, stream>>>(meta, args);
                    LIFTOFF_LAUNCH_CHECK();
                  });
  });
}

void adamw_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                const std::vector<Tensor>& exp_avg, const std::vector<Tensor>& exp_avg_sq,
                const AdamWScalars& s) {
  const int device = params[0].device().index;
  DeviceGuard guard(device);
  cudaStream_t stream = compute_stream(device);
  dispatch_param_grad(params[0].dtype(), grads[0].dtype(), "adamw_step", [&](auto p_tag, auto g_tag) {
    using P = decltype(p_tag);
    using G = decltype(g_tag);
    const AdamWArgs<P> args{static_cast<P>(1.0 - s.lr * s.weight_decay),
                            static_cast<P>(s.beta1),
                            static_cast<P>(s.beta2),
                            static_cast<P>(1.0 - s.beta1),
                            static_cast<P>(1.0 - s.beta2),
                            static_cast<P>(s.step_size),
                            static_cast<P>(s.bias_correction2_sqrt),
                            static_cast<P>(s.eps),
                            scalar_pointer(s.skip_if_nonzero)};
    mta::apply<4>({&params, &grads, &exp_avg, &exp_avg_sq}, [&](const TensorListMeta<4>& meta, int blocks) {
      adamw_kernel<P, G><<<blocks, mta::kBlock, 0, stream>>>(meta, args);
      LIFTOFF_LAUNCH_CHECK();
    });
  });
}

}  // namespace liftoff::cuda
