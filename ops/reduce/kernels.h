// Kernels behind the reductions. Inputs checked by the fronts; outputs preallocated and contiguous.
#pragma once
#include "ops/common/elementwise.h"
#include "ops/reduce/reducers.h"
#include "runtime/tensor.h"

namespace liftoff {
namespace cpu {
// x contiguous viewed as [outer, extent, inner]; values ([outer * inner], x's dtype) and indices (i64; max
// and min only) receive the reduction of each (outer, inner) column; either may be undefined.
void reduce_forward(const Tensor& x, int64_t outer, int64_t extent, int64_t inner, const ReduceParams& params,
                    const Tensor& values, const Tensor& indices);
// gx [outer, extent, inner] = gy[o, i] where r == indices[o, i], else 0 (max/min along a dimension).
void index_backward(const Tensor& gy, const Tensor& indices, int64_t outer, int64_t extent, int64_t inner,
                    const Tensor& gx);
void reduce_grad(ReduceGradKind kind, double param, const ElementwisePlan& plan, const Tensor& x,
                 const Tensor& gy, const Tensor& stat, const Tensor& gx);
}  // namespace cpu
namespace cuda {
void reduce_forward(const Tensor& x, int64_t outer, int64_t extent, int64_t inner, const ReduceParams& params,
                    const Tensor& values, const Tensor& indices);
void index_backward(const Tensor& gy, const Tensor& indices, int64_t outer, int64_t extent, int64_t inner,
                    const Tensor& gx);
void reduce_grad(ReduceGradKind kind, double param, const ElementwisePlan& plan, const Tensor& x,
                 const Tensor& gy, const Tensor& stat, const Tensor& gx);
}  // namespace cuda
}  // namespace liftoff
