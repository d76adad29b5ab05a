// Fused optimizer kernels over multi-tensor apply (multi_tensor_apply.cuh). With a skip flag (AMP found_inf)
// every block reads it first and returns when it is non-zero: the decision stays on the device.
#include <algorithm>
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
  // With per-tensor counts (meta.ptrs[4]): decay, step_size and bias_correction2_sqrt come from these, per
  // tensor, on the device.
  double lr, weight_decay, beta1_pow_base, beta2_pow_base;
  const double* lr_device;  // null, or the learning rate on the device (then `lr` is unused)
};

// The counts one launch advances: kernel parameters, no copy.
constexpr int kCountsPerLaunch = 256;
struct CountList {
  int64_t* counts[kCountsPerLaunch];
  int n;
};

static_assert(sizeof(TensorListMeta<2>) <= 4000, "kernel parameters must stay < 4 KB");
static_assert(sizeof(TensorListMeta<3>) + sizeof(SgdArgs<double>) <= 4000,
              "kernel parameters must stay < 4 KB");
static_assert(sizeof(TensorListMeta<5>) + sizeof(AdamWArgs<double>) <= 4000,
              "kernel parameters must stay < 4 KB");
static_assert(sizeof(CountList) + sizeof(void*) <= 4000, "kernel parameters must stay < 4 KB");

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
  struct Pair {
    T d, s;
  };
  mta::walk_chunk(
      start, end,
      [&](int64_t i) {
        return Pair{dst[i], src[i]};
      },
      [&](int64_t i, const Pair& v) {
        if constexpr (IsHalfType<T>::value) {
          dst[i] = convert<T>(convert<float>(v.d) + convert<float>(v.s));
        } else {
          dst[i] = v.d + v.s;
        }
      });
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
  struct Loaded {
    P p, g, buf;
  };
  mta::walk_chunk(
      start, end,
      [&](int64_t i) {
        return Loaded{p[i], convert<P>(g[i]), args.use_momentum ? buf[i] : P(0)};
      },
      [&](int64_t i, const Loaded& v) {
        P d = v.g;
        if (args.weight_decay != P(0)) d += args.weight_decay * v.p;
        if (args.use_momentum) {
          const P b = args.momentum * v.buf + d;
          buf[i] = b;
          d = args.nesterov ? d + args.momentum * b : b;
        }
        p[i] = v.p - lr * d;
      });
}

// One more update for each count, unless the step is skipped (PyTorch: a skipped step is no step).
__global__ void adamw_count_kernel(CountList list, const float* skip) {
  if (skip != nullptr && *skip != 0.0f) return;
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < list.n) ++*list.counts[i];
}

// The host's double arithmetic of adamw_scalars() (optimizer_step.cpp), operation for operation (no FMA
// contraction but the explicit one), for update number t read on the device: decay = fma(-lr, wd, 1),
// step_size = lr / (1 - b1^t), bc2 = sqrt(1 - b2^t).
template <class P>
__device__ void adamw_device_scalars(const AdamWArgs<P>& args, int64_t count, P* decay, P* step_size,
                                     P* bias_correction2_sqrt) {
  const double t = static_cast<double>(count);
  const double lr = args.lr_device != nullptr ? *args.lr_device : args.lr;
  *decay = static_cast<P>(__fma_rn(-lr, args.weight_decay, 1.0));
  *step_size = static_cast<P>(__ddiv_rn(lr, __dsub_rn(1.0, pow(args.beta1_pow_base, t))));
  *bias_correction2_sqrt = static_cast<P>(__dsqrt_rn(__dsub_rn(1.0, pow(args.beta2_pow_base, t))));
}

