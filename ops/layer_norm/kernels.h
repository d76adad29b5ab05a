// Kernels behind layer_norm() and group_norm() (ops/group_norm), which are the same computation: x seen as
// `rows` rows of `cols` contiguous values, each row normalised by its own mean and variance, then an affine
// map whose weight/bias index depends on the position:
//   layer_norm: rows = prod(leading dims), cols = prod(normalized_shape), affine index = col
//               (groups = 1, inner = 1);
//   group_norm: rows = N * G, cols = (C/G) * HW, affine index = channel = (row % G) * (C/G) + col / HW
//               (groups = G, inner = HW).
// Tensors are contiguous; the front checks them and allocates every output. mean and rstd ([rows]) are f32
// for f32/f16/bf16 data and f64 for f64 (the statistics' precision).
#pragma once
#include "runtime/tensor.h"

namespace liftoff {

struct RowNormShape {
  int64_t rows = 0, cols = 0;
  int64_t groups = 1;  // rows cycle through `groups` blocks of affine parameters
  int64_t inner = 1;   // consecutive values of a row that share one affine parameter
  double eps = 1e-5;
  int64_t affine_per_group() const { return cols / inner; }
  int64_t affine_size() const { return groups * affine_per_group(); }  // the weight's and bias's numel
};

namespace cpu {
// y = (x - mean) * rstd * weight + bias; weight and bias may be undefined (1 and 0).
void row_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y,
                      const Tensor& mean, const Tensor& rstd, const RowNormShape& s);
// Each of gx, gw, gb is written when defined. weight may be undefined (1).
void row_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                       const Tensor& weight, const Tensor& gx, const Tensor& gw, const Tensor& gb,
                       const RowNormShape& s);
}  // namespace cpu
namespace cuda {
void row_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y,
                      const Tensor& mean, const Tensor& rstd, const RowNormShape& s);
void row_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                       const Tensor& weight, const Tensor& gx, const Tensor& gw, const Tensor& gb,
                       const RowNormShape& s);
}  // namespace cuda
}  // namespace liftoff
