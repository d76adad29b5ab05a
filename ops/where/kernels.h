// Kernels behind where/masked_fill: y = cond ? a : b over the plan (tensor operands in the order cond, a, b);
// a and b (when tensors) have y's dtype; cond is b8.
#pragma once
#include "ops/common/elementwise.h"
#include "runtime/macros.h"
#include "runtime/tensor.h"

namespace liftoff {

struct SelectFn {
  template <class A>
  LIFTOFF_HD A operator()(bool c, A a, A b) const {
    return c ? a : b;
  }
};

namespace cpu {
void where_forward(const ElementwisePlan& plan, const Tensor& cond, const ElementOperand& a,
                   const ElementOperand& b, const Tensor& y);
}  // namespace cpu
namespace cuda {
void where_forward(const ElementwisePlan& plan, const Tensor& cond, const ElementOperand& a,
                   const ElementOperand& b, const Tensor& y);
}  // namespace cuda
}  // namespace liftoff
