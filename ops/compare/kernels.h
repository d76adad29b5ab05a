// Kernels behind the comparisons: a and b (when a tensor) of one dtype; y a dense b8 tensor; the plan over
// the tensor operands in order.
#pragma once
#include "ops/common/elementwise.h"
#include "runtime/macros.h"
#include "runtime/tensor.h"

namespace liftoff {

enum class CompareOp { eq, ne, lt, le, gt, ge };

template <CompareOp Op>
struct CompareFn {
  template <class X, class Y>
  LIFTOFF_HD bool operator()(X a, Y b) const {
    if constexpr (Op == CompareOp::eq) {
      return a == b;
    } else if constexpr (Op == CompareOp::ne) {
      return a != b;
    } else if constexpr (Op == CompareOp::lt) {
      return a < b;
    } else if constexpr (Op == CompareOp::le) {
      return a <= b;
    } else if constexpr (Op == CompareOp::gt) {
      return a > b;
    } else {
      return a >= b;
    }
  }
};

template <class Fn>
void visit_compare(CompareOp op, Fn&& fn) {
  switch (op) {
    case CompareOp::eq:
      fn(CompareFn<CompareOp::eq>{});
      return;
    case CompareOp::ne:
      fn(CompareFn<CompareOp::ne>{});
      return;
    case CompareOp::lt:
      fn(CompareFn<CompareOp::lt>{});
      return;
    case CompareOp::le:
      fn(CompareFn<CompareOp::le>{});
      return;
    case CompareOp::gt:
      fn(CompareFn<CompareOp::gt>{});
      return;
    case CompareOp::ge:
      fn(CompareFn<CompareOp::ge>{});
      return;
  }
}

namespace cpu {
void compare_forward(CompareOp op, const ElementwisePlan& plan, const Tensor& a, const ElementOperand& b,
                     const Tensor& y);
}  // namespace cpu
namespace cuda {
void compare_forward(CompareOp op, const ElementwisePlan& plan, const Tensor& a, const ElementOperand& b,
                     const Tensor& y);
}  // namespace cuda
}  // namespace liftoff
