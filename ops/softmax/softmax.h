#pragma once
#include "runtime/tensor.h"

namespace liftoff {

// torch.softmax(x, dim) = exp(x - max) / sum(exp(x - max)) along dim, and torch.log_softmax(x, dim) =
// x - max - log(sum(exp(x - max))), numerically stable (a running maximum, one pass for the statistics).
// Any shape (a 0-d tensor accepts dim 0 / -1), negative dims count from the end. Dtypes: f32/f64 on the
// CPU (accumulated in f64), also f16/bf16 on CUDA (computed in f32, returned in the input dtype). Under
// autocast an f16/bf16 CUDA input is computed and returned in f32, as PyTorch's autocast (softmax is on its
// fp32 list). The result is contiguous. An empty dim gives an empty result.
// Backward: softmax gx = y * (gy - sum(gy * y)); log_softmax gx = gy - exp(y) * sum(gy) (sums along dim).
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

}  // namespace liftoff
