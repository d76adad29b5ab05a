// Multi-tensor apply: each launch carries up to kMaxTensors tensors' pointers and sizes, and a block ->
// (tensor, chunk) table, in a struct passed by value as a kernel parameter (<= 4 KB). No host-to-device copy,
// no sync; a long parameter list takes several launches, a big tensor spans several launches' chunks.
#include <cmath>

#include "ops/optimizer_step/kernels.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

namespace {
constexpr int64_t kChunk = 65536;  // elements per block
constexpr int kMaxBlocks = 320;
constexpr int kApplyBlock = 512;

template <int Depth>
struct MaxTensors;
template <>
struct MaxTensors<3> {
  static constexpr int value = 48;
};
template <>
struct MaxTensors<4> {
  static constexpr int value = 36;
};

// Lists 0..Depth-1: params, grads, then the optimizer state tensors.
template <int Depth>
struct TensorListMeta {
  static constexpr int kMaxTensors = MaxTensors<Depth>::value;
  void* ptrs[Depth][kMaxTensors];
  int64_t sizes[kMaxTensors];
  unsigned char block_tensor[kMaxBlocks];
  int block_chunk[kMaxBlocks];
};

template <class A>
struct SgdArgs {
  A lr, momentum, weight_decay;
  bool nesterov, use_momentum;
};
template <class A>
struct AdamWArgs {
  A decay, beta1, beta2, one_minus_beta1, one_minus_beta2, step_size, bias_correction2_sqrt, eps;
};

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

// P: parameter/state type (float or double); G: gradient type.
template <class P, class G>
__global__ void sgd_kernel(TensorListMeta<3> meta, SgdArgs<P> args) {
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
    p[i] -= args.lr * d;
  }
}

template <class P, class G>
__global__ void adamw_kernel(TensorListMeta<4> meta, AdamWArgs<P> args) {
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

// Packs lists[d][t] (d < Depth; a missing list gives null pointers) into as few launches as the meta allows.
template <int Depth, class Launch>
void multi_tensor_apply(const std::vector<const std::vector<Tensor>*>& lists, Launch&& launch) {
  constexpr int kMaxTensors = TensorListMeta<Depth>::kMaxTensors;
  TensorListMeta<Depth> meta{};
  int tensors = 0;
  int blocks = 0;
  const std::vector<Tensor>& params = *lists[0];
  for (size_t t = 0; t < params.size(); ++t) {
    const int64_t n = params[t].numel();
    if (n == 0) continue;
    for (int d = 0; d < Depth; ++d) {
      meta.ptrs[d][tensors] = lists[d] != nullptr ? (*lists[d])[t].raw_data() : nullptr;
    }
    meta.sizes[tensors] = n;
    ++tensors;
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    LIFTOFF_CHECK(chunks <= 0x7fffffff, ShapeError, "multi-tensor apply: tensor of ", n,
                  " elements is too large");
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      meta.block_tensor[blocks] = static_cast<unsigned char>(tensors - 1);
      meta.block_chunk[blocks] = static_cast<int>(chunk);
      ++blocks;
      const bool last_chunk = chunk == chunks - 1;
      if (blocks == kMaxBlocks || (tensors == kMaxTensors && last_chunk)) {
        launch(meta, blocks);
        blocks = 0;
        if (last_chunk) {
          tensors = 0;
        } else {  // the current tensor continues in the next launch, in slot 0
          for (int d = 0; d < Depth; ++d) meta.ptrs[d][0] = meta.ptrs[d][tensors - 1];
          meta.sizes[0] = meta.sizes[tensors - 1];
          tensors = 1;
        }
      }
    }
  }
  if (blocks > 0) launch(meta, blocks);
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

void sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
              const std::vector<Tensor>& momentum_buffers, const SgdScalars& s) {
  const int device = params[0].device().index;
  DeviceGuard guard(device);
  cudaStream_t stream = compute_stream(device);
  const bool use_momentum = !momentum_buffers.empty();
  dispatch_param_grad(params[0].dtype(), grads[0].dtype(), "sgd_step", [&](auto p_tag, auto g_tag) {
    using P = decltype(p_tag);
    using G = decltype(g_tag);
    const SgdArgs<P> args{static_cast<P>(s.lr), static_cast<P>(s.momentum), static_cast<P>(s.weight_decay),
                          s.nesterov, use_momentum};
    multi_tensor_apply<3>({&params, &grads, use_momentum ? &momentum_buffers : nullptr},
                          [&](const TensorListMeta<3>& meta, int blocks) {
                            sgd_kernel<P, G><<<blocks, kApplyBlock, 0, stream>>>(meta, args);
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
                            static_cast<P>(s.eps)};
    multi_tensor_apply<4>({&params, &grads, &exp_avg, &exp_avg_sq},
                          [&](const TensorListMeta<4>& meta, int blocks) {
                            adamw_kernel<P, G><<<blocks, kApplyBlock, 0, stream>>>(meta, args);
                            LIFTOFF_LAUNCH_CHECK();
                          });
  });
}

}  // namespace liftoff::cuda
