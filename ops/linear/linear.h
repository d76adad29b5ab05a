#pragma once
#include "runtime/tensor.h"

namespace liftoff {

// a [M, K] @ b [K, N] -> [M, N].
Tensor matmul(const Tensor& a, const Tensor& b);
// x [N, in] @ weight[out, in]^T + bias[out] -> [N, out]; bias may be undefined.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace liftoff
