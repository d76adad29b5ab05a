// Device-side pieces of mixed precision with loss scaling (PyTorch's torch.amp internals). Every scale and
// flag is a one-element tensor on the device of the data it applies to, so a training step never reads a
// device value on the host (DESIGN.md principle 4). models/train/amp.h builds the GradScaler from these.
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/tensor.h"

namespace liftoff {

// x * factor, elementwise, with factor a one-element f32 tensor on x's device (the loss scale). The result
// has x's dtype (f32/f64 on the CPU, also f16/bf16 on CUDA, computed in f32, f64 in f64). Differentiable in x
// only: backward gx = gy * factor (the factor is a constant of the graph; it is read when backward runs, so
// do not change it between forward and backward).
Tensor scale_by(const Tensor& x, const Tensor& factor);

// PyTorch's _amp_foreach_non_finite_check_and_unscale_: for every defined gradient, g *= inv_scale in place
// (computed in f32, f64 in f64), and found_inf = 1 when any element of any gradient is inf or NaN before
// scaling. found_inf is only ever set, never cleared: zero it before the first call of a step. Gradients are
// contiguous, floating (f32, f64, f16, bf16; mixed dtypes allowed) and on the device of inv_scale and
// found_inf (both one-element f32). Undefined entries are skipped. CUDA: multi-tensor apply, no host sync.
void unscale_and_check(const std::vector<Tensor>& grads, const Tensor& inv_scale, const Tensor& found_inf);

// inv_scale = 1 / scale (in f64, rounded to f32, as PyTorch), both one-element f32 on one device, no host
// sync.
void inverse_scale(const Tensor& scale, const Tensor& inv_scale);

// PyTorch's _amp_update_scale_, in one tiny kernel: when found_inf is non-zero (or NaN), scale *=
// backoff_factor and growth_tracker = 0 (and skipped_steps += 1 when given); otherwise growth_tracker += 1,
// and once it reaches growth_interval, scale *= growth_factor (kept unchanged if that overflows f32) and
// growth_tracker = 0. scale and found_inf: one-element f32; growth_tracker: one-element i32 or i64;
// skipped_steps: undefined or a one-element i64; all on one device. A static loss scale uses growth_factor =
// backoff_factor = 1.
void update_scale(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                  double growth_factor, double backoff_factor, int64_t growth_interval,
                  const Tensor& skipped_steps = Tensor());

}  // namespace liftoff
