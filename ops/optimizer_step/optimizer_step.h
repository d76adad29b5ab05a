// Fused multi-tensor optimizer updates (no autograd): one pass over every parameter of a step.
// PyTorch's update rules; parameters, gradients and state are lists of same-shaped tensors on one device.
// Parameters and state are updated in place (contiguous; one dtype, f32 or f64); gradients have the
// parameters' dtype, or (CUDA, f32 master weights) f16/bf16. An entry whose gradient is undefined is skipped,
// as PyTorch skips parameters without .grad. CUDA launches pack up to a few dozen tensors' pointers into the
// kernel parameters: no host-to-device copy, no host sync.
// skip_if_nonzero (optional): an f32 one-element flag on the parameters' device, e.g. AMP's found_inf. When
// it is non-zero (or NaN) the step leaves parameters and state bit-identical. CUDA decides on the device
// (every kernel block reads the flag: no host sync); the CPU reads it on the host.
// Mismatched lists, shapes, dtypes or devices throw ValueError / ShapeError / DTypeError / DeviceError naming
// the parameter index.
#pragma once
#include <vector>

#include "runtime/tensor.h"

namespace liftoff {

struct SgdHyper {
  double lr = 0.1;
  // Optional: a one-element f32 tensor on the parameters' device holding the learning rate, read when the
  // step runs (so a captured CUDA graph follows the LR schedule); `lr` is then ignored.
  Tensor lr_tensor;
  double momentum = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;  // needs momentum > 0
};

// g' = g + wd * p; buf = momentum * buf + g'; p -= lr * (nesterov ? g' + momentum * buf : buf).
// momentum_buffers are zero-initialised by the caller and ignored (may be empty) when momentum == 0.
void sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
              const std::vector<Tensor>& momentum_buffers, const SgdHyper& hyper,
              const Tensor& skip_if_nonzero = Tensor());

struct AdamWHyper {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
  int64_t step = 1;  // 1-based count of this update, for bias correction (unless step_counts are given)
  // Optional: the learning rate as a one-element f64 tensor on the parameters' device, read when the step
  // runs (a captured CUDA graph follows the LR schedule); `lr` is then ignored. f64: the exact value, so the
  // update is the one `lr` would give.
  Tensor lr_tensor;
  // Optional (torch's capturable AdamW): one update count per parameter, an i64 one-element tensor on the
  // parameters' device, parallel to params (entries without a gradient are skipped with theirs). The step
  // adds 1 to each count (not when skipped by skip_if_nonzero) and takes t for the bias corrections from it;
  // on CUDA all of this happens on the device (no host sync: capturable), `step` is then ignored. On the CPU
  // the counts are read on the host and parameters at different counts update in one pass per count.
  std::vector<Tensor> step_counts;
};

// p *= 1 - lr * wd; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)   (computed as PyTorch does:
// p -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)). The scalars are computed in double, on the
// host or (with step_counts on CUDA) in the kernel with the same IEEE operations; only pow() may differ, by
// an ulp of the double, from the host's (so rarely an ulp of an f32 scalar).
void adamw_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                const std::vector<Tensor>& exp_avg, const std::vector<Tensor>& exp_avg_sq,
                const AdamWHyper& hyper, const Tensor& skip_if_nonzero = Tensor());

// sums[i] += grads[i] for every i where both are defined (no autograd): the gradient accumulation of several
// micro-batches as one multi-tensor launch per few dozen tensors on CUDA, instead of one kernel per
// parameter. Pairs: same shape, dtype (f32, f64, f16, bf16) and device, both dense in one layout; sums[i] is
// updated in place. Each sum is the exact elementwise add of the one-tensor accumulation (16-bit floats add
// in f32), so results do not depend on which path ran.
void accumulate_gradients(const std::vector<Tensor>& sums, const std::vector<Tensor>& grads);

}  // namespace liftoff
