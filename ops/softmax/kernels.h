// Kernels behind softmax/log_softmax: tensors contiguous, viewed as [outer, extent, inner] with the softmax
// along extent; all of one floating dtype; outputs preallocated.
#pragma once
#include "runtime/tensor.h"

namespace liftoff {
namespace cpu {
void softmax_forward(const Tensor& x, int64_t outer, int64_t extent, int64_t inner, bool log,
                     const Tensor& y);
void softmax_backward(const Tensor& y, const Tensor& gy, int64_t outer, int64_t extent, int64_t inner,
                      bool log, const Tensor& gx);
}  // namespace cpu
namespace cuda {
void softmax_forward(const Tensor& x, int64_t outer, int64_t extent, int64_t inner, bool log,
                     const Tensor& y);
void softmax_backward(const Tensor& y, const Tensor& gy, int64_t outer, int64_t extent, int64_t inner,
                      bool log, const Tensor& gx);
}  // namespace cuda
}  // namespace liftoff
