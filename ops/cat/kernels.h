// Kernels behind cat(): inputs checked, one dtype, one device, shapes equal but along dim; out preallocated
// (any dense layout). Each input is copied to its place along dim, in order.
#pragma once
#include <vector>

#include "runtime/tensor.h"

namespace liftoff {
namespace cpu {
void cat_forward(const std::vector<Tensor>& inputs, int64_t dim, const Tensor& out);
}  // namespace cpu
namespace cuda {
void cat_forward(const std::vector<Tensor>& inputs, int64_t dim, const Tensor& out);
}  // namespace cuda
}  // namespace liftoff
