#pragma once
#include "runtime/tensor.h"

namespace liftoff {

// Layer normalisation as PyTorch's F.layer_norm(x, normalized_shape, weight, bias, eps): x [*, D1..Dk] with
// normalized_shape = [D1..Dk] (its last k sizes); each of the prod(leading) rows of D1*..*Dk values becomes
// (x - mean) / sqrt(var + eps) * weight + bias, var biased (divided by the count). weight and bias are
// normalized_shape-shaped or undefined (1 and 0). Output: x's shape and dtype, contiguous.
// dtypes: CPU f32, f64 (double sums); CUDA f32, f64, f16/bf16 I/O with f32 statistics (fused row kernels).
// weight and bias share x's dtype and device. Autocast: f16/bf16 CUDA input is computed in f32 and the
// output is f32 (PyTorch's autocast list; weight/bias are cast to f32 too). Backward:
// gx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = gy * weight, xhat = (x - mean) * rstd;
// gweight = sum over rows of gy * xhat, gbias = sum over rows of gy (deterministic, no atomics).
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);

}  // namespace liftoff
