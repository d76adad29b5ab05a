// Kernels behind ema_update() and swap_contents(): lists checked by the front (same length, shapes, one
// dtype f32/f64, one device, contiguous, no empty list).
#pragma once
#include <vector>

#include "runtime/tensor.h"

namespace liftoff {
namespace cpu {
void ema_update(const std::vector<Tensor>& averaged, const std::vector<Tensor>& current, double decay);
void swap_contents(const std::vector<Tensor>& a, const std::vector<Tensor>& b);
}  // namespace cpu
namespace cuda {
void ema_update(const std::vector<Tensor>& averaged, const std::vector<Tensor>& current, double decay);
void swap_contents(const std::vector<Tensor>& a, const std::vector<Tensor>& b);
}  // namespace cuda
}  // namespace liftoff
