// Kernels behind add(): inputs checked, same shape/dtype/device, contiguous; y preallocated.
#pragma once
#include "runtime/tensor.h"

namespace liftoff {
namespace cpu {
void add_forward(const Tensor& a, const Tensor& b, const Tensor& y);
}  // namespace cpu
namespace cuda {
void add_forward(const Tensor& a, const Tensor& b, const Tensor& y);
}  // namespace cuda
}  // namespace liftoff
