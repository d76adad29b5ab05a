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
  double step_size;              // lr / (1 - beta1^t)
  double bias_correction2_sqrt;  // sqrt(1 - beta2^t)
  Tensor skip_if_nonzero;
};

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