// Depth 4: params, grads, exp_avg, exp_avg_sq with host scalars; depth 5: plus each tensor's update count.
template <class P, class G, int Depth>
__global__ void adamw_kernel(TensorListMeta<Depth> meta, AdamWArgs<P> args) {
  if (args.skip != nullptr && *args.skip != 0.0f) return;
  const int tensor = meta.block_tensor[blockIdx.x];
  P decay = args.decay, step_size = args.step_size, bias_correction2_sqrt = args.bias_correction2_sqrt;
  if constexpr (Depth == 5) {
    adamw_device_scalars(args, *static_cast<const int64_t*>(meta.ptrs[4][tensor]), &decay, &step_size,
                         &bias_correction2_sqrt);
  }
  const int64_t start = static_cast<int64_t>(meta.block_chunk[blockIdx.x]) * kChunk;
  const int64_t end = min(meta.sizes[tensor], start + kChunk);
  P* p = static_cast<P*>(meta.ptrs[0][tensor]);
  const G* g = static_cast<const G*>(meta.ptrs[1][tensor]);
  P* m = static_cast<P*>(meta.ptrs[2][tensor]);
  P* v = static_cast<P*>(meta.ptrs[3][tensor]);
  struct Loaded {
    P p, g, m, v;
  };
  mta::walk_chunk(
      start, end,
      [&](int64_t i) {
        return Loaded{p[i], convert<P>(g[i]), m[i], v[i]};
      },
      [&](int64_t i, const Loaded& x) {
        const P pi = x.p * decay;
        const P mi = args.beta1 * x.m + args.one_minus_beta1 * x.g;
        const P vi = args.beta2 * x.v + args.one_minus_beta2 * x.g * x.g;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi - step_size * mi / (sqrt_acc(vi) / bias_correction2_sqrt + args.eps);
      });
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

namespace {
void advance_counts(const std::vector<Tensor>& counts, const float* skip, cudaStream_t stream) {
  for (size_t start = 0; start < counts.size(); start += kCountsPerLaunch) {
    CountList list{};
    list.n = static_cast<int>(std::min<size_t>(kCountsPerLaunch, counts.size() - start));
    for (int i = 0; i < list.n; ++i) list.counts[i] = static_cast<int64_t*>(counts[start + i].raw_data());
    adamw_count_kernel<<<1, kCountsPerLaunch, 0, stream>>>(list, skip);
    LIFTOFF_LAUNCH_CHECK();
  }
}
}  // namespace

void adamw_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                const std::vector<Tensor>& exp_avg, const std::vector<Tensor>& exp_avg_sq,
                const AdamWScalars& s) {
  const int device = params[0].device().index;
  DeviceGuard guard(device);
  cudaStream_t stream = compute_stream(device);
  const bool counted = !s.step_counts.empty();
  // The counts advance first: every update launch below reads its tensors' new counts.
  if (counted) advance_counts(s.step_counts, scalar_pointer(s.skip_if_nonzero), stream);
  dispatch_param_grad(params[0].dtype(), grads[0].dtype(), "adamw_step", [&](auto p_tag, auto g_tag) {
    using P = decltype(p_tag);
    using G = decltype(g_tag);
    AdamWArgs<P> args{};
    args.decay = static_cast<P>(s.decay);
    args.beta1 = static_cast<P>(s.beta1);
    args.beta2 = static_cast<P>(s.beta2);
    args.one_minus_beta1 = static_cast<P>(1.0 - s.beta1);
    args.one_minus_beta2 = static_cast<P>(1.0 - s.beta2);
    args.step_size = static_cast<P>(s.step_size);
    args.bias_correction2_sqrt = static_cast<P>(s.bias_correction2_sqrt);
    args.eps = static_cast<P>(s.eps);
    args.skip = scalar_pointer(s.skip_if_nonzero);
    args.lr = s.lr;
    args.weight_decay = s.weight_decay;
    args.beta1_pow_base = s.beta1;
    args.beta2_pow_base = s.beta2;
    args.lr_device = s.lr_tensor.defined() ? static_cast<const double*>(s.lr_tensor.raw_data()) : nullptr;
    if (counted) {
      mta::apply<5>({&params, &grads, &exp_avg, &exp_avg_sq, &s.step_counts},
                    [&](const TensorListMeta<5>& meta, int blocks) {
                      adamw_kernel<P, G, 5><<<blocks, mta::kBlock, 0, stream>>>(meta, args);
                      LIFTOFF_LAUNCH_CHECK();
                    });
    } else {
      mta::apply<4>({&params, &grads, &exp_avg, &exp_avg_sq}, [&](const TensorListMeta<4>& meta, int blocks) {
        adamw_kernel<P, G, 4><<<blocks, mta::kBlock, 0, stream>>>(meta, args);
        LIFTOFF_LAUNCH_CHECK();
      });
    }
  });
}

}  // namespace liftoff::cuda
