// Kernels behind sgd_step() and adamw_step(): lists already checked (same length, shapes, one device, params
// and state contiguous, grads contiguous), entries with undefined gradients removed. Scalars precomputed on
// the host. skip_if_nonzero (undefined, or an f32 [1] flag on the params' device) is honoured on the device
// by the CUDA kernels; on the CPU the front reads it and does not call the kernel when set.
#pragma once
#include <vector>

#include "runtime/tensor.h"

namespace liftoff {

struct SgdScalars {
  double lr, momentum, weight_decay;
  bool nesterov;
  Tensor skip_if_nonzero;
  Tensor
      lr_tensor;  // undefined, or the f32 [1] learning rate on the params' device (CPU: lr holds its value)
};
struct AdamWScalars {
  double lr, beta1, beta2, eps, weight_decay;
  double decay;                  // 1 - lr * weight_decay as one fused multiply-add (host and device alike)
  double step_size;              // lr / (1 - beta1^t)
  double bias_correction2_sqrt;  // sqrt(1 - beta2^t)
  Tensor skip_if_nonzero;
  // CUDA only, capturable: undefined, or the f64 [1] learning rate on the device (`lr` then unused).
  Tensor lr_tensor;
  // CUDA only, capturable: empty, or the i64 counts parallel to params; the kernels add 1 to each (unless
  // skipped) and compute decay, step_size and bias_correction2_sqrt from them (the fields above unused).
  std::vector<Tensor> step_counts;
};

// The host's scalars of update number t (1-based) at learning rate lr.
AdamWScalars adamw_scalars(double lr, double beta1, double beta2, double eps, double weight_decay, int64_t t);

namespace cpu {
void sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
              const std::vector<Tensor>& momentum_buffers, const SgdScalars& s);
void adamw_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                const std::vector<Tensor>& exp_avg, const std::vector<Tensor>& exp_avg_sq,
                const AdamWScalars& s);
}  // namespace cpu
namespace cuda {
// sums[i] += grads[i]; checked by the front: same shapes, one dtype and device, each pair dense in one
// layout.
void accumulate_gradients(const std::vector<Tensor>& sums, const std::vector<Tensor>& grads);
void sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
              const std::vector<Tensor>& momentum_buffers, const SgdScalars& s);
void adamw_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                const std::vector<Tensor>& exp_avg, const std::vector<Tensor>& exp_avg_sq,
                const AdamWScalars& s);
}  // namespace cuda
}  // namespace liftoff
