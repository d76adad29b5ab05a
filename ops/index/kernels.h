// Kernels behind index_select/gather/scatter_add: shapes, dtypes and (on the CPU) index values already
// checked. index is an i64 tensor with any strides (stride 0 where index_select's index is broadcast), dim
// already wrapped.
#pragma once
#include "runtime/tensor.h"

namespace liftoff {
namespace cpu {
// out (contiguous, index's shape)[p] = x[p with coordinate dim = index[p]].
void gather(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out);
// out (contiguous) [p with coordinate dim = index[p]] += src[p], for p in index's shape (src any strides).
void scatter_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src);
}  // namespace cpu
namespace cuda {
void gather(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out);
void scatter_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src);
}  // namespace cuda
}  // namespace liftoff
