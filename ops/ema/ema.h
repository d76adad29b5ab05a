// Exponential moving average of weights, as multi-tensor ops (no autograd): the update behind ModelEma
// (models/train/ema.h, timm's ModelEmaV2 / torch.optim.swa_utils' EMA) and the in-place exchange that lets
// an evaluation use the averaged weights without moving any tensor (a captured CUDA graph keeps reading the
// same addresses). Lists of same-shaped, contiguous tensors, one dtype (f32 or f64) and one device; CUDA
// packs up to a few dozen tensors per launch (no host-to-device copy, no host sync: capturable).
#pragma once
#include <vector>

#include "runtime/tensor.h"

namespace liftoff {

// averaged[i] = decay * averaged[i] + (1 - decay) * current[i], in place; decay in [0, 1].
// Mismatched lists, shapes, dtypes, devices or layouts throw ValueError / ShapeError / DTypeError /
// DeviceError naming the entry.
void ema_update(const std::vector<Tensor>& averaged, const std::vector<Tensor>& current, double decay);

// Exchanges the contents of a[i] and b[i] in place (same checks as ema_update).
void swap_contents(const std::vector<Tensor>& a, const std::vector<Tensor>& b);

}  // namespace liftoff
